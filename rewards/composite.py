"""Score a batch with a recipe's rewards outside the trainer, combined exactly as trl combines them.

Used by the held-out evaluation (`review-lab heldout`) and the trainer's start-up check, so
"the same composite reward" means the same callables, the same treatment of failed values (each
filled with its prompt group's mean, `rewards.groups.fill_group_means`, as our trainer does) and
the same weighted, None-skipping sum: trl turns None into NaN and takes
`nansum(weights * rewards)` per completion (a completion that every reward skipped has no total).
A fill is an estimate for the total, never a measurement of its reward: a reward's mean is reported
over the values it gave (`run_rewards`), with the number filled beside it (`combine`).
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Sequence
from typing import Any

from generate.common.errors import UsageError
from rewards.groups import fill_group_means, group_keys
from rewards.registry import RewardFunc

Values = list[float | None]


def reward_weights(weights: Sequence[float] | None, names: Sequence[str]) -> list[float]:
    """The weights of rewards `names`, in their order: 1 each when none are given.

    The one check of a recipe's `reward_weights` against its `reward_funcs`, made by training before
    it loads a model and by `review-lab heldout` before it writes a story.

    Raises:
        UsageError: not one weight per reward (trl would refuse it only once the model is loaded),
            or a weight that is not a finite number (a NaN weight makes every total NaN)."""
    if weights is None:
        return [1.0] * len(names)
    if len(weights) != len(names):
        raise UsageError(f"reward_weights has {len(weights)} weight(s) for {len(names)} reward(s) "
                         f"({', '.join(names)}): give one weight per reward, in reward_funcs order")
    bad = [(n, w) for n, w in zip(names, weights) if isinstance(w, bool) or not isinstance(w, int | float)
           or not math.isfinite(w)]
    if bad:
        raise UsageError("reward_weights must be finite numbers, got "
                         + ", ".join(f"{w!r} for {n}" for n, w in bad))
    return [float(w) for w in weights]


def weighted_total(values: dict[str, Values], weights: Sequence[float]) -> Values:
    """Per completion, sum of weight x value over the rewards that gave a value."""
    columns = list(values.values())
    totals: Values = []
    for row in zip(*columns, strict=True):
        parts = [w * v for w, v in zip(weights, row, strict=True) if v is not None and math.isfinite(v)]
        totals.append(math.fsum(parts) if parts else None)
    return totals


def score_batch(funcs: Sequence[RewardFunc], prompts: list[Any], completions: list[Any],
                weights: Sequence[float] | None = None, **columns: Any) -> tuple[dict[str, Values], Values]:
    """Run every reward on one batch (`run_rewards`) and combine them as training does (`combine`).

    Returns:
        ({reward name: values after filling failures}, weighted totals); weights default to 1.
    """
    weights = reward_weights(weights, [f.__name__ for f in funcs])
    filled, _, totals = combine(run_rewards(funcs, prompts, completions, **columns), prompts, weights, **columns)
    return filled, totals


def combine(values: dict[str, Values], prompts: list[Any], weights: Sequence[float], **columns: Any
            ) -> tuple[dict[str, Values], dict[str, int], Values]:
    """Each reward's failed values filled with their prompt group's mean, as the trainer fills them,
    and the weighted totals of the filled values.

    Returns:
        ({name: filled values}, {name: number of values filled}, weighted totals)."""
    groups = group_keys(prompts, columns.get("prompt_id"))
    filled, counts = {}, {}
    for name, column in values.items():
        filled[name], counts[name] = fill_group_means(column, groups)
    return filled, counts, weighted_total(filled, weights)


def run_rewards(funcs: Sequence[RewardFunc], prompts: list[Any], completions: list[Any], **columns: Any
                ) -> dict[str, Values]:
    """Every reward's values on one batch, as the rewards gave them (None: failed), in `funcs`
    order: sync rewards in turn, async ones concurrently in one loop (as trl does, so the judge
    reward and the gated rewards share one judge call)."""
    values: dict[str, Values] = {}
    pending = []
    for func in funcs:
        if inspect.iscoroutinefunction(func):
            pending.append(func)
        else:
            values[func.__name__] = list(func(prompts, completions, **columns))

    async def run_async() -> list[Values]:
        return await asyncio.gather(*(f(prompts, completions, **columns) for f in pending))

    if pending:
        for func, out in zip(pending, asyncio.run(run_async())):
            values[func.__name__] = list(out)
    return {f.__name__: values[f.__name__] for f in funcs}
