"""scripts/same_outputs.py: equal runs pass, timing aside; any other difference is named and fails."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("same_outputs", REPO / "scripts" / "same_outputs.py")
same_outputs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(same_outputs)


def write_run(root: Path, text: str = "A ship.", judge: float = 3.2, seconds: float = 1.0) -> Path:
    (root / "review" / "eval").mkdir(parents=True)
    story = {"story_id": "p1-review", "text": text, "usage": {"seconds": seconds, "calls": 21}}
    score = {"story_id": "p1-review", "judge": {"logic": judge}, "kl": float("nan"), "seconds": seconds}
    (root / "review" / "stories.jsonl").write_text(json.dumps(story) + "\n")
    (root / "review" / "eval" / "scores.jsonl").write_text(json.dumps(score) + "\n")
    return root


def test_runs_that_differ_only_in_timing_are_the_same(tmp_path, capsys):
    a, b = write_run(tmp_path / "a"), write_run(tmp_path / "b", seconds=9.0)
    assert same_outputs.main([str(a), str(b)]) == 0
    assert same_outputs.main([str(a / "review"), str(b / "review")]) == 0  # one run, not a folder of runs
    assert capsys.readouterr().out.strip().endswith("same outputs")


@pytest.mark.parametrize("change, named", [({"text": "A boat."}, "p1-review: text"),
                                           ({"judge": 3.3}, "p1-review: judge.logic")])
def test_a_story_or_a_score_that_differs_is_named(tmp_path, capsys, change, named):
    a, b = write_run(tmp_path / "a"), write_run(tmp_path / "b", **change)
    assert same_outputs.main([str(a), str(b)]) == 1
    assert named in capsys.readouterr().out


def test_a_directory_without_runs_is_bad_input(tmp_path):
    with pytest.raises(same_outputs.UsageError, match="no stories.jsonl"):
        same_outputs.main([str(write_run(tmp_path / "a")), str(tmp_path)])
