"""Quality gate: novelty counts only as much as the judge's quality score allows.

Novelty metrics are easy to hack with gibberish: random rare words maximise KL, novelty and
volume. In gated mode every novelty-type reward r becomes

    g(q, r) = r - (1 - q) |r|        (q in [0, 1]: the judge's quality of the same completion)

so at full quality the novelty counts in full, and a lower quality always lowers the reward: a
positive novelty is scaled down (q r), a negative one (volume gain is negative for stories near
the reference mean) is pushed further down ((2 - q) r). A plain product q r would do the
opposite for negative r (q = 0.1 would beat q = 0.9); g never decreases when quality rises, for
any r, and never decreases when r rises, for any q. The gated reward is logged as `gated_<name>`;
the ungated batch mean goes to trl's metrics as `ungated/<name>`, so hacking (raw novelty up,
quality down) stays visible.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

GATES = ("none", "judge")
RewardFunc = Callable[..., Any]


def gate_value(quality: float, value: float) -> float:
    """g(q, r) = r - (1 - q)|r|: non-decreasing in q for every r (see the module docstring)."""
    return value - (1.0 - quality) * abs(value)


def gate_values(quality: list[float | None], values: list[float | None]) -> list[float | None]:
    """g(q, r) per completion; None where either is missing (no judge score: no gated reward)."""
    return [gate_value(q, r) if q is not None and r is not None else None
            for q, r in zip(quality, values, strict=True)]


def gated(func: RewardFunc, judge_func: RewardFunc) -> RewardFunc:
    """An async reward named `gated_<name>` computing g(judge quality, `func`).

    Args:
        func: a bound reward (see `rewards.registry.bind`), sync or async.
        judge_func: the bound judge reward; it shares one batched judge call per step with the
            `judge` reward itself when both have the same options.
    """
    name = func.__name__

    async def gated_reward(prompts, completions, **columns):
        quality = await judge_func(prompts, completions, **columns)
        values = func(prompts, completions, **columns)
        if inspect.isawaitable(values):
            values = await values
        log_metric = columns.get("log_metric")
        present = [v for v in values if v is not None and math.isfinite(v)]
        if log_metric is not None and present:
            log_metric(f"ungated/{name}", sum(present) / len(present))
        return gate_values(quality, values)

    gated_reward.__name__ = gated_reward.__qualname__ = f"gated_{name}"
    gated_reward.__doc__ = f"Judge-quality-gated {name}."
    return gated_reward
