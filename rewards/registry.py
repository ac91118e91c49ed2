"""The reward registry: name -> module-level reward function, and the builder that binds options.

Every reward follows trl's contract `f(prompts, completions, **columns) -> list[float | None]`
(None = not applicable, which trl turns into NaN and leaves out of the weighted sum). Knobs are
keyword-only parameters with defaults, so a recipe's `reward_options: {<name>: {...}}` is checked
against the function's own signature: an unknown reward or option fails with the valid choices.

trl logs each reward as `rewards/<__name__>/mean`, so the callable handed to the trainer must carry
the reward's name; `build_rewards` returns plain named functions (never bare partials or lambdas).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from generate.common.errors import UsageError
from rewards import timing

RewardFunc = Callable[..., Any]


@dataclass(frozen=True)
class RegisteredReward:
    func: RewardFunc
    novelty: bool  # a novelty-type reward: the quality gate applies to it


REWARDS: dict[str, RegisteredReward] = {}


def reward(name: str, *, novelty: bool = False) -> Callable[[RewardFunc], RewardFunc]:
    """Register a reward function under `name` (which must be its `__name__`, the name trl logs)."""

    def decorate(func: RewardFunc) -> RewardFunc:
        if func.__name__ != name:
            raise ValueError(f"reward {name!r} must be a function named {name!r}, got {func.__name__!r}")
        if name in REWARDS:
            raise ValueError(f"reward {name!r} registered twice")
        REWARDS[name] = RegisteredReward(func, novelty)
        return func

    return decorate


def get_reward(name: str) -> RegisteredReward:
    """The registered reward `name`; an unknown name lists the valid ones."""
    if name not in REWARDS:
        raise UsageError(f"unknown reward {name!r}; valid rewards: {', '.join(sorted(REWARDS))}")
    return REWARDS[name]


def option_names(func: RewardFunc) -> list[str]:
    """The keyword-only parameters of a reward: the options a recipe may set."""
    return [p.name for p in inspect.signature(func).parameters.values() if p.kind is p.KEYWORD_ONLY]


def bind(name: str, func: RewardFunc, options: Mapping[str, Any]) -> RewardFunc:
    """`func` with `options` bound, as a plain function named `name` (sync or async like `func`),
    timed under `name` for the reward-time callback."""
    valid = option_names(func)
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise UsageError(f"reward {name!r}: unknown option(s) {', '.join(unknown)}; "
                         f"valid: {', '.join(valid) or 'none'}")
    bound = functools.partial(func, **options)
    if inspect.iscoroutinefunction(func):

        async def named(prompts, completions, **columns):
            with timing.timed(name):
                return await bound(prompts, completions, **columns)
    else:

        def named(prompts, completions, **columns):
            with timing.timed(name):
                return bound(prompts, completions, **columns)

    functools.update_wrapper(named, func)
    named.__name__ = named.__qualname__ = name
    return named


def build_rewards(names: Sequence[str], options: Mapping[str, Mapping[str, Any]] | None = None,
                  gate: str = "none") -> list[RewardFunc]:
    """The reward callables for a recipe, in `names` order (the order of `reward_weights`).

    Args:
        names: Registered reward names.
        options: Per-reward keyword options, e.g. `{"length": {"target_words": 300}}`. Options for
            `judge` also configure the judge that the quality gate uses.
        gate: "none" for a plain weighted sum, or "judge": every novelty-type reward is multiplied
            by the judge's quality score in [0, 1] and logged as `gated_<name>`.

    Raises:
        UsageError: Unknown reward, option or gate, duplicate names, or options for a reward that
            is not selected (a config field no code would read).
    """
    from rewards.gate import GATES, gated  # imported here: gate.py imports this module

    options = dict(options or {})
    if len(set(names)) != len(names):
        raise UsageError(f"reward_funcs lists a reward twice: {list(names)}")
    if gate not in GATES:
        raise UsageError(f"unknown reward gate {gate!r}; valid: {', '.join(GATES)}")
    stray = sorted(set(options) - set(names) - ({"judge"} if gate == "judge" else set()))
    if stray:
        raise UsageError(f"reward_options for unselected reward(s) {', '.join(stray)}; selected: {', '.join(names)}")
    judge = bind("judge", get_reward("judge").func, options.get("judge", {})) if gate == "judge" else None
    funcs = []
    for name in names:
        entry = get_reward(name)
        func = bind(name, entry.func, options.get(name, {}))
        if judge is not None and entry.novelty:
            func = gated(func, judge)
        funcs.append(func)
    return funcs
