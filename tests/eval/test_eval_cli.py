"""`review-lab eval`: outputs, resuming, missing reference corpus, and bad input."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from fakes import FakeScorer, ScriptedBackend, model

from eval.cli import main
from eval.metrics.catalog import RULE_METRICS
from eval.run import EvalConfig, Evaluator
from generate.common.cli import run_cli
from generate.backends import Completion
from generate.backends.base import TransientBackendError
from generate.common.errors import PartialFailure, UsageError
from tests.embedders import CountingEmbedder

ASPECTS = ["concepts", "logic", "characters", "world_building", "ethics"]
METRICS = [*ASPECTS, *(m.key for m in RULE_METRICS)]
OUTPUTS = ["scores.jsonl", "summary.json", "judge_stats.json", "summary.md", "judge_scores.png", "rule_metrics.png",
           "manifest.json"]
PROMPT = "Colonists on a comet discover that the ice remembers."


def story(framework: str, agent: str, text: str, drafts: list[str], writer: str, n: int) -> dict:
    return {"story_id": f"{framework}/p1/{agent}", "prompt_id": "p1", "aspect": "Strong Voice", "prompt": PROMPT,
            "framework": framework, "agent": agent, "model": writer, "text": text, "drafts": drafts,
            "feedback": [], "n_stories": n}


def write_stories(directory: Path, writer: str = "fake-writer") -> list[Path]:
    """A two-agent review run and a single-agent run on the same prompt, in two files."""
    review = directory / "review" / "stories.jsonl"
    single = directory / "single" / "stories.jsonl"
    for path in (review, single):
        path.parent.mkdir(parents=True)
    rows = [story("review", "humanistic", "The comet's ice sang the names of the drowned colonists at night.",
                  ["Ice on a comet remembered things."], writer, 2),
            story("review", "ecological", "Lichen crept over the frozen reactor while the comet dreamed of oceans.",
                  ["A comet. Ice. Memory."], writer, 2)]
    review.write_text("".join(json.dumps(r) + "\n" for r in rows))
    single.write_text(json.dumps(story("single", "single", "The colonists drilled, and the ice spoke back in "
                                       "their mothers' voices.", [], writer, 1)) + "\n")
    return [review, single]


class Fakes:
    def __init__(self) -> None:
        self.judge = ScriptedBackend({"logic": ["Score: 2"], "ethics": ["no idea"], "*": ["Score: 4"]})
        self.models = {"hf:fake-judge": model(self.judge), "fake-writer": model(FakeScorer())}


def evaluate(files: list[Path], out: Path, fakes: Fakes, embedder, **options) -> Path:
    cfg = EvalConfig(stories=[str(f) for f in files], out=str(out), judge="hf:fake-judge", judge_mode="sample",
                     samples=2, max_parse_retries=1, **options)
    return Evaluator(cfg, models=fakes.models, embedder=embedder).run()


def rows(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "scores.jsonl").read_text().splitlines()]


def test_evaluation_writes_scores_summary_table_plots_and_manifest(tmp_path, tiny_corpus, isolated_cache) -> None:
    fakes = Fakes()
    # 3 dimensions: the tiny corpus's 4 chunks are more, so volume gain is defined
    out = evaluate(write_stories(tmp_path), tmp_path / "eval", fakes, CountingEmbedder(dim=3),
                   reference_dir=str(tiny_corpus))
    for name in OUTPUTS:
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    scores = {r["story_id"]: r for r in rows(out)}
    assert len(scores) == 3
    review = scores["review/p1/humanistic"]
    assert review["concepts"] == 4.0 and review["logic"] == 2.0
    assert review["ethics"] is None  # never parsed: missing, not 0
    assert review["judge"]["parse_failures"] == 4 and review["judge"]["n_samples"]["ethics"] == 0
    assert review["surprisal"] > 0
    for key in ("kl", "novelty_cos", "volume_gain", "draft_to_final_similarity", "homogenization"):
        assert isinstance(review[key], float), key
    assert review["homogenization"] == scores["review/p1/ecological"]["homogenization"]
    single = scores["single/p1/single"]
    assert single["homogenization"] is None and single["draft_to_final_similarity"] is None

    assert review["missing"]["ethics"].startswith("no parseable Score line")
    assert single["missing"] == {"ethics": review["missing"]["ethics"], "homogenization": "one story per prompt",
                                 "draft_to_final_similarity": "no drafts (one writing round)"}

    summary = json.loads((out / "summary.json").read_text())
    assert [m["key"] for m in summary["metrics"]] == METRICS
    frameworks = summary["frameworks"]
    assert list(frameworks) == ["review", "single"]
    for fw in frameworks:
        assert list(frameworks[fw]) == METRICS
        assert all(set(s) == {"mean", "std", "se", "n", "n_clusters", "missing"} for s in frameworks[fw].values())
    # two stories of one prompt: their spread is known, how the mean would move on other prompts is not
    assert frameworks["review"]["concepts"] == {"mean": 4.0, "std": 0.0, "se": None, "n": 2, "n_clusters": 1,
                                                "missing": {}}
    assert frameworks["review"]["ethics"]["n"] == 0
    assert list(frameworks["review"]["ethics"]["missing"].values()) == [2]
    assert frameworks["review"]["homogenization"]["n"] == 1  # one prompt, counted once
    assert frameworks["single"]["homogenization"] == {"mean": None, "std": None, "se": None, "n": 0, "n_clusters": 0,
                                                      "missing": {"one story per prompt": 1}}
    judge = json.loads((out / "judge_stats.json").read_text())
    assert judge["review"]["parse_failure_rate"] == pytest.approx(8 / 24)
    table = (out / "summary.md").read_text()
    assert table.startswith("| Framework | Concepts | Logic | Characters | World-Building | Ethics | Surprisal | "
                            "KL Div. | 1-Cos Sim. | Volume Gain | Homogenization |")
    assert "| review | 4.00 ± 0.00 | 2.00 ± 0.00 |" in table  # one prompt: no se
    assert "- review, Ethics: 2 missing (2 × no parseable Score line" in table
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["kind"] == "evaluation" and manifest["provenance"]["reference"]["n_chunks"] == 4
    assert manifest["provenance"]["reference"]["metrics_version"] == manifest["provenance"]["metrics_version"] == 2
    assert manifest["provenance"]["reference"]["volume_eps"] == 1e-6
    assert manifest["provenance"]["judge"]["model"] == "scripted" and manifest["provenance"]["scorer"] == "writer"
    assert "judge:sample" in manifest["template_sha256"]


def test_rerun_skips_scored_stories_and_resumes_a_partial_file(tmp_path, tiny_corpus, counting_embedder,
                                                              isolated_cache) -> None:
    files = write_stories(tmp_path)
    fakes = Fakes()
    out = evaluate(files, tmp_path / "eval", fakes, counting_embedder, reference_dir=str(tiny_corpus))
    asked = len(fakes.judge.requests)
    evaluate(files, out, fakes, counting_embedder, reference_dir=str(tiny_corpus))
    assert len(fakes.judge.requests) == asked
    assert len(rows(out)) == 3

    lines = (out / "scores.jsonl").read_text().splitlines()
    (out / "scores.jsonl").write_text("\n".join(lines[:2]) + "\n" + lines[2][:20])  # torn last write
    evaluate(files, out, fakes, counting_embedder, reference_dir=str(tiny_corpus))
    assert sorted(r["story_id"] for r in rows(out)) == ["review/p1/ecological", "review/p1/humanistic",
                                                        "single/p1/single"]
    # The story cut off is scored again; its judge calls are replayed from judge_calls.jsonl.
    assert len(fakes.judge.requests) == asked
    assert len((out / "judge_calls.jsonl").read_text().splitlines()) == asked


def test_a_resumed_evaluation_adds_its_seconds_to_those_already_recorded(tmp_path, tiny_corpus, counting_embedder,
                                                                         isolated_cache, monkeypatch) -> None:
    """The benchmark's "where the time went" reads these seconds: an evaluation interrupted and
    resumed must account for both invocations, and an interruption must not lose what the
    finished chunks recorded."""
    files = write_stories(tmp_path)
    fakes = Fakes()
    calls = []
    score_chunk = Evaluator._score_chunk

    def interrupted(self, chunk, done):
        calls.append(len(chunk))
        if len(calls) == 2:
            raise KeyboardInterrupt  # the second chunk never finishes
        return score_chunk(self, chunk, done)

    monkeypatch.setattr(Evaluator, "_score_chunk", interrupted)
    with pytest.raises(KeyboardInterrupt):
        evaluate(files, tmp_path / "eval", fakes, counting_embedder, reference_dir=str(tiny_corpus), chunk_stories=1)
    manifest = tmp_path / "eval" / "manifest.json"
    first = json.loads(manifest.read_text())["seconds"]
    assert {"judge", "metrics"} <= set(first) and len(rows(tmp_path / "eval")) == 2  # the first chunk: review's two

    recorded = {**first, "judge": first["judge"] + 1000.0}  # as if the first invocation had been slow
    manifest.write_text(json.dumps(json.loads(manifest.read_text()) | {"seconds": recorded}))
    monkeypatch.setattr(Evaluator, "_score_chunk", score_chunk)
    evaluate(files, tmp_path / "eval", fakes, counting_embedder, reference_dir=str(tiny_corpus), chunk_stories=1)
    seconds = json.loads(manifest.read_text())["seconds"]
    assert len(rows(tmp_path / "eval")) == 3
    assert seconds["judge"] >= recorded["judge"] >= 1000 and seconds["metrics"] >= recorded["metrics"]


def test_changed_settings_do_not_mix_into_an_old_evaluation(tmp_path, counting_embedder, isolated_cache) -> None:
    files = write_stories(tmp_path)
    out = evaluate(files, tmp_path / "eval", Fakes(), counting_embedder)
    with pytest.raises(UsageError, match="samples=2"):
        cfg = EvalConfig(stories=[str(f) for f in files], out=str(out), judge="hf:fake-judge", judge_mode="sample",
                         samples=3, max_parse_retries=1)
        Evaluator(cfg, models=Fakes().models, embedder=counting_embedder).run()


def test_a_scored_story_whose_text_changed_is_refused(tmp_path, counting_embedder, isolated_cache) -> None:
    """Its old scores would sit beside scores of other texts under the same story_id."""
    files = write_stories(tmp_path)
    out = evaluate(files, tmp_path / "eval", Fakes(), counting_embedder)
    review = files[0].read_text()
    files[0].write_text(review.replace("sang the names", "hummed the names"))
    with pytest.raises(UsageError, match=r"another text for review/p1/humanistic \(story_sha256\)"):
        evaluate(files, out, Fakes(), counting_embedder)
    files[0].write_text(review)
    evaluate(files, out, Fakes(), counting_embedder)  # the same stories resume


def test_without_reference_corpus_reference_metrics_are_null(tmp_path, counting_embedder, isolated_cache,
                                                              caplog) -> None:
    with caplog.at_level(logging.WARNING):
        out = evaluate(write_stories(tmp_path), tmp_path / "eval", Fakes(), counting_embedder)
    assert "reference metrics unavailable" in caplog.text
    for r in rows(out):
        assert r["kl"] is None and r["novelty_cos"] is None and r["volume_gain"] is None
        assert r["concepts"] == 4.0 and r["surprisal"] is not None
    summary = json.loads((out / "summary.json").read_text())["frameworks"]
    assert summary["review"]["kl"]["n"] == 0
    (reason,) = summary["review"]["kl"]["missing"]
    assert reason.startswith("no reference corpus")
    assert summary["review"]["homogenization"]["n"] == 1
    assert "n/a" in (out / "summary.md").read_text()


def test_no_judge_leaves_aspects_null(tmp_path, counting_embedder, isolated_cache) -> None:
    fakes = Fakes()
    out = evaluate(write_stories(tmp_path), tmp_path / "eval", fakes, counting_embedder, no_judge=True)
    assert fakes.judge.requests == []
    assert all(r["concepts"] is None and r["judge"] is None for r in rows(out))
    assert not (out / "judge_scores.png").exists() and (out / "rule_metrics.png").is_file()


@pytest.mark.parametrize("content, message", [
    (None, "stories file not found"),
    ("", "holds no stories"),
    ("\n\n", "holds no stories"),
    ('{"story_id": "a"\n', "not valid JSON"),
    ("[1, 2]\n", "expected a JSON object"),
    ('{"story_id": "a", "prompt_id": "p", "framework": "f", "prompt": "x"}\n', "field 'text'"),
])
def test_bad_stories_input_is_a_usage_error(tmp_path, content, message) -> None:
    path = tmp_path / "stories.jsonl"
    if content is not None:
        path.write_text(content)
    with pytest.raises(UsageError, match=message):
        main(["--stories", str(path), "--no-judge", "--out", str(tmp_path / "eval")])


def test_duplicate_story_ids_across_files_are_rejected(tmp_path) -> None:
    review, _ = write_stories(tmp_path)
    with pytest.raises(UsageError, match="already read"):
        main(["--stories", str(review), str(review), "--out", str(tmp_path / "eval")])


def test_unknown_judge_mode_and_config_key_are_usage_errors(tmp_path, capsys) -> None:
    review, _ = write_stories(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        run_cli(main, ["--stories", str(review), "--judge-mode", "vote"])
    assert exit_info.value.code == 2
    assert "--judge-mode: 'vote' is not one of: sample, logprob" in capsys.readouterr().err
    config = tmp_path / "eval.yaml"
    config.write_text(f"stories: [{review}]\njudge_samples: 3\n")
    with pytest.raises(UsageError, match="unknown config key"):
        main(["--config", str(config)])


@pytest.mark.slow
def test_cli_end_to_end_with_the_real_default_model(tmp_path, tiny_corpus, isolated_cache, caplog) -> None:
    files = write_stories(tmp_path, writer="smollm2-135m-instruct")
    out = tmp_path / "eval"
    args = ["--stories", *map(str, files), "--judge", "smollm2-135m-instruct", "--judge-mode", "logprob",
            "--reference-dir", str(tiny_corpus), "--out", str(out)]
    assert main(args) == 0
    for name in OUTPUTS:
        assert (out / name).is_file(), name
    for r in rows(out):
        assert all(0.0 <= r[a] <= 5.0 for a in ASPECTS), r
        assert r["surprisal"] > 0 and r["kl"] > 0 and 0.0 <= r["novelty_cos"] <= 2.0
    before = (out / "scores.jsonl").read_text()
    with caplog.at_level(logging.INFO):
        assert main(args) == 0
    assert (out / "scores.jsonl").read_text() == before
    assert "3 already scored, 0 to score" in caplog.text


def test_two_real_evaluations_compare_with_the_catalog_they_recorded(tmp_path, tiny_corpus, counting_embedder,
                                                                       isolated_cache) -> None:
    """The manifests an evaluation writes are what compare reads: its metric catalog must arrive
    intact (a secret-name rule once redacted every catalog `key` and emptied every comparison)."""
    from eval.compare import compare, load_run

    runs = {}
    for name in ("base", "other"):
        review, single = write_stories(tmp_path / name)
        (single.parent / "manifest.json").write_text(json.dumps({"dataset_sha256": "d" * 64}))
        out = evaluate([single], tmp_path / name / "single" / "eval", Fakes(), counting_embedder,
                       reference_dir=str(tiny_corpus))
        runs[name] = load_run(name, out.parent)
    assert runs["base"].catalog.aspects == ASPECTS
    result = compare(list(runs.values()), n_boot=100)
    assert result["config"]["metrics"][:6] == ["judge_average", *ASPECTS]
    assert result["gains"]["concepts"]["other"]["gain"] == 0.0


@pytest.mark.parametrize("recorded, refused", [
    ({"dtype": "bfloat16", "device": "cpu"}, True),   # scored in bf16 on another CPU
    ({"dtype": "float32", "device": "cpu"}, False),
    (None, False),                                     # recorded before numerics were: unknown, not a change
])
def test_resuming_an_evaluation_judged_in_another_dtype_is_refused(tmp_path, recorded, refused):
    from eval.run import NOUN, Evaluator
    from generate.common.resumable import Resumable

    judge = {"model": "m", "mode": "logprob", "rubric_sha256": "r"}
    before = {**judge, "numerics": recorded} if recorded else judge
    (tmp_path / "manifest.json").write_text(json.dumps({"provenance": {"judge": before}}))
    now = {"judge": {**judge, "numerics": {"dtype": "float32", "device": "cpu"}}}
    if refused:
        with pytest.raises(UsageError, match="another judge .*numerics"):
            Evaluator._check_provenance(Resumable(tmp_path, NOUN), now)
    else:
        Evaluator._check_provenance(Resumable(tmp_path, NOUN), now)


class DownFor(ScriptedBackend):
    """The judge script of `Fakes`, one request per engine call, whose calls about one story fail
    transiently (503) while `down`."""

    batch_size = 1

    def __init__(self, word: str):
        super().__init__({"logic": ["Score: 2"], "ethics": ["no idea"], "*": ["Score: 4"]})
        self.word, self.down = word, True

    async def generate(self, requests):
        if self.down and self.word in requests[0].messages[-1]["content"]:
            raise TransientBackendError("HTTP 503: overloaded", cause="HTTP 503")
        return await super().generate(requests)


def test_a_score_missing_for_a_transient_cause_is_scored_again_by_the_next_run(tmp_path, tiny_corpus,
                                                                               counting_embedder, isolated_cache):
    """Judge calls whose retries ran out leave their story unwritten and the evaluation exits 1
    saying so; the next run scores that story, asking only the failed calls (the others are
    replayed from judge_calls.jsonl), and ends with the scores a run without failures gives."""
    files = write_stories(tmp_path)
    clean = evaluate(files, tmp_path / "clean", Fakes(), counting_embedder, reference_dir=str(tiny_corpus))
    fakes = Fakes()
    fakes.judge = DownFor("Lichen")
    fakes.models["hf:fake-judge"] = model(fakes.judge)
    out = tmp_path / "eval"
    with pytest.raises(PartialFailure, match=r"^1 stor\(ies\) left to score, whose judge calls failed for a "
                                             r"transient cause \(judge request failed: HTTP 503"):
        evaluate(files, out, fakes, counting_embedder, reference_dir=str(tiny_corpus))
    assert sorted(r["story_id"] for r in rows(out)) == ["review/p1/humanistic", "single/p1/single"]
    asked = len(fakes.judge.requests)
    fakes.judge.down = False
    evaluate(files, out, fakes, counting_embedder, reference_dir=str(tiny_corpus))
    again = fakes.judge.requests[asked:]
    assert again and all("Lichen" in r.messages[-1]["content"] for r in again)
    assert len(again) == 5 * 2 + 2  # the story's 5 aspects x 2 samples, and 2 ethics re-asks
    by_id = {r["story_id"]: r for r in rows(clean)}
    for r in rows(out):
        assert {k: r[k] for k in METRICS} == {k: by_id[r["story_id"]][k] for k in METRICS}
    keys = [json.loads(line)["key"] for line in (out / "judge_calls.jsonl").read_text().splitlines()]
    assert len(keys) == len(set(keys))  # each finished call made once


def test_a_score_missing_for_a_deterministic_cause_is_final(tmp_path, tiny_corpus, counting_embedder, isolated_cache):
    files = write_stories(tmp_path)
    fakes = Fakes()

    async def refusing(requests):
        refused = Completion(text="", finish_reason="error", error="prompt too long for the model's context")
        outs = await ScriptedBackend.generate(fakes.judge, requests)
        return [refused if "Lichen" in r.messages[-1]["content"] else o for r, o in zip(requests, outs)]

    fakes.judge.generate = refusing
    out = evaluate(files, tmp_path / "eval", fakes, counting_embedder, reference_dir=str(tiny_corpus))
    lichen = next(r for r in rows(out) if r["story_id"] == "review/p1/ecological")
    assert lichen["concepts"] is None and "context" in lichen["missing"]["concepts"]


def test_volume_gain_is_missing_against_a_reference_sample_of_no_more_chunks_than_dimensions(
        tmp_path, tiny_corpus, counting_embedder, isolated_cache, caplog) -> None:
    """4 reference chunks in 8 dimensions: the covariance is singular and the gain would measure
    eps, not the story (MiniLM: 13.5 nats at 100 reference chunks, 0.42 at 2000)."""
    with caplog.at_level(logging.WARNING):
        out = evaluate(write_stories(tmp_path), tmp_path / "eval", Fakes(), counting_embedder,
                       reference_dir=str(tiny_corpus))
    reason = ("the reference sample has 4 chunks, not more than the 8 embedding dimensions: its covariance is "
              "singular and the gain measures eps (embed more reference chunks)")
    for r in rows(out):
        assert r["volume_gain"] is None and r["missing"]["volume_gain"] == reason
        assert isinstance(r["novelty_cos"], float) and isinstance(r["kl"], float)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["frameworks"]["review"]["volume_gain"]["missing"] == {reason: 2}
    assert [m for m in caplog.messages if "volume_gain unavailable" in m] == [f"volume_gain unavailable: {reason}"]


def _forget_metrics_version(out: Path) -> None:
    """Make the manifest look written before the metrics had a version."""
    path = out / "manifest.json"
    manifest = json.loads(path.read_text())
    del manifest["provenance"]["metrics_version"], manifest["provenance"]["reference"]["metrics_version"]
    path.write_text(json.dumps(manifest))


def test_resuming_an_evaluation_made_by_another_metrics_version_is_refused(tmp_path, tiny_corpus, counting_embedder,
                                                                           isolated_cache) -> None:
    """Stories embedded by the old chunker and by the new one would sit in one scores.jsonl."""
    review, single = write_stories(tmp_path)
    out = evaluate([single], tmp_path / "eval", Fakes(), counting_embedder, reference_dir=str(tiny_corpus))
    _forget_metrics_version(out)
    with pytest.raises(UsageError, match=r"another metrics_version \(1 then, 2 now\)"):
        evaluate([review, single], out, Fakes(), counting_embedder, reference_dir=str(tiny_corpus))


def writer_in(dtype: str):
    """A writer model that computes in `dtype`, as the hf backend records its numerics."""
    backend = FakeScorer()
    backend.NUMERICS = ("dtype",)
    backend.describe = lambda: {**FakeScorer.describe(backend), "dtype": dtype}
    return model(backend)


def test_writer_scored_surprisal_records_its_numerics_and_refuses_to_mix_them(tmp_path, counting_embedder,
                                                                              isolated_cache) -> None:
    """Without --scorer each story's writer scores it: bf16 and float32 surprisal must not mix."""
    review, single = write_stories(tmp_path)
    fakes = Fakes()
    fakes.models["fake-writer"] = writer_in("bfloat16")
    out = evaluate([single], tmp_path / "eval", fakes, counting_embedder)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["provenance"]["scorer_numerics"] == {"fake-writer": {"dtype": "bfloat16"}}
    fakes.models["fake-writer"] = writer_in("float32")
    with pytest.raises(UsageError, match=r"another scorer_numerics \(fake-writer.dtype 'bfloat16' then, 'float32'"):
        evaluate([review, single], out, fakes, counting_embedder)
    fakes.models["fake-writer"] = writer_in("bfloat16")
    evaluate([review, single], out, fakes, counting_embedder)  # the same numerics resume
    assert len(rows(out)) == 3



