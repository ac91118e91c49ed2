"""Reward-time accounting: how much of a training step the rewards cost.

The rewards record wall-clock intervals in their context's `Timer` (`generate.common.timing`); this
callback reads that timer, measures each optimizer
step and adds to every log entry, over the steps since the previous log:

- `timing/step_s`: mean seconds per step (generation, rewards, forward/backward);
- `timing/reward/<name>_s`: seconds per step spent in each reward (`embed` is the shared
  encoder pass of the embedding rewards, `judge` the batched judge call);
- `timing/rewards_share`: share of the step spent in any reward (concurrent async rewards are
  counted once: the union of their intervals);
- `timing/novelty_share`: the same for the novelty rewards and their encoder pass alone.

Values are this process's (each rank scores its own slice; the main process's are logged).
"""

from __future__ import annotations

import time

from transformers import TrainerCallback

from generate.common import timing
from generate.common.timing import Timer


class RewardTimingCallback(TrainerCallback):
    """Adds reward-time shares to the trainer's log entries (and so to `trainer_state.json`).

    Args:
        novelty_names: timing names that count as novelty work (the novelty rewards' names).
        timer: the rewards' timer (`RewardContext.timer`).
    """

    def __init__(self, novelty_names: set[str], timer: Timer):
        self.timer = timer
        self.novelty_names = set(novelty_names) | {"embed"}
        self._step_start: float | None = None
        self._steps = 0
        self._step_seconds = 0.0
        self._intervals: list[tuple[str, float, float]] = []

    def on_train_begin(self, args, state, control, **kwargs):
        self.timer.take()  # drop start-up work (corpus loading, the reward check): not a training step

    def on_step_begin(self, args, state, control, **kwargs):
        self._step_start = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        if self._step_start is not None:
            self._step_seconds += time.perf_counter() - self._step_start
            self._steps += 1
            self._step_start = None
        self._intervals.extend(self.timer.take())

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not self._steps or logs is None or "loss" not in logs:  # skip the final train summary
            return
        stats = self.summary()
        logs.update(stats)
        if state.log_history:  # Trainer.log appended a copy of `logs` before calling us
            state.log_history[-1].update(stats)
        self._steps, self._step_seconds, self._intervals = 0, 0.0, []

    def summary(self) -> dict[str, float]:
        per_step = 1.0 / self._steps
        stats = {"timing/step_s": self._step_seconds * per_step}
        for name in sorted({n for n, _, _ in self._intervals}):
            stats[f"timing/reward/{name}_s"] = timing.union_seconds(self._intervals, {name}) * per_step
        if self._step_seconds > 0:
            stats["timing/rewards_share"] = timing.union_seconds(self._intervals) / self._step_seconds
            stats["timing/novelty_share"] = (timing.union_seconds(self._intervals, self.novelty_names)
                                             / self._step_seconds)
        return stats
