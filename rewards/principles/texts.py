"""Reading what a model writes back in the principle optimisation: rewrites of the principles and
the strategy, and the Reflector's diagnoses.

Model rewrites are parsed leniently but bounded: at most `max_principles` items, each one sentence
of at most `max_words` words; a reply without enough usable items is *unusable* and the caller
keeps the old principles. The data they rewrite (the state file, the role prompts, the fence) is
the principle judge's own (`eval.scorers.principles.texts`).
"""

from __future__ import annotations

import re

from eval.rubric import judged_text
from eval.scorers.principles.texts import unfenced
from generate.backends import Completion
from generate.clean import clean_feedback

# A list item: a bullet, a number ("1.", "2)", "(3)") or both ("- 1. x"), then the text.
_ITEM = re.compile(r"^\s*(?:[-*•+]\s*(?:\(?\d{1,2}[.):]\s*)?|\(?\d{1,2}[.):])\s*(\S.*?)\s*$")
_INLINE_NUMBER = re.compile(r"\s+(?=\d{1,2}[.)]\s)")  # "1. A. 2. B." written on one line
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


def reply_text(reply: Completion, echo_of: str | None = None, prefill: str | None = None) -> str:
    """A rewrite or diagnosis reply as usable text: the `prefill` it was started with put back in
    front, fence markers gone, the last line dropped when the token budget cut it off, each line
    once (small models loop), and with `echo_of` (the request) every line of 3+ words that only
    repeats the request dropped."""
    lines = unfenced((prefill or "") + reply.text).splitlines()
    if reply.finish_reason == "length" and len(lines) > 1:
        lines = lines[:-1]
    request = _norm(echo_of or "")
    seen: set[str] = set()
    out = []
    for line in lines:
        key = _norm(line)
        if key in seen or (request and len(key.split()) >= 3 and key.rstrip(".!?:") in request):
            continue
        if key:
            seen.add(key)
        out.append(line)
    return "\n".join(out)


def _words(text: str) -> int:
    """Words that hold a letter: "* * * *" is no strategy and "- -" no principle."""
    return sum(any(c.isalpha() for c in w) for w in text.split())


def _norm(text: str) -> str:
    return " ".join(text.split()).lower()


def parse_principles(reply: str, max_principles: int, max_words: int, min_principles: int = 2
                     ) -> tuple[tuple[str, ...] | None, str]:
    """The principles of a rewrite, or (None, why it is unusable).

    Only list items count ("- x", "* x", "1. x", "2) x", "- 3. x", several numbered items on one
    line): a small model's chatter around the list is not a principle. Each item is cleaned like a judged text (no score claims), reduced to its
    first sentence, and dropped when that is a heading (ends in ":") or has under 3 words (with a
    letter) or over `max_words` words; duplicates go, and at most `max_principles` are kept.
    """
    items: list[str] = []
    for line in (part for row in reply.splitlines() for part in _INLINE_NUMBER.split(row)):
        m = _ITEM.match(line)
        if not m:
            continue
        text = " ".join(judged_text(m.group(1)).replace("**", "").replace("__", "").split())
        text = _SENTENCE_END.split(text, maxsplit=1)[0]
        if text.endswith(":"):  # a heading ("The revised principles:"), not a principle
            continue
        if 3 <= _words(text) and len(text.split()) <= max_words and text.lower() not in {i.lower() for i in items}:
            items.append(text)
    if len(items) < min_principles:
        why = f"{len(items)} usable principle(s) in the reply (need {min_principles} list items of 3-{max_words} words)"
        return None, why
    return tuple(items[:max_principles]), ""


def parse_strategy(reply: str, max_words: int, min_words: int = 5) -> tuple[str | None, str]:
    """The Generator's new strategy, or (None, why it is unusable): its first paragraph once the
    chatter around it and a leading line that only announces it ("New strategy:") are removed
    (small models go on with examples and echoes after a blank line)."""
    lines = clean_feedback(reply).splitlines()
    while len(lines) > 1 and (not lines[0].strip() or lines[0].rstrip().endswith(":")):
        lines.pop(0)
    paragraph = "\n".join(lines).strip().split("\n\n")[0]
    words = judged_text(paragraph).split()
    if (found := _words(paragraph)) < min_words:
        return None, f"strategy of {found} word(s) with a letter (need at least {min_words})"
    return " ".join(words[:max_words]), ""


def bounded(text: str, max_words: int) -> str:
    """A model's free text (a diagnosis) cut to `max_words` words, chatter removed."""
    words = judged_text(clean_feedback(text)).split()
    return " ".join(words[:max_words]) + (" ..." if len(words) > max_words else "")