def judge_serving(fakes: Fakes, root: str | None) -> None:
    """The judge as an OpenAI-compatible server lists it (`served`; None: its listing was not read)."""
    judge = fakes.judge
    judge.NUMERICS = ("served",)
    judge.describe = lambda: {**type(judge).describe(judge), **({"served": {"root": root}} if root else {})}


def test_judge_numerics_an_invocation_cannot_tell_stay_recorded(tmp_path, counting_embedder, isolated_cache) -> None:
    """A resumed evaluation whose judge cannot tell its numerics (the server's listing not read) keeps
    the recorded ones in the manifest, so the next invocation is still compared with them."""
    review, single = write_stories(tmp_path)
    later = tmp_path / "later.jsonl"
    later.write_text(json.dumps({**json.loads(single.read_text()), "story_id": "single/p1/later",
                                 "text": "The ice kept one more name, and it was hers."}) + "\n")
    fakes = Fakes()
    judge_serving(fakes, "/ckpt/a")
    out = evaluate([single], tmp_path / "eval", fakes, counting_embedder)
    judge_serving(fakes, None)
    evaluate([review, single], out, fakes, counting_embedder)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["provenance"]["judge"]["numerics"] == {"served": {"root": "/ckpt/a"}}
    judge_serving(fakes, "/ckpt/b")
    with pytest.raises(UsageError, match=r"another judge \(numerics.served.root '/ckpt/a' then, '/ckpt/b' now"):
        evaluate([review, single, later], out, fakes, counting_embedder)
    assert len(rows(out)) == 3
