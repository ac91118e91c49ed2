"""Completions in their prompt groups: the keys that tie siblings together, gathering them across
processes, and what a failed reward value means for GRPO's group-relative advantage.

GRPO's advantage of a completion is its reward minus its group's mean (over the `num_generations`
siblings of one prompt). trl sums the weighted reward components with `nansum`, so a component
that failed for one completion (None, e.g. a judge call that timed out) counts as 0 for it while
its siblings keep their values: a judge outage would act as a penalty (or, for a negative
component, a bonus) inside the group. We define a failure as carrying no information instead:
the failed value is replaced by the mean of its group's present values, so that completion's
advantage on that component is zero and the group mean stays the same. The siblings keep the sign
and order of their advantages, not their size: under trl's default `scale_rewards="group"` the
advantage is divided by the group's standard deviation, which the filled value shrinks (siblings
1, 2, 3 alone: -1.00, 0, +1.00; with a fourth filled by 2: -1.22, 0, +1.22). A component that
failed for a whole group stays missing for the whole group, which trl's `nansum` treats alike for
every sibling, so it moves no advantage either. `fill_group_means` is
the one implementation: the trainer applies it to the gathered reward matrix
(`train/trainer.py`) and `rewards.composite.score_batch` to its values, so held-out scores
combine rewards exactly as training does.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Sequence
from typing import Any


def group_keys(prompts: list[Any], prompt_id: list[str] | None = None) -> list[str]:
    """One key per completion identifying its prompt group.

    The dataset's `prompt_id` column is the reliable key; without it the rendered prompt itself
    is used (two different rows with identical text then count as one group, which is harmless
    because their completions answer the same request).
    """
    if prompt_id is not None:
        return [str(k) for k in prompt_id]
    return [repr(p) for p in prompts]


def gather_across_processes(keys: list[str], values: list[Any]) -> tuple[list, list, int]:
    """All processes' (keys, values) in process order, and where this process's slice starts.

    Must be called by every process at the same point (as trl calls sync reward functions).
    """
    from accelerate import PartialState
    from accelerate.utils import gather_object

    state = PartialState()
    if state.num_processes == 1:
        return keys, values, 0
    sizes = gather_object([len(keys)])
    pairs = gather_object(list(zip(keys, values)))
    offset = sum(sizes[:state.process_index])
    return [k for k, _ in pairs], [v for _, v in pairs], offset


def fill_group_means(values: Sequence[float | None], groups: Sequence[Hashable]) -> tuple[list[float | None], int]:
    """Replace each missing (None or NaN) value by the mean of its group's present values.

    Returns:
        (filled values, number of values filled); a group without any present value stays missing.
    """
    present: dict[Hashable, list[float]] = defaultdict(list)
    for v, g in zip(values, groups, strict=True):
        if _present(v):
            present[g].append(float(v))
    out: list[float | None] = []
    filled = 0
    for v, g in zip(values, groups):
        if _present(v):
            out.append(float(v))
        elif present[g]:
            out.append(math.fsum(present[g]) / len(present[g]))
            filled += 1
        else:
            out.append(None)
    return out, filled


def _present(v: float | None) -> bool:
    return v is not None and math.isfinite(v)
