"""The reward registry: name -> module-level reward function, and binding a recipe's options.

Every reward follows trl's contract `f(prompts, completions, **columns) -> list[float | None]`
(None = no value; see `rewards.groups` for what a missing value means for the advantage). Knobs
are keyword-only parameters with defaults, so a recipe's `reward_options: {<name>: {...}}` is
checked against the function's own signature: an unknown reward or option fails with the valid
choices, and a reward registered with `check` has its options' values checked when it is bound, so
a value out of range is refused before a model loads, not on the first batch it scores. A reward
that needs shared resources (encoder, reference, judge, caches) declares a keyword-only `context`
parameter and receives the `RewardContext` it was built with.

trl logs each reward as `rewards/<__name__>/mean`, so the callable handed to the trainer must carry
the reward's name; `bind` returns plain named functions (never bare partials or lambdas).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from generate.common.errors import UsageError

RewardFunc = Callable[..., Any]
CONTEXT = "context"


@dataclass(frozen=True)
class RegisteredReward:
    func: RewardFunc
    novelty: bool  # a novelty-type reward: the quality gate applies to it
    check: Callable[..., None] | None = None  # raises UsageError for option values the reward refuses


REWARDS: dict[str, RegisteredReward] = {}


def reward(name: str, *, novelty: bool = False, check: Callable[..., None] | None = None
           ) -> Callable[[RewardFunc], RewardFunc]:
    """Register a reward function under `name` (which must be its `__name__`, the name trl logs);
    `check` is called with every option's value (the recipe's over the defaults) when it is bound."""

    def decorate(func: RewardFunc) -> RewardFunc:
        if func.__name__ != name:
            raise ValueError(f"reward {name!r} must be a function named {name!r}, got {func.__name__!r}")
        if name in REWARDS:
            raise ValueError(f"reward {name!r} registered twice")
        REWARDS[name] = RegisteredReward(func, novelty, check)
        return func

    return decorate


def get_reward(name: str) -> RegisteredReward:
    """The registered reward `name`; an unknown name lists the valid ones."""
    if name not in REWARDS:
        raise UsageError(f"unknown reward {name!r}; valid rewards: {', '.join(sorted(REWARDS))}")
    return REWARDS[name]


def option_names(func: RewardFunc) -> list[str]:
    """The keyword-only parameters of a reward a recipe may set (all but `context`)."""
    return [p.name for p in inspect.signature(func).parameters.values()
            if p.kind is p.KEYWORD_ONLY and p.name != CONTEXT]


def bind(name: str, func: RewardFunc, options: Mapping[str, Any], context: Any) -> RewardFunc:
    """`func` with `options` (and the context, if it takes one) bound, as a plain function named
    `name` (sync or async like `func`), timed under `name` by the context's timer."""
    valid = option_names(func)
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise UsageError(f"reward {name!r}: unknown option(s) {', '.join(unknown)}; "
                         f"valid: {', '.join(valid) or 'none'}")
    entry = REWARDS.get(name)
    if entry is not None and entry.check is not None:
        defaults = {p.name: p.default for p in inspect.signature(func).parameters.values()
                    if p.kind is p.KEYWORD_ONLY and p.name != CONTEXT}
        entry.check(**{**defaults, **options})
    takes_context = CONTEXT in inspect.signature(func).parameters
    bound = functools.partial(func, **options, **({CONTEXT: context} if takes_context else {}))
    timed = context.timer.timed
    if inspect.iscoroutinefunction(func):

        async def named(prompts, completions, **columns):
            with timed(name):
                return await bound(prompts, completions, **columns)
    else:

        def named(prompts, completions, **columns):
            with timed(name):
                return bound(prompts, completions, **columns)

    functools.update_wrapper(named, func)
    named.__name__ = named.__qualname__ = name
    return named
