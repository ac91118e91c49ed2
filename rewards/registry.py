"""The reward registry: name -> module-level reward function, and binding a recipe's options.

Every reward follows trl's contract `f(prompts, completions, **columns) -> list[float | None]`
(None = no value; see `rewards.groups` for what a missing value means for the advantage). Knobs
are keyword-only parameters with defaults, so a recipe's `reward_options: {<name>: {...}}` is
checked against the function's own signature: an unknown reward or option fails with the valid
choices. Every option declares what it admits when its reward is registered, as data: the type is
the parameter's annotation (`int`, `float`, `str`, `bool`, each `| None` where None is a value),
and `options=` gives each one a range or a check in the form config fields use
(`generate.common.ranges`: `in_range(AT_LEAST_1)`, `checked(OneOf(...))`, `checked(check_spec)`,
`in_range(UNBOUNDED)` for a seed). A reward whose options depend on each other adds `check`, called
with every option's value. `check_values` enforces all of it when a recipe is bound, so a value out
of range, of the wrong type, not finite (NaN), or a path that does not exist is refused (one
`UsageError`) before a model loads, not on the first batch it scores; registering a reward with an
option that declares nothing is an error at import time. A reward that needs shared resources
(encoder, reference, judge, caches) declares a keyword-only `context` parameter and receives the
`RewardContext` it was built with.

trl logs each reward as `rewards/<__name__>/mean`, so the callable handed to the trainer must carry
the reward's name; `bind` returns plain named functions (never bare partials or lambdas).
"""

from __future__ import annotations

import functools
import inspect
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from generate.common.config import KINDS, kind_refusal
from generate.common.errors import UsageError
from generate.common.ranges import Range

RewardFunc = Callable[..., Any]
CONTEXT = "context"


@dataclass(frozen=True)
class OptionSpec:
    """What one option of a reward admits: a value of `kind` (None too where `optional`), inside
    `range` (numbers) and passing `check` (raises `UsageError`), whichever are declared."""

    kind: type
    optional: bool
    range: Range | None = None
    check: Callable[[Any], None] | None = None

    def refusal(self, value: Any) -> str | None:
        """Why `value` is refused (None: admitted)."""
        if value is None:
            return None if self.optional else f"must be {KINDS[self.kind]}, got None"
        if (why := kind_refusal(value, self.kind)) is not None:
            return why
        if self.range is not None and not self.range.admits(value):
            return f"must be {self.range}, got {value!r}"
        if self.check is not None:
            try:
                self.check(value)
            except UsageError as exc:
                return str(exc)
        return None


@dataclass(frozen=True)
class RegisteredReward:
    func: RewardFunc
    novelty: bool  # a novelty-type reward: the quality gate applies to it
    check: Callable[..., None] | None = None  # raises UsageError for option values the reward refuses together
    options: Mapping[str, OptionSpec] = field(default_factory=dict)  # every option's declaration

    def check_values(self, name: str, values: Mapping[str, Any]) -> None:
        """Refuse the first option value its declaration does not admit, then the combination
        (`check`, with every option's value).

        Raises:
            UsageError: `reward '<name>': option <option> ...`, one line."""
        for option, value in values.items():
            why = self.options[option].refusal(value)
            if why is not None:
                raise UsageError(f"reward {name!r}: option {option} {why}" if why.startswith("must ")
                                 else f"reward {name!r}: option {option}: {why}")
        if self.check is not None:
            try:
                self.check(**values)
            except UsageError as exc:
                raise UsageError(f"reward {name!r}: {exc}") from None


REWARDS: dict[str, RegisteredReward] = {}


def reward(name: str, *, novelty: bool = False, options: Mapping[str, Mapping[str, Any]] | None = None,
           check: Callable[..., None] | None = None) -> Callable[[RewardFunc], RewardFunc]:
    """Register a reward function under `name` (which must be its `__name__`, the name trl logs).

    Args:
        options: every option's declaration, by name: field metadata from `generate.common.ranges`
            (`in_range(...)` for a number, `checked(...)` for a string or a combination of both);
            the type comes from the parameter's annotation.
        check: called with every option's value (the recipe's over the defaults) when the reward is
            bound, for rules between options; raises `UsageError`.

    Raises:
        ValueError: (at import) a name other than the function's, a second registration, an option
            without a declaration or a declaration without an option, or an option of a type the
            checker does not know.
    """

    def decorate(func: RewardFunc) -> RewardFunc:
        if func.__name__ != name:
            raise ValueError(f"reward {name!r} must be a function named {name!r}, got {func.__name__!r}")
        if name in REWARDS:
            raise ValueError(f"reward {name!r} registered twice")
        REWARDS[name] = RegisteredReward(func, novelty, check, declared_options(name, func, options or {}))
        return func

    return decorate


