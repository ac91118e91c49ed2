"""The principle judge's texts: the state file (principles + strategy), the role prompts, and the
robust reading of what a model writes back.

Everything a model reads is data (`configs/judge/principles.yaml`, `configs/prompts/principles.yaml`)
validated on load, so a broken template fails before a model is loaded. Model rewrites are parsed
leniently but bounded: at most `max_principles` items, each one sentence of at most `max_words`
words; a reply without enough usable items is *unusable* and the caller keeps the old principles.
Texts shown to a model are fenced the way the rubric judge fences stories (`eval.rubric`), so a
response (or a rewrite) cannot speak as instructions or hand the Detector its own verdict.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from eval.rubric import MODES, Aspect, Rubric, judged_text
from generate.backends import Completion
from generate.clean import clean_feedback
from generate.common.config import load_yaml
from generate.common.errors import UsageError
from generate.common.manifest import sha256_text
from generate.common.paths import CONFIG_DIR

DEFAULT_STATE = CONFIG_DIR / "judge" / "principles.yaml"
DEFAULT_TEMPLATES = CONFIG_DIR / "prompts" / "principles.yaml"

# template -> (fields it may use, fields it must use)
TEMPLATES: dict[str, tuple[set[str], set[str]]] = {
    "detector": ({"principles", "prompt", "response", "labels"}, {"principles", "response", "labels"}),
    "degrade": ({"strategy", "prompt", "response"}, {"strategy", "response"}),
    "write_bad": ({"strategy", "prompt"}, {"strategy", "prompt"}),
    "subtler": ({"strategy", "examples", "max_words"}, {"strategy", "examples"}),
    "feedback": ({"principles", "strategy", "examples", "max_principles", "max_words"}, {"principles", "examples"}),
    "diagnose": ({"principles", "prompt", "response", "verdict", "truth"}, {"principles", "response", "truth"}),
    "reflect": ({"principles", "diagnoses", "max_principles", "max_words"}, {"principles", "diagnoses"}),
}
# A rubric whose template is only the fenced text: `eval.rubric`'s own sanitising, score-claim
# removal and hash-derived markers, reused as they are.
_FENCE = Rubric({"text": Aspect("text", "text", "", {})}, dict.fromkeys(MODES, "{begin}\n{story}\n{end}"))
_MARKER = re.compile(r"<*STORY-[0-9A-F]{12}>*", re.IGNORECASE)  # our fence markers, which small models echo
# A list item: a bullet, a number ("1.", "2)", "(3)") or both ("- 1. x"), then the text.
_ITEM = re.compile(r"^\s*(?:[-*•+]\s*(?:\(?\d{1,2}[.):]\s*)?|\(?\d{1,2}[.):])\s*(\S.*?)\s*$")
_INLINE_NUMBER = re.compile(r"\s+(?=\d{1,2}[.)]\s)")  # "1. A. 2. B." written on one line
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


def fenced(text: str) -> str:
    """`text` as the judge sees a story: sanitised, score claims removed, between hash markers."""
    return _FENCE.render("sample", "text", text)


def unfenced(text: str) -> str:
    """A reply without the fence markers it copied from its request."""
    return _MARKER.sub("", text)


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


def numbered(items: list[str] | tuple[str, ...]) -> str:
    return "\n".join(f"{i}. {p}" for i, p in enumerate(items, 1))


@dataclass(frozen=True)
class State:
    """What the game optimises: the Detector's principles and the Generator's strategy."""

    principles: tuple[str, ...]
    strategy: str = ""

    def to_yaml(self, **extra: object) -> str:
        data = {"principles": list(self.principles), "strategy": self.strategy, **extra}
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)


def load_state(path: str | Path | None = None, *, need_strategy: bool = True) -> State:
    """Read a principles file (the starting set, or any `iteration-NN.yaml` / `principles.yaml`).

    Raises:
        UsageError: no non-empty list of principles, or (when `need_strategy`) no strategy.
    """
    path = Path(path or DEFAULT_STATE)
    data = load_yaml(path)
    items = data.get("principles")
    if not isinstance(items, list) or not items or not all(isinstance(p, str) and p.strip() for p in items):
        raise UsageError(f"{path}: 'principles' must be a non-empty list of texts")
    strategy = data.get("strategy") or ""
    if need_strategy and not (isinstance(strategy, str) and strategy.strip()):
        raise UsageError(f"{path}: 'strategy' (the Generator's starting strategy) is missing")
    return State(tuple(" ".join(p.split()) for p in items), " ".join(str(strategy).split()))


@dataclass(frozen=True)
class Templates:
    """The role prompts, the Detector's label texts and the weak-label recipe's data."""

    templates: dict[str, str]
    labels: dict[str, str]
    weak_prompt: str = ""
    cliches: tuple[str, ...] = field(default_factory=tuple)

    def render(self, name: str, **fields: object) -> str:
        return self.templates[name].format(**fields).strip()

    def texts(self) -> dict[str, str]:
        """Every text that shapes a call, for the manifest's hashes."""
        return {**{f"principles:{k}": v for k, v in self.templates.items()},
                **{f"label:{k}": v for k, v in self.labels.items()}}

    def sha256(self) -> str:
        return sha256_text("\n".join(f"{k}\n{v}" for k, v in sorted(self.texts().items())))


def load_templates(path: str | Path | None = None) -> Templates:
    """Read and validate the role prompts (default `configs/prompts/principles.yaml`).

    Raises:
        UsageError: a missing template or label, or a template with unknown or missing fields.
    """
    path = Path(path or DEFAULT_TEMPLATES)
    data = load_yaml(path)
    for name, (allowed, required) in TEMPLATES.items():
        text = data.get(name)
        if not isinstance(text, str) or not text.strip():
            raise UsageError(f"{path}: template {name!r} is missing")
        used = {f for _, f, _, _ in string.Formatter().parse(text) if f}
        if used - allowed or required - used:
            raise UsageError(f"{path}: template {name!r} must use {sorted(required)} and may use {sorted(allowed)}; "
                             f"it uses {sorted(used)}")
    labels = data.get("labels") or {}
    if not all(isinstance(labels.get(k), str) and labels[k].strip() for k in ("good", "bad")):
        raise UsageError(f"{path}: 'labels' needs a 'good' and a 'bad' text")
    weak = data.get("weak_labels") or {}
    return Templates({n: str(data[n]) for n in TEMPLATES}, {k: " ".join(labels[k].split()) for k in ("good", "bad")},
                     str(weak.get("prompt") or ""), tuple(str(c) for c in weak.get("cliches") or ()))


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
