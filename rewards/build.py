"""From a recipe's `reward_funcs` / `reward_options` / `reward_gate` to the callables trl expects."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from generate.common.errors import UsageError
from rewards.context import RewardContext
from rewards.gate import GATES, gated
from rewards.registry import RewardFunc, bind, check_options, get_reward


def check_recipe(names: Sequence[str], options: Mapping[str, Mapping[str, Any]] | None = None,
                 gate: str = "none") -> None:
    """Refuse a recipe's rewards before anything is loaded or written: what `build_rewards` refuses
    (see there), every option value its reward's declaration refuses included
    (`rewards.registry`: a range, a type, a path that does not exist, an unknown name).

    Raises:
        UsageError: one line naming the reward and the option."""
    options = dict(options or {})
    if len(set(names)) != len(names):
        raise UsageError(f"reward_funcs lists a reward twice: {list(names)}")
    if gate not in GATES:
        raise UsageError(f"unknown reward gate {gate!r}; valid: {', '.join(GATES)}")
    stray = sorted(set(options) - set(names) - ({"judge"} if gate == "judge" else set()))
    if stray:
        raise UsageError(f"reward_options for unselected reward(s) {', '.join(stray)}; selected: {', '.join(names)}")
    for name in [*names, *(["judge"] if gate == "judge" and "judge" not in names else [])]:
        check_options(name, options.get(name, {}))


def build_rewards(names: Sequence[str], options: Mapping[str, Mapping[str, Any]] | None = None,
                  gate: str = "none", context: RewardContext | None = None) -> list[RewardFunc]:
    """The reward callables for a recipe, in `names` order (the order of `reward_weights`).

    Args:
        names: Registered reward names.
        options: Per-reward keyword options, e.g. `{"length": {"target_words": 300}}`. Options for
            `judge` also configure the judge that the quality gate uses.
        gate: "none" for a plain weighted sum, or "judge": every novelty-type reward is gated by
            the judge's quality score in [0, 1] (`rewards.gate`) and logged as `gated_<name>`.
        context: the shared resources (encoder, reference, judge, caches, timer); a new one by
            default. Pass the same context to the reward-time callback.

    Raises:
        UsageError: Unknown reward, option or gate, duplicate names, options for a reward that is
            not selected (a config field no code would read), or an option value the reward's
            declaration refuses (`check_recipe`).
    """
    check_recipe(names, options, gate)
    context = context or RewardContext()
    options = dict(options or {})
    judge = bind("judge", get_reward("judge").func, options.get("judge", {}), context) if gate == "judge" else None
    funcs = []
    for name in names:
        entry = get_reward(name)
        func = bind(name, entry.func, options.get(name, {}), context)
        if judge is not None and entry.novelty:
            func = gated(func, judge)
        funcs.append(func)
    return funcs
