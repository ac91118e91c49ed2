"""The curation agents' prompts: templates from `configs/prompts/curation.yaml` (data, our own
words) and the pieces every agent's message is built from."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from eval.rubric import judged_text
from generate.common.config import load_yaml
from generate.common.errors import UsageError
from generate.common.paths import CONFIG_DIR

DEFAULT_TEMPLATES = CONFIG_DIR / "prompts" / "curation.yaml"
_REQUIRED = ("examples", "example", "strengths", "weaknesses", "no_evidence", "positive", "negative", "judge",
             "reflect", "reply_logprob", "reply_sample", "decision_good", "decision_bad", "reasoning_none",
             "reasoning_text", "reasoning_tally")


@dataclass(frozen=True)
class CurationPrompts:
    """The agents' templates (`configs/prompts/curation.yaml`), checked on load."""

    templates: dict[str, str]

    def render(self, name: str, **fields: object) -> str:
        try:
            return self.templates[name].format(**fields).strip()
        except KeyError as exc:
            raise UsageError(f"curation template {name!r} uses an unknown field {exc}") from None

    def texts(self) -> dict[str, str]:
        return {f"curation:{k}": v for k, v in self.templates.items()}


def load_curation_prompts(path: str | Path | None = None) -> CurationPrompts:
    """Read the templates (default `configs/prompts/curation.yaml`); a missing one is a UsageError."""
    data = {k: str(v) for k, v in load_yaml(path or DEFAULT_TEMPLATES).items()}
    missing = [k for k in _REQUIRED if k not in data]
    if missing:
        raise UsageError(f"{path or DEFAULT_TEMPLATES}: missing curation template(s) {', '.join(missing)}")
    return CurationPrompts(data)


def fence(story: str) -> dict[str, str]:
    """The story as agents read it (the judge's sanitising) between markers derived from its hash."""
    text = judged_text(story)
    tag = hashlib.sha256(text.encode("utf-8")).hexdigest()[:12].upper()
    return {"story": text, "begin": f"<<<STORY-{tag}", "end": f"STORY-{tag}>>>"}


def evidence(prompts: CurationPrompts, lists: dict[str, list[str]], order: tuple[str, ...]) -> str:
    parts = [prompts.render("strengths" if agent == "positive" else "weaknesses",
                            items="\n".join(f"{i}. {item}" for i, item in enumerate(lists[agent], 1)))
             for agent in order if agent in lists]
    return "\n\n".join(parts) or prompts.render("no_evidence")
