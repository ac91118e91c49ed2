"""A step's seconds are what its current output took: summed over the invocations that finished
it, restarted when the step is redone with other inputs, unchanged by an invocation that found it
finished. Before, `story.json` added every invocation's time under the step's name, so a step
redone after a change reported the thrown-away output's seconds too (`generate review`: 489 s for
a 279 s generation)."""

from __future__ import annotations

import json

import pytest

from train import steps
from train.steps import STEP_FILE, Step, step_seconds


@pytest.fixture
def clock(monkeypatch):
    """A clock the test moves: `clock.now = t`."""
    class Clock:
        now = 0.0

    monkeypatch.setattr(steps.time, "perf_counter", lambda: Clock.now)
    return Clock


def run_step(out, inputs, clock, start, end, finish=True):
    step = Step(out, "generate review", inputs)
    clock.now = start
    step.start()
    clock.now = end
    if finish:
        step.finish()
    return json.loads((out / STEP_FILE).read_text())


def test_seconds_follow_the_output_not_the_invocations(tmp_path, clock):
    out = tmp_path / "review"
    assert run_step(out, {"dtype": "bfloat16"}, clock, 0, 210)["seconds"] == 210
    assert run_step(out, {"dtype": "bfloat16"}, clock, 1000, 1004)["seconds"] == 210  # found finished
    assert run_step(out, {"dtype": "float32"}, clock, 2000, 2100, finish=False)["seconds"] == 0  # redone
    assert run_step(out, {"dtype": "float32"}, clock, 3000, 3180)["seconds"] == 180  # resumed, then finished
    assert step_seconds(tmp_path) == {"generate review": 180}


def test_step_seconds_lists_finished_steps_in_the_order_they_finished(tmp_path, clock):
    run_step(tmp_path / "a", {"x": 1}, clock, 0, 5)
    record = run_step(tmp_path / "a" / "eval", {"x": 2}, clock, 5, 7)
    assert record["seconds"] == 2
    (tmp_path / "a" / "eval" / STEP_FILE).write_text(json.dumps({**record, "what": "evaluate a"}))
    run_step(tmp_path / "b", {"x": 3}, clock, 7, 8, finish=False)  # unfinished: not reported
    old = tmp_path / "c"
    old.mkdir()
    (old / STEP_FILE).write_text(json.dumps({"what": "curation", "done": True}))  # before seconds existed
    assert step_seconds(tmp_path) == {"generate review": 5, "evaluate a": 2}
    assert list(step_seconds(tmp_path)) == ["generate review", "evaluate a"]
