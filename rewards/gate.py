"""Quality gate: novelty counts only in proportion to the judge's quality score.

Novelty metrics are easy to hack with gibberish: random rare words maximise KL, novelty and
volume. In gated mode every novelty-type reward r becomes q * r, where q in [0, 1] is the judge's
quality score of the same completion, so an unreadable story (q near 0) earns no novelty credit.
The gated reward is logged as `gated_<name>`; the ungated batch mean goes to trl's metrics as
`ungated/<name>` so that hacking (raw novelty up, quality down) stays visible.
"""

from __future__ import annotations

import inspect
import math

from rewards.registry import RewardFunc

GATES = ("none", "judge")


def gate_values(quality: list[float | None], values: list[float | None]) -> list[float | None]:
    """q * r per completion; None where either is missing (no judge score: no gated reward)."""
    return [q * r if q is not None and r is not None else None for q, r in zip(quality, values, strict=True)]


def gated(func: RewardFunc, judge_func: RewardFunc) -> RewardFunc:
    """An async reward named `gated_<name>` computing judge quality x `func`.

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
    gated_reward.__doc__ = f"Judge quality x {name} (quality-gated novelty)."
    return gated_reward
