"""A table of several runs (the benchmark's frameworks, a sweep's points) covers the same prompts
in every row: those of the invocation that every run generated and, where evaluated, scored. A
framework holding more prompts (an earlier, larger --limit) or fewer (a prompt that failed, a
story left to score) would otherwise be averaged over other prompts than its neighbours."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.benchmark import write_benchmark
from eval.metrics.catalog import Catalog
from eval.report import summarize_frameworks

CATALOG = Catalog.from_aspects({"concepts": "Concepts"})


def write_run(run: Path, framework: str, prompts: dict[str, float | None], calls: int) -> None:
    """Two stories per prompt; `prompts`: id -> the judge's concepts score (None: left unscored)."""
    (run / "eval").mkdir(parents=True)
    stories = [{"story_id": f"{framework}/{p}/a{k}", "prompt_id": p, "prompt": f"Prompt {p}", "framework": framework,
                "text": "...", "n_stories": 2, "truncated": k == 0,
                "prompt_usage": {"calls": calls, "prompt_tokens": 10, "completion_tokens": 40}, "seconds": 1.0}
               for p in prompts for k in range(2)]
    scores = [{"story_id": s["story_id"], "prompt_id": s["prompt_id"], "framework": framework,
               "concepts": prompts[s["prompt_id"]]} for s in stories if prompts[s["prompt_id"]] is not None]
    (run / "stories.jsonl").write_text("".join(json.dumps(r) + "\n" for r in stories))
    (run / "eval" / "scores.jsonl").write_text("".join(json.dumps(r) + "\n" for r in scores))
    summary = {"metrics": CATALOG.to_json(), "frameworks": summarize_frameworks(scores, CATALOG)}  # as evaluated
    (run / "eval" / "summary.json").write_text(json.dumps(summary))


def test_every_row_covers_the_prompts_every_framework_finished(tmp_path):
    # single was run with a larger --limit before (p3) and finished every prompt; review's p1 has a
    # story left to score and its p2 failed.
    write_run(tmp_path / "single", "single", {"p0": 2.0, "p1": 2.0, "p2": 4.0, "p3": 4.0}, calls=1)
    write_run(tmp_path / "review", "review", {"p0": 3.0, "p1": None}, calls=21)
    rows = write_benchmark(tmp_path, ["single", "review"], "Benchmark")
    single, review = rows["single"], rows["review"]
    assert single["metrics"]["concepts"]["mean"] == 2.0 and single["metrics"]["concepts"]["n"] == 2
    assert review["metrics"]["concepts"]["mean"] == 3.0 and review["metrics"]["concepts"]["n"] == 2
    assert single["cost"]["n_prompts"] == review["cost"]["n_prompts"] == 1
    assert review["cost"]["x_single"]["calls"] == 21.0
    assert single["cut_off"] == review["cut_off"] == pytest.approx(0.5)

    rows = write_benchmark(tmp_path, ["single", "review"], "Benchmark", prompts=["p0", "p1", "p2"])
    coverage = json.loads((tmp_path / "benchmark.json").read_text())["coverage"]
    assert coverage == {"prompts": ["p0"], "mismatches": {}, "left_out": {
        "single": {"unfinished elsewhere": ["p1", "p2"], "not asked by this invocation": ["p3"]},
        "review": {"not generated": ["p2"], "not scored": ["p1"]}}}
    md = (tmp_path / "benchmark.md").read_text()
    assert "Every row covers the same 1 prompt(s)" in md
    assert "- review: 1 not generated (p2); 1 not scored (p1)" in md
    assert rows["single"]["seconds"]["generation"] == 4.0  # the time it took: every prompt it generated


def test_a_framework_with_no_prompt_in_common_shows_na(tmp_path):
    write_run(tmp_path / "single", "single", {"p0": 2.0}, calls=1)
    write_run(tmp_path / "review", "review", {"p1": 3.0}, calls=21)
    rows = write_benchmark(tmp_path, ["single", "review"], "Benchmark")
    assert all(row["cost"] is None and row["cut_off"] is None for row in rows.values())
    assert all(row["metrics"] is None for row in rows.values())  # n/a in every cell
    assert "Every row covers the same 0 prompt(s)" in (tmp_path / "benchmark.md").read_text()


def test_a_benchmark_names_each_framework_once_and_holds_its_directory(tmp_path, monkeypatch, capsys):
    from eval.benchmark import run as bench
    from generate.common.cli import run_cli
    from generate.common.lock import output_lock

    monkeypatch.setattr("generate.backends.load_model", lambda *a, **k: pytest.fail("loaded a model"))
    for argv, message in [(["--frameworks", "single", "single"], "name each framework once"),
                          ([], "in use by another run")]:
        out = tmp_path / "bench"
        with output_lock(out), pytest.raises(SystemExit) as info:  # another benchmark writing there
            run_cli(bench.main, [*argv, "--limit", "1", "--out", str(out)])
        errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
        assert info.value.code == 2 and len(errors) == 1 and message in errors[0], errors
        assert not (out / "manifest.json").exists()  # the other benchmark's manifest is left alone


def test_rows_evaluated_with_another_corpus_are_flagged_at_the_top(tmp_path):
    # Each framework resumes on its own: single was evaluated before the full corpus was fetched.
    for fw, works in (("single", 140), ("review", 150)):
        write_run(tmp_path / fw, fw, {"p0": 2.0}, calls=1)
        (tmp_path / fw / "manifest.json").write_text(json.dumps({"dataset_sha256": "d"}))
        provenance = {"judge": {"model": "m"}, "reference": {"content_sha256": f"works-{works}"}, "metrics_version": 2}
        (tmp_path / fw / "eval" / "manifest.json").write_text(json.dumps({"provenance": provenance}))
    write_benchmark(tmp_path, ["single", "review"], "Benchmark")
    mismatches = json.loads((tmp_path / "benchmark.json").read_text())["coverage"]["mismatches"]
    assert mismatches == {"reference": {"single": {"content_sha256": "works-140"},
                                        "review": {"content_sha256": "works-150"}}}
    md = (tmp_path / "benchmark.md").read_text().splitlines()
    assert md[2].startswith("**Not like for like: the frameworks differ in reference**"), md[:4]

    (tmp_path / "single" / "eval" / "manifest.json").write_text((tmp_path / "review" / "eval" / "manifest.json")
                                                                .read_text())
    write_benchmark(tmp_path, ["single", "review"], "Benchmark")
    assert "Not like for like" not in (tmp_path / "benchmark.md").read_text()
