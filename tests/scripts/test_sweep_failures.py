"""A sweep goes on past a point whose prompts failed or whose stories are left to score, writes its
tables over the prompts every point finished, and ends with one line naming what is left (exit 1),
as the benchmark does; a point left without any story is not evaluated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval import sweep
from eval.metrics.catalog import Catalog
from eval.report import summarize_frameworks
from eval.stories import load_stories
from generate.backends import Model
from generate.common.cli import run_cli
from generate.common.errors import PartialFailure
from generate.common.jsonl import append_jsonl
from generate.datasets import load_dataset, spread_over_aspects
from tests.generate.fakes import Scripted

TASK_A, TASK_B = spread_over_aspects(load_dataset("default"), 2)
CATALOG = Catalog.from_aspects({"concepts": "Concepts"})


def texts(request) -> str:
    return "\n".join(m["content"] for m in request.messages)


class StubEvaluator:
    """Scores every story 3 (the orchestration is under test, not the judge), except that under
    `rounds=1` one story of prompt A is left to score, as after a judge call that gave up."""

    def __init__(self, cfg, models=None):
        self.cfg = cfg

    def run(self):
        stories = load_stories(self.cfg.stories)  # as the evaluation: an empty or missing file is refused
        left = "rounds=1" in self.cfg.out and next(s for s in stories if s["prompt_id"] == TASK_A.id)
        scores = [{"story_id": s["story_id"], "prompt_id": s["prompt_id"], "framework": s["framework"],
                   "concepts": 3.0} for s in stories if s is not left]
        out = Path(self.cfg.out)
        out.mkdir(parents=True, exist_ok=True)
        append_jsonl(out / "scores.jsonl", scores)
        summary = {"metrics": CATALOG.to_json(), "frameworks": summarize_frameworks(scores, CATALOG)}
        (out / "summary.json").write_text(json.dumps(summary))
        if left:
            raise PartialFailure("1 stor(ies) left to score")


def test_a_sweep_goes_on_past_failed_points_and_compares_like_with_like(tmp_path, monkeypatch, capsys):
    # Review's feedback on prompt A comes back blank: every point with a review round loses prompt A.
    backend = Scripted(lambda r: "" if TASK_A.prompt in texts(r) and "A fellow writer" in texts(r) else None)
    monkeypatch.setattr("generate.backends.load_model", lambda *a, **k: Model(backend))
    monkeypatch.setattr("eval.benchmark.run.Evaluator", StubEvaluator)
    out = tmp_path / "sweep"
    with pytest.raises(SystemExit) as info:
        run_cli(sweep.main, ["--model", "hf:echo", "--grid", "rounds=1,2", "--grid", "agents=2", "--limit", "2",
                             "--out", str(out)])
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert info.value.code == 1 and len(errors) == 1, errors
    assert TASK_A.id in errors[0] and "rounds=1/eval: 1 stor(ies) left to score" in errors[0]
    data = json.loads((out / "sweep.json").read_text())
    assert data["coverage"]["prompts"] == [TASK_B.id]
    assert data["coverage"]["left_out"] == {"rounds=1": {"not scored": [TASK_A.id]},
                                            "rounds=2": {"not generated": [TASK_A.id]},
                                            "agents=2": {"not generated": [TASK_A.id]}}
    points = {(axis, p["value"]): p for axis, ps in data["axes"].items() for p in ps}
    assert [points[k]["summary"]["concepts"]["n"] for k in [("rounds", 1), ("rounds", 2), ("agents", 2)]] == [3, 3, 2]
    assert all(p["cost"]["n_prompts"] == 1 for p in points.values())
    assert "Every row covers the same 1 prompt(s)" in (out / "sweep.md").read_text()


def test_a_point_with_no_story_is_not_evaluated(tmp_path, monkeypatch, capsys):
    backend = Scripted(lambda r: "" if "A fellow writer" in texts(r) else None)  # every review round fails
    monkeypatch.setattr("generate.backends.load_model", lambda *a, **k: Model(backend))
    monkeypatch.setattr("eval.benchmark.run.Evaluator", StubEvaluator)
    out = tmp_path / "sweep"
    with pytest.raises(SystemExit) as info:
        run_cli(sweep.main, ["--model", "hf:echo", "--grid", "rounds=2", "--limit", "1", "--out", str(out)])
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert info.value.code == 1 and len(errors) == 1 and "prompt(s) left" in errors[0], errors
    assert not (out / "rounds=2" / "eval").exists()
    data = json.loads((out / "sweep.json").read_text())
    assert data["coverage"]["prompts"] == [] and [p["summary"] for p in data["axes"]["rounds"]] == [{}]
