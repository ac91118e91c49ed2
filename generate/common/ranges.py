"""The valid values of an option, declared with the option and checked in one place.

Without it, a number that means nothing ran as something else: `--limit 0` ran every prompt,
`--limit -3` all but the last three, and `--max-new-tokens 0` asked for empty replies that the
retries then spent their budget on. Now a config field says what it admits in its metadata
(`field(..., metadata=in_range(AT_LEAST_1))`), and `check_options` refuses a value outside it with
one error line (exit 2) before anything runs. A field whose values are not numbers declares a
check instead (`metadata=checked(OneOf(MODES))`, a model spec's `check_spec`, a dataset's
`check_dataset`), refused the same way, so a misspelt `--judge-mode` stops a benchmark before it
generates, not after its first framework:

- `build_config` checks every command's config; a config that composite commands also build
  themselves (the evaluation's, the curation's) checks in its `__post_init__` too.
- A command that builds its own argparse parser (`rate`, `corpus`, `plot-rewards`) gives a number
  option `type=ranged(int, AT_LEAST_1)`: argparse refuses a value outside the range.
- A dataclass that trl's parser reads declares its ranges and checks in class attributes `RANGES`
  and `CHECKS` (that parser hands a field's metadata to argparse, which takes no key of ours) and
  checks them in its `__post_init__`.
- A reward's keyword options (`reward_options` in a GRPO recipe) declare theirs with the same
  metadata where the reward is registered (`rewards.registry.reward(options=...)`), checked when a
  recipe is bound.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from generate.common.errors import UsageError
from generate.common.secrets import redact_url


@dataclass(frozen=True)
class Range:
    """low <= x (low < x where `open_low`) and x <= high (x < high where `open_high`); None: no
    bound on that side."""

    low: float | None = None
    high: float | None = None
    open_low: bool = False
    open_high: bool = False

    def admits(self, x: float) -> bool:
        """Whether `x` lies in the range; NaN and infinity never do (no option means them)."""
        if isinstance(x, float) and not math.isfinite(x):
            return False
        if self.low is not None and (x <= self.low if self.open_low else x < self.low):
            return False
        return self.high is None or (x < self.high if self.open_high else x <= self.high)

    def __str__(self) -> str:
        if self.low is None and self.high is None:
            return "any number"
        if self.high is None:
            return f"{'>' if self.open_low else '>='} {self.low:g}"
        if self.low is None:
            return f"{'<' if self.open_high else '<='} {self.high:g}"
        return f"in {'(' if self.open_low else '['}{self.low:g}, {self.high:g}{')' if self.open_high else ']'}"


AT_LEAST_1 = Range(1)  # counts: prompts, tokens, rounds, batch sizes, samples
NON_NEGATIVE = Range(0)  # retries, budgets in seconds, temperatures
POSITIVE = Range(0, open_low=True)  # timeouts, smoothing constants
TOP_P = Range(0, 1, open_low=True)  # a nucleus keeps at least the top token; 1 keeps every token
FRACTION = Range(0, 1, open_low=True, open_high=True)  # shares and levels strictly between 0 and 1
HELD_OUT = Range(0, 1, open_high=True)  # a training split's held-out share: 0 holds none out


PORT = Range(0, 65535)  # 0: the system picks a free one
UNBOUNDED = Range()  # seeds: any integer seeds a generator


def ranged(kind: Callable[[str], float], rng: Range) -> Callable[[str], float]:
    """An argparse `type` that reads `kind` and refuses a value outside `rng` (one `error:` line)."""

    def read(text: str) -> float:
        value = kind(text)  # a ValueError: argparse says "invalid int value"
        if not rng.admits(value):
            raise argparse.ArgumentTypeError(f"must be {rng}, got {text}")
        return value

    read.__name__ = kind.__name__  # argparse names the type in its "invalid ... value" message
    return read


def in_range(rng: Range, **metadata: Any) -> dict[str, Any]:
    """A field's metadata with its range: `field(default=3, metadata=in_range(AT_LEAST_1, help=...))`."""
    return {**metadata, "range": rng}


@dataclass(frozen=True)
class OneOf:
    """A string option's admitted values (for a list option, each item's). `choices` may be a
    registry that fills as its modules import: it is read when a value is checked."""

    choices: Collection[str]

    def __call__(self, value: str | list[str]) -> None:
        bad = [v for v in (value if isinstance(value, list) else [value]) if v not in self.choices]
        if bad:
            raise UsageError(f"{', '.join(map(repr, bad))} is not {self}")

    def __str__(self) -> str:
        return f"one of: {', '.join(self.choices)}"


def existing_dir(path: str) -> None:
    """A check: `path` is an existing directory."""
    if not Path(path).is_dir():
        raise UsageError(f"no such directory: {path}")


def http_url(url: str) -> None:
    """A check: an http(s) URL with a host and a numeric port if any (an OpenAI-compatible
    server's `base_url`), the one check of reward options and the openai backend. The URL in the
    message has its credentials masked (`https://user:KEY@host`)."""
    try:
        parts = urlsplit(url)
        ok = parts.scheme in ("http", "https") and bool(parts.hostname)
        parts.port  # noqa: B018 - raises on a port that is not a number
    except ValueError:
        ok = False
    if not ok:
        raise UsageError(f"{redact_url(url)!r} is not an http(s):// URL with a host (http(s)://host[:port]/path, "
                         "e.g. http://127.0.0.1:8000/v1)")


def checked(check: Callable[[Any], None], **metadata: Any) -> dict[str, Any]:
    """A field's metadata with a check that raises `UsageError` on a bad value (None is never
    checked): `OneOf(...)`, a model spec's `check_spec`, a dataset's `check_dataset`."""
    return {**metadata, "check": check}


def check_of(cls: type, f: dataclasses.Field) -> Callable[[Any], None] | None:
    """The check a field of `cls` declares: in its metadata, or in the class's `CHECKS`."""
    return f.metadata.get("check") or getattr(cls, "CHECKS", {}).get(f.name)


def range_of(cls: type, f: dataclasses.Field) -> Range | None:
    """The range a field of `cls` declares: in its metadata, or in the class's `RANGES`."""
    return f.metadata.get("range") or getattr(cls, "RANGES", {}).get(f.name)


def check_options(cfg: Any) -> None:
    """Refuse the first field of the dataclass `cfg` whose value lies outside its declared range
    or fails its declared check (None, an option not given, passes)."""
    for f in dataclasses.fields(cfg):
        rng = range_of(type(cfg), f)
        value = getattr(cfg, f.name)
        if value is None:
            continue
        flag = f"--{f.name.replace('_', '-')}"
        if rng is not None:
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if not (number and rng.admits(value)):
                raise UsageError(f"{flag} must be {'a number ' if not number else ''}{rng}, "
                                 f"got {value if number else repr(value)}")
        if (check := check_of(type(cfg), f)) is not None:
            try:
                check(value)
            except UsageError as exc:
                raise UsageError(f"{flag}: {exc}") from None
