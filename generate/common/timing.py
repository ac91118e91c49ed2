"""Wall-clock intervals of named pieces of work: the rewards of a training step (read by the
reward-time callback) and the parts of an evaluation (judge, surprisal, metrics).

Async rewards (the judge, gated rewards) run concurrently, so summing their durations would
overstate the time they cost; a `Timer` keeps (start, end) intervals and the callback reports the
length of their union. The timer belongs to a `RewardContext` (no module state): the trainer's
callback reads the same timer its rewards write to.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager


class Timer:
    """Thread-safe record of named wall-clock intervals (trl runs async rewards on its own thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._intervals: list[tuple[str, float, float]] = []

    @contextmanager
    def timed(self, name: str) -> Iterator[None]:
        """Record the wall-clock interval of the enclosed block under `name`."""
        start = time.perf_counter()
        try:
            yield
        finally:
            end = time.perf_counter()
            with self._lock:
                self._intervals.append((name, start, end))

    def seconds(self) -> dict[str, float]:
        """Seconds per name so far (the union of each name's intervals), without clearing."""
        with self._lock:
            intervals = list(self._intervals)
        return {name: union_seconds(intervals, {name}) for name in sorted({n for n, _, _ in intervals})}

    def take(self) -> list[tuple[str, float, float]]:
        """Every interval recorded since the last call, clearing the record."""
        with self._lock:
            out = list(self._intervals)
            self._intervals.clear()
        return out


def union_seconds(intervals: Iterable[tuple[str, float, float]], names: set[str] | None = None) -> float:
    """Length of the union of the intervals (restricted to `names` when given)."""
    spans = sorted((s, e) for n, s, e in intervals if names is None or n in names)
    total, cur_start, cur_end = 0.0, None, None
    for s, e in spans:
        if cur_end is None or s > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start
            cur_start, cur_end = s, e
        else:
            cur_end = max(cur_end, e)
    if cur_end is not None:
        total += cur_end - cur_start
    return total
