"""Where a run's time goes, phase by phase: calls, tokens, seconds and what the engine reused.

A multi-agent run is a sequence of lockstep phases (Review: compose, review-1, revise-1, ...), and
their costs differ by an order of magnitude: a review round reads every draft it reviews, and how
much of that prefill the engine's prefix store spares decides its time. The runner records each
phase here; the totals go to the run's manifest (`phases`) after every chunk and one line per phase
to the log, so a slow phase shows what it did (e.g. a round that re-encoded what the store had
dropped) without rerunning it under a profiler.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from generate.backends import Completion
from generate.common.manifest import recorded

log = logging.getLogger(__name__)


@dataclass
class PhaseCost:
    """One phase's cost. Token counts are of the calls the engine ran; `replayed` calls came from
    the journal of an interrupted run and cost nothing now."""

    calls: int = 0
    replayed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reused_tokens: int = 0  # prompt tokens the engine took from its prefix store instead of encoding
    seconds: float = 0.0

    def add(self, other: PhaseCost) -> None:
        for key, value in asdict(other).items():
            setattr(self, key, getattr(self, key) + value)

    def line(self, phase: str) -> str:
        replayed = f" ({self.replayed} replayed from the journal)" if self.replayed else ""
        reuse = (f", {self.reused_tokens / self.prompt_tokens:.0%} of them from the prefix store"
                 if self.prompt_tokens and self.reused_tokens else "")
        return (f"{phase}: {self.calls} calls{replayed} in {self.seconds:.1f} s; {self.prompt_tokens:,} prompt "
                f"tokens{reuse}; {self.completion_tokens:,} completion tokens")


class PhaseProfile:
    """Per-phase costs of one run.

    Args:
        counters: the backend's running totals (`Backend.counters`); their change over a phase is
            what the phase reused.
        replays: the journal's running totals of what it replayed (`Journal.replayed`), likewise.
    """

    def __init__(self, counters: Callable[[], dict[str, int]], replays: Callable[[], dict[str, float]],
                 carried: dict[str, dict] | None = None):
        self.counters, self.replays = counters, replays
        # What the earlier invocations of a resumed run recorded (`recorded_phases`), added to.
        self.phases = {name: PhaseCost(**cost) for name, cost in (carried or {}).items()}

    @contextmanager
    def phase(self, name: str) -> Iterator[list[Completion]]:
        """Measure one phase: the caller appends every completion it received to the yielded list."""
        outs: list[Completion] = []
        before, replays, t0 = self.counters(), dict(self.replays()), time.perf_counter()
        try:
            yield outs
        finally:
            seconds = time.perf_counter() - t0
            now = self.replays()
            replayed = {k: now.get(k, 0) - replays.get(k, 0) for k in ("calls", "prompt_tokens", "completion_tokens")}
            cost = PhaseCost(
                calls=len(outs), replayed=int(replayed["calls"]), seconds=seconds,
                prompt_tokens=sum(o.prompt_tokens or 0 for o in outs) - int(replayed["prompt_tokens"]),
                completion_tokens=sum(o.completion_tokens or 0 for o in outs) - int(replayed["completion_tokens"]),
                reused_tokens=self.counters().get("prefix_reused_tokens", 0) - before.get("prefix_reused_tokens", 0))
            self.phases.setdefault(name, PhaseCost()).add(cost)
            log.info(cost.line(name))

    def to_json(self) -> dict[str, dict]:
        return {name: {**asdict(c), "seconds": round(c.seconds, 2)} for name, c in self.phases.items()}


def recorded_phases(out: Path) -> dict[str, dict]:
    """The phase costs the run's manifest holds from its earlier invocations ({} if none)."""
    phases = recorded(out, "phases")
    return {name: {k: v for k, v in cost.items() if k in PhaseCost.__dataclass_fields__}
            for name, cost in (phases or {}).items()}
