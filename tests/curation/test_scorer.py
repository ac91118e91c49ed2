"""The curation verdict as a scorer (`eval.scorers.curation`): the pipeline's own verdicts, one batch
per phase, identical stories judged once, retrieved passages shown to the agents."""

from __future__ import annotations

from eval.scorers.curation import CurationScorer, RetrievalIndex, Settings
from generate.common.jsonl import read_jsonl
from tests.curation.fakes import CurationBackend, model_of
from tests.curation.test_run import TEXTS, curate, files  # noqa: F401 - `files` is a fixture
from tests.embedders import CountingEmbedder

VERDICT_FIELDS = ("positive", "negative", "judge", "initial", "reflect", "final", "overturned")


def scorer(files, backend: CurationBackend, **options) -> CurationScorer:
    _, _, exemplars = files
    embedder = CountingEmbedder()
    return CurationScorer(model_of(backend), index=RetrievalIndex.build(embedder, exemplars), embedder=embedder,
                          **options)


def test_the_scorers_verdicts_are_the_curation_pipelines(files):
    curator, _ = curate(files)
    curator.run()
    judged = {(j["prompt"], j["text"]): j for j in read_jsonl(curator.out / "judgments.jsonl")}
    prompts = [p for p, texts in TEXTS.items() for _ in texts]
    texts = [t for ts in TEXTS.values() for t in ts]
    got = scorer(files, CurationBackend(), k=1).verdicts(prompts, texts)
    assert [v["status"] for v in got] == ["ok"] * len(texts)
    for prompt, text, verdict in zip(prompts, texts, got):
        expected = judged[(prompt, text)]
        assert {k: verdict.get(k) for k in VERDICT_FIELDS} == {k: expected.get(k) for k in VERDICT_FIELDS}
    assert [v["final"] for v in got] == [1, 0, 1, 1, 0, 0]  # "brilliant" is what the scripted judge likes


def test_one_batch_per_phase_and_identical_stories_are_judged_once():
    backend = CurationBackend()
    got = CurationScorer(model_of(backend)).verdicts(["Comets"] * 3, ["A brilliant comet.", "Dull.",
                                                                       "A brilliant comet."])
    assert backend.batches == [2 * 2, 2 * 4, 2 * 4]  # debate, judge (4 views), reflect, for 2 distinct stories
    assert got[0] == got[2] and got[0] is not got[2] and [v["final"] for v in got] == [1, 0, 1]
    assert "Passage 1" not in backend.requests[0].messages[0]["content"]  # no index: no passages


def test_retrieved_passages_reach_the_agents_and_failures_are_verdicts(files):
    backend = CurationBackend(lists=lambda agent, story: " ..." if "Waves" in story else " Fine.\n2. Good.")
    got = scorer(files, backend, k=1, settings=Settings(max_parse_retries=0)).verdicts(["Comets", "Oceans"],
                                                                                       ["Ice.", "Waves."])
    assert "Ice sang." in backend.requests[0].messages[0]["content"]
    assert got[0]["status"] == "ok" and got[1]["status"] == "failed" and got[1]["phase"] == "debate"
