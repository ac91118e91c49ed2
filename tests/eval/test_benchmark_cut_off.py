"""The benchmark table's "Cut off" column: the share of each framework's final stories that hit the
token cap (`truncated` in stories.jsonl), n/a for runs written before stories recorded it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval.benchmark import write_benchmark

USAGE = {"calls": 1, "prompt_tokens": 10, "completion_tokens": 40}


def write_stories(run: Path, framework: str, flags: list[bool | None]) -> None:
    """One story per flag (None: a story record without the field), two stories per prompt."""
    run.mkdir(parents=True)
    rows = [{"story_id": f"{framework}/p{i // 2}/a{i % 2}", "prompt_id": f"p{i // 2}", "prompt": f"Prompt {i // 2}",
             "framework": framework, "text": "...", "prompt_usage": USAGE, "seconds": 1.0,
             **({} if flag is None else {"truncated": flag})} for i, flag in enumerate(flags)]
    (run / "stories.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_the_cut_off_share_per_framework_or_na(tmp_path):
    write_stories(tmp_path / "single", "single", [True, False, False, False])
    write_stories(tmp_path / "review", "review", [None, None, None, None])
    rows = write_benchmark(tmp_path, ["single", "review"], "Benchmark")
    assert rows["single"]["cut_off"] == pytest.approx(0.25) and rows["review"]["cut_off"] is None
    lines = (tmp_path / "benchmark.md").read_text().splitlines()
    head = next(line for line in lines if line.startswith("| Framework"))
    assert head.rstrip(" |").endswith("Cut off")
    assert next(line for line in lines if line.startswith("| single")).endswith("| 25% |")
    assert next(line for line in lines if line.startswith("| review")).endswith("| n/a |")
    assert json.loads((tmp_path / "benchmark.json").read_text())["frameworks"]["single"]["cut_off"] == 0.25
