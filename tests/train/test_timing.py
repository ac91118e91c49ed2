"""Reward-time accounting: interval unions and the callback's log entries."""

from __future__ import annotations

import time

import pytest
from transformers import TrainerControl, TrainerState

from generate.common import timing
from train.callbacks import RewardTimingCallback


@pytest.mark.parametrize(("intervals", "names", "expected"), [
    ([("a", 0, 1), ("b", 2, 3)], None, 2.0),
    ([("a", 0, 2), ("b", 1, 3)], None, 3.0),      # concurrent async rewards count once
    ([("a", 0, 4), ("b", 1, 2)], None, 4.0),
    ([("a", 0, 4), ("b", 1, 2)], {"b"}, 1.0),
    ([], None, 0.0),
])
def test_union_seconds(intervals, names, expected):
    assert timing.union_seconds(intervals, names) == pytest.approx(expected)


def test_callback_adds_shares_to_the_log_entry_and_history():
    timer = timing.Timer()
    callback = RewardTimingCallback({"novelty_cos"}, timer)
    state, control = TrainerState(), TrainerControl()
    callback.on_step_begin(None, state, control)
    with timer.timed("judge"):
        time.sleep(0.05)
    with timer.timed("novelty_cos"):
        time.sleep(0.02)
    time.sleep(0.05)
    callback.on_step_end(None, state, control)
    logs = {"loss": 0.1}
    state.log_history.append({**logs, "step": 1})
    callback.on_log(None, state, control, logs=logs)
    entry = state.log_history[-1]
    assert entry["timing/reward/judge_s"] == pytest.approx(0.05, abs=0.03)
    assert 0.3 < entry["timing/rewards_share"] < 0.8
    assert 0.1 < entry["timing/novelty_share"] < entry["timing/rewards_share"]
    assert logs["timing/step_s"] == entry["timing/step_s"]


def test_callback_ignores_the_final_summary_log():
    callback = RewardTimingCallback(set(), timing.Timer())
    state = TrainerState()
    callback.on_log(None, state, TrainerControl(), logs={"train_runtime": 3.0})
    assert state.log_history == []
