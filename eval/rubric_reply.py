"""How a judge's reply in the rubric's format is read: the `Score: N` line of a sampled reply, and
the digit distribution right after `Score:` of a logprob-mode reply (`eval.judge` has the protocol).

Kept apart from the judge because other scorers ask in the same format and read replies the same
way (the principle detector and the curation agents on a 0-1 scale): one reading for all of them.
"""

from __future__ import annotations

import math
import re

from eval.rubric import SCORE_LINE
from generate.backends import Completion

SCORE_PREFIX = "Score:"
_SKIPPABLE = " \t\r\n*_`"
# What may not follow the number of a score line: another number joined to it by a dash, "to" or
# "or" (a range or a hedge, "3-4"), a decimal comma ("4,5") or letters run into it ("1e3"). The
# score pattern stops at the first number of each, which would read them as their first digit.
_CONTINUED = re.compile(r"[ \t]*(?:[-\u2010-\u2015]|to\b|or\b)[ \t]*\d|,\d|[^\W_]", re.IGNORECASE)


def parse_score(text: str, low: int = 0, high: int = 5) -> int | None:
    """Read an integer score from a judge's reply (never from the story it judged).

    Only a `Score: N` line counts, and the last one wins (a reply may think aloud and then
    settle). A reply without one is a parse failure, even if it holds a bare number: "it
    reminded me of chapter 3" must not become a 3.

    Returns:
        The score, or None for an empty reply, no Score line, a number outside `low..high` or on
        another scale ("8/10"), a fraction ("4.5", "4,5"; a whole number written "3.0" is 3), or
        a range ("3-4", "3 or 4"): a hedge is no score, and its first number would bias it low.
    """
    if not text or not text.strip():
        return None
    last = None
    for last in SCORE_LINE.finditer(text):
        pass
    if last is None or _CONTINUED.match(text, last.end()):
        return None
    value, scale = last.groups()
    return _checked(value, scale, low, high)


def _checked(value: str, scale: str, low: int, high: int) -> int | None:
    """The score if it is a whole number of the scale: "3.0" is 3 (the value the scale asks for,
    written with a decimal), while "4.5" is refused: the scale is integer, so a fraction means the
    reply ignored it."""
    if scale and int(scale) != high:
        return None
    number = float(value)
    if not number.is_integer():
        return None
    score = int(number)
    return score if low <= score <= high else None


def expected_score(top: dict[str, float], low: int = 0, high: int = 5) -> float | None:
    """Expected score sum_d p(d) d over the digit tokens `low..high`, renormalised over them.

    Args:
        top: token -> natural-log probability at one position (a top-k list). Tokens equal to a
            digit up to surrounding whitespace (" 4", "4") pool their mass.

    Returns:
        The expectation, or None when no digit of the scale is present.
    """
    mass = [0.0] * (high + 1)
    for token, logprob in top.items():
        digit = _digit(token, low, high)
        if digit is not None and logprob > -math.inf:
            mass[digit] += math.exp(logprob)
    total = sum(mass)
    if total <= 0.0:
        return None
    return sum(d * p for d, p in enumerate(mass)) / total


def score_from_logprobs(completion: Completion, prefilled: bool, low: int = 0, high: int = 5) -> float | None:
    """The expected score at the position right after `Score:` in a logprob-mode reply, or None
    (`logprob_score` gives the reason)."""
    return logprob_score(completion, prefilled, low, high)[0]


def logprob_score(completion: Completion, prefilled: bool, low: int = 0, high: int = 5) -> tuple[float | None, str]:
    """(the expected score after `Score:`, or None; why it is None, else "").

    With a prefilled `Score:` that position is the first generated token; otherwise it follows
    the first run of generated tokens whose text ends in `Score:` (markdown such as `**` around
    it allowed). One rule decides at every position: the digits of the scale are the judge's
    verdict there only if together they are at least as likely as the token it chose (greedy: its
    single most likely token). A chosen digit passes by itself. Otherwise a whitespace or markdown
    token ("Score:" then " " then "4" in tokenizers that split the space off) is stepped over, and
    any other token (" N" of "N/A") means the judge answered something other than a score: missing.
    Renormalising improbable digits (p = 1e-4 next to " N" at p = 0.9999, or next to a space)
    would read as a confident score the judge never gave.
    """
    tokens = completion.logprobs
    if not tokens:
        return None, "the backend returned no logprobs"
    start = 0 if prefilled else _after_prefix(tokens)
    if start is None:
        return None, f"the reply never produced {SCORE_PREFIX!r}"
    for tok in tokens[start:]:
        dist = {tok.token: tok.logprob, **tok.top}
        mass, chosen = _digit_mass(dist, low, high), math.exp(tok.logprob)
        if mass > 0.0 and mass >= chosen:
            return expected_score(dist, low, high), ""
        if tok.token.strip(_SKIPPABLE):
            return None, (f"after {SCORE_PREFIX!r} the judge chose {tok.token!r} (p={chosen:.2g}), not a score: "
                          f"the digits {low}-{high} held p={mass:.2g}")
    return None, f"no digit {low}-{high} outweighed the whitespace after {SCORE_PREFIX!r}"


def _digit(token: str, low: int, high: int) -> int | None:
    """The digit of the scale a token is, up to whitespace, else None. `isdecimal`, not `isdigit`:
    "²" is a digit to `isdigit` but no number to `int`, and one such token among a reply's top
    logprobs would stop the whole evaluation."""
    word = token.strip()
    if len(word) != 1 or not word.isdecimal():
        return None
    return int(word) if low <= int(word) <= high else None


def _digit_mass(dist: dict[str, float], low: int, high: int) -> float:
    return sum(math.exp(lp) for t, lp in dist.items() if _digit(t, low, high) is not None)


def _after_prefix(tokens) -> int | None:
    text = ""
    for i, tok in enumerate(tokens):
        text += tok.token
        if text.rstrip(_SKIPPABLE).lower().endswith(SCORE_PREFIX.lower()):
            return i + 1
    return None