def declared_options(name: str, func: RewardFunc, declared: Mapping[str, Mapping[str, Any]]) -> dict[str, OptionSpec]:
    """Each option's `OptionSpec`: its annotation's type and its declared range and check."""
    names = option_names(func)
    undeclared, unknown = sorted(set(names) - set(declared)), sorted(set(declared) - set(names))
    if undeclared or unknown:
        raise ValueError(f"reward {name!r}: every option declares what it admits (a range or a check, "
                         f"`options=`); undeclared: {', '.join(undeclared) or 'none'}; "
                         f"declared but no such option: {', '.join(unknown) or 'none'}")
    hints = typing.get_type_hints(func)
    specs = {}
    for option in names:
        kind, optional = _kind(hints.get(option))
        if kind not in KINDS:
            raise ValueError(f"reward {name!r}: option {option} is annotated {hints.get(option)!r}; "
                             f"the checker knows {', '.join(k.__name__ for k in KINDS)} (each optionally | None)")
        meta = declared[option]
        if meta.get("range") is None and meta.get("check") is None:
            raise ValueError(f"reward {name!r}: option {option} declares neither a range nor a check")
        specs[option] = OptionSpec(kind, optional, meta.get("range"), meta.get("check"))
    return specs


def _kind(hint: Any) -> tuple[Any, bool]:
    """(the type, whether None is admitted) of an annotation such as `int` or `str | None`."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return (args[0] if len(args) == 1 else hint), len(args) < len(typing.get_args(hint))
    return hint, False


def get_reward(name: str) -> RegisteredReward:
    """The registered reward `name`; an unknown name lists the valid ones."""
    if name not in REWARDS:
        raise UsageError(f"unknown reward {name!r}; valid rewards: {', '.join(sorted(REWARDS))}")
    return REWARDS[name]


def option_names(func: RewardFunc) -> list[str]:
    """The keyword-only parameters of a reward a recipe may set (all but `context`)."""
    return [p.name for p in inspect.signature(func).parameters.values()
            if p.kind is p.KEYWORD_ONLY and p.name != CONTEXT]


def option_defaults(func: RewardFunc) -> dict[str, Any]:
    """Every option's default value."""
    return {p.name: p.default for p in inspect.signature(func).parameters.values()
            if p.kind is p.KEYWORD_ONLY and p.name != CONTEXT}


def with_defaults(func: RewardFunc, options: Mapping[str, Any]) -> dict[str, Any]:
    """`options`, then the default of every option they leave out (a value given is refused
    before a default, so the error names what the recipe said)."""
    return {**options, **{k: v for k, v in option_defaults(func).items() if k not in options}}


def check_options(name: str, options: Mapping[str, Any]) -> None:
    """Refuse options that reward `name` does not take, or values it does not admit (the recipe's
    over the defaults), without binding anything.

    Raises:
        UsageError: an unknown reward or option, or a value its declaration refuses."""
    entry = get_reward(name)
    _refuse_unknown(name, entry.func, options)
    entry.check_values(name, with_defaults(entry.func, options))


def check_values(name: str, **values: Any) -> None:
    """Refuse values of some options of the registered reward `name` (a reward called directly,
    not through `bind`, checks its own options with this)."""
    get_reward(name).check_values(name, values)


def _refuse_unknown(name: str, func: RewardFunc, options: Mapping[str, Any]) -> None:
    valid = option_names(func)
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise UsageError(f"reward {name!r}: unknown option(s) {', '.join(unknown)}; "
                         f"valid: {', '.join(valid) or 'none'}")


def bind(name: str, func: RewardFunc, options: Mapping[str, Any], context: Any) -> RewardFunc:
    """`func` with `options` (and the context, if it takes one) bound, as a plain function named
    `name` (sync or async like `func`), timed under `name` by the context's timer."""
    _refuse_unknown(name, func, options)
    entry = REWARDS.get(name)
    if entry is not None:
        entry.check_values(name, with_defaults(func, options))
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
