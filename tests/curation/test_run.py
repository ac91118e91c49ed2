"""The curation driver with scripted agents: batching, outputs, resume, failures, refusals, ablations."""

from __future__ import annotations

import json

import pytest

from generate.common.errors import PartialFailure, UsageError
from generate.common.jsonl import read_jsonl
from generate.journal import request_key
from rewards.curate import main
from rewards.curation import CurateConfig, Curator
from generate.backends.base import Completion, TokenLogprob
from tests.curation.fakes import GOOD_DIGIT, CurationBackend, model_of, story_of
from tests.curation.test_retrieval_and_pairs import story, write_jsonl
from tests.embedders import CountingEmbedder

TEXTS = {"Comets": ["A brilliant comet hums.", "The comet came.", "A brilliant tail of ice."],
         "Robots": ["A brilliant robot grieves.", "Robot was sad."], "Oceans": ["Waves."]}


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.setenv("SCIFI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("SCIFI_REFERENCE_DIR", raising=False)
    rows = [story(f"single/{p}/{i}", p, t, aspect=p.lower()) for p, texts in TEXTS.items() for i, t in enumerate(texts)]
    stories = write_jsonl(tmp_path / "stories.jsonl", rows)
    exemplars = write_jsonl(tmp_path / "exemplars.jsonl", [{"prompt": "Comets", "response": "Ice sang."}])
    return tmp_path, stories, exemplars


def curate(files, backend=None, out="out", **options):
    tmp_path, stories, exemplars = files
    cfg = CurateConfig(candidates=[str(stories)], out=str(tmp_path / out), exemplars=str(exemplars), k=1,
                       chunk_responses=2, **options)
    backend = backend or CurationBackend()
    curator = Curator(cfg, model=model_of(backend), embedder=CountingEmbedder())
    return curator, backend


def judgments(out):
    return {j["key"]: {k: v for k, v in j.items() if k != "seconds"} for j in read_jsonl(out / "judgments.jsonl")}


def test_a_run_batches_each_phase_and_writes_every_output(files):
    curator, backend = curate(files)
    prefs = curator.run()
    out = prefs.parent
    assert backend.batches[:3] == [4, 8, 8]  # chunk of 2: debate (2 x 2), judge (2 x 4 views), reflect
    rows = list(read_jsonl(out / "judgments.jsonl"))
    assert len(rows) == 6 and all(r["usage"]["calls"] == 10 for r in rows)
    assert all(r["examples"] == ["exemplar:1"] for r in rows)
    pairs = list(read_jsonl(prefs))
    # Comets: 2 good x 1 bad; Robots: 1 x 1; Oceans has one response: no pair.
    assert len(pairs) == 3 and {p["prompt_sha256"] for p in pairs} == {rows[0]["prompt_sha256"], rows[3]["prompt_sha256"]}
    assert pairs[0]["prompt"][0]["content"].startswith("Writing task: Comets")
    manifest = json.loads((out / "manifest.json").read_text())
    counts = manifest["counts"]
    assert (counts["judged"], counts["good"], counts["pairs"], counts["calls_per_response"]) == (6, 3, 3, 10.0)
    assert manifest["retrieval"]["exemplars"]["n"] == 1 and "curation:judge" in manifest["template_sha256"]


def test_a_rerun_replays_finished_calls_and_gives_the_same_outputs(files):
    curator, first = curate(files)
    prefs = curator.run()
    out = prefs.parent
    before, pairs = judgments(out), prefs.read_text()
    calls = (out / "calls.jsonl").read_text().splitlines(keepends=True)
    kept = calls[:len(calls) // 2]
    (out / "calls.jsonl").write_text("".join(kept) + calls[len(kept)][:30])  # a torn last line
    lines = (out / "judgments.jsonl").read_text().splitlines(keepends=True)
    (out / "judgments.jsonl").write_text(lines[0] + lines[1][:25])
    prefs.unlink()

    curator, second = curate(files)
    curator.run()
    kept_keys = {json.loads(line)["key"] for line in kept}
    assert second.requests and not {request_key(curator.cfg.model, r) for r in second.requests} & kept_keys
    assert len(second.requests) < len(first.requests)
    assert judgments(out) == before and prefs.read_text() == pairs

    curator, third = curate(files)
    curator.run()
    assert third.requests == []


def test_a_failed_response_is_recorded_and_retried_with_new_seeds(files):
    broken = CurationBackend(lists=lambda agent, s: " ..." if "Waves" in s and agent == "negative" else " Fine.")
    curator, _ = curate(files, broken)
    with pytest.raises(PartialFailure, match="1 response"):
        curator.run()
    out = curator.out
    (failure,) = read_jsonl(out / "failed.jsonl")
    assert failure["attempt"] == 0 and failure["agent"] == "negative" and "no numbered list" in failure["reason"]
    assert failure["usage"]["calls"] == 4 and len(judgments(out)) == 5
    assert (out / "preferences.jsonl").exists()

    curator, fixed = curate(files)
    curator.run()
    assert len(judgments(out)) == 6 and len(list(read_jsonl(out / "failed.jsonl"))) == 1
    # Only the call whose output stayed unusable is asked with new seeds: the positive list that
    # finished is replayed from the journal, not asked again.
    asked = [r for r in fixed.requests if "Waves" in r.messages[0]["content"]]
    old = [r for r in broken.requests if "Waves" in r.messages[0]["content"]]
    debate = lambda requests, word: {r.seed for r in requests if word in r.messages[0]["content"]  # noqa: E731
                                     and r.prefill == "1."}
    assert debate(old, "strength") and not debate(asked, "strength")
    assert debate(asked, "weakness") and not debate(asked, "weakness") & debate(old, "weakness")
    assert failure["reseed"] == [["negative", "single"]]


class DigitlessJudge(CurationBackend):
    """The judge answers one story's verdicts with no digit among its top alternatives, as the
    135M model does now and then after a prefilled "Score:"."""

    def answer(self, r):
        reply = super().answer(r)
        if "Waves" in story_of(r) and GOOD_DIGIT.search(r.messages[-1]["content"]):
            words = {" The": -0.2, " story": -1.9}
            return Completion(text=" The", prompt_tokens=50, completion_tokens=2,
                              logprobs=[TokenLogprob(" ", -0.01, words), TokenLogprob(" The", -0.2, words)])
        return reply


def test_a_greedy_verdict_without_a_digit_fails_for_good_and_the_pairs_stand(files, caplog):
    """A logprob verdict is read greedily: new seeds would give the same digitless reply, so the
    response fails for good at once (it used to be retried forever, and `review-lab signals` stopped
    at its curation step); the pairs of the judged responses stand, the loss is stated."""
    curator, _ = curate(files, DigitlessJudge())
    prefs = curator.run()  # no PartialFailure: nothing a re-run could change
    out = prefs.parent
    (failure,) = read_jsonl(out / "failed.jsonl")
    assert failure["final"] and failure["cause"] == "deterministic" and failure["phase"] == "judge"
    assert "failed for good and are in no pair" in caplog.text and len(judgments(out)) == 5
    assert len(list(read_jsonl(prefs))) == 3
    curator, again = curate(files, DigitlessJudge())
    curator.run()
    assert again.requests == []  # judged ones skipped, the final one not retried


def test_resuming_with_other_settings_is_refused(files):
    curate(files)[0].run()
    with pytest.raises(UsageError, match="without"):
        curate(files, without=["reflect"])[0].run()
    with pytest.raises(UsageError, match="verdict"):
        curate(files, verdict="sample")[0].run()


class MachineBackend(CurationBackend):
    """Verdicts from a backend that, like the hf one, picks its dtype by the machine."""

    NUMERICS = ("dtype",)

    def __init__(self, dtype: str):
        super().__init__()
        self.dtype = dtype

    def describe(self) -> dict:
        return {**super().describe(), "dtype": self.dtype}


def test_resuming_on_a_machine_that_computes_in_another_dtype_is_refused(files):
    curate(files, MachineBackend("bfloat16"), limit=2)[0].run()
    with pytest.raises(UsageError, match="dtype 'bfloat16' then, 'float32' now"):
        curate(files, MachineBackend("float32"))[0].run()
    curate(files, MachineBackend("float32"), limit=2)[0].run()  # nothing left to judge: nothing mixes
    curate(files, MachineBackend("bfloat16"))[0].run()


def test_an_ablation_can_replay_the_full_runs_journal(files):
    curator, _ = curate(files)
    full = curator.run().parent
    journal = str(full / "calls.jsonl")
    ablation, backend = curate(files, out="no_reflect", without=["reflect"], journal=journal)
    ablation.run()
    assert backend.requests == []  # debate and judge calls are the full run's, replayed
    full_rows, rows = judgments(full), judgments(ablation.out)
    assert {k: j["initial"] for k, j in rows.items()} == {k: j["initial"] for k, j in full_rows.items()}
    assert all(j["final"] == j["initial"] and "reflect" not in j for j in rows.values())


def test_bad_options_are_usage_errors(files):
    _, stories, _ = files
    with pytest.raises(UsageError, match="--without: 'retrieval' is not one of"):
        main(["--candidates", str(stories), "--without", "retrieval"])
    with pytest.raises(UsageError, match="--verdict: 'vote' is not one of: logprob, sample"):
        main(["--candidates", str(stories), "--verdict", "vote"])
    with pytest.raises(UsageError, match="--k 0"):
        Curator(CurateConfig(candidates=[str(stories)], out=str(files[0] / "x")),
                model=model_of(CurationBackend()), embedder=CountingEmbedder()).run()
