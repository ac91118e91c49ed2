"""The principle judge's data: the state file (principles + strategy), the role prompts, and the
fence that shows a response to a model.

Everything a model reads is data (`configs/judge/principles.yaml`, `configs/prompts/principles.yaml`)
validated on load, so a broken template fails before a model is loaded. The prompts file holds the
Detector's template beside the optimisation's (Generator, Reflector): one file, checked as a whole,
because the optimisation's rewrites and the Detector's verdicts must read the same principles.
Texts shown to a model are fenced the way the rubric judge fences stories (`eval.rubric`), so a
response (or a rewrite) cannot speak as instructions or hand the Detector its own verdict. Reading
what a model writes back (rewrites, diagnoses) is the optimisation's job (`rewards.principles.texts`).
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from eval.rubric import MODES, Aspect, Rubric
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


def fenced(text: str) -> str:
    """`text` as the judge sees a story: sanitised, score claims removed, between hash markers."""
    return _FENCE.render("sample", "text", text)


def unfenced(text: str) -> str:
    """A reply without the fence markers it copied from its request."""
    return _MARKER.sub("", text)


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
