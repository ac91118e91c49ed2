"""Prompt templates and personas are data (`configs/prompts/`); this is the one loader."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from generate.common.config import load_yaml
from generate.common.errors import UsageError
from generate.common.paths import CONFIG_DIR

DEFAULT_TEMPLATES = CONFIG_DIR / "prompts" / "frameworks.yaml"
DEFAULT_PERSONAS = CONFIG_DIR / "prompts" / "personas.yaml"
# The single-agent writer request. GRPO trains on exactly this request and surprisal is scored
# under it, so both hold by construction: they call `writer_messages`, never render it themselves.
WRITER_TEMPLATE = "single_write"


@dataclass(frozen=True)
class PromptSet:
    templates: dict[str, str]
    personas: dict[str, str]

    def render(self, name: str, **fields: str) -> str:
        """Fill template `name`; the shared format rules are always available as {rules}."""
        if name not in self.templates:
            raise UsageError(f"prompt template {name!r} missing from the templates file")
        try:
            return self.templates[name].format(rules=self.templates.get("rules", ""), **fields).strip()
        except KeyError as exc:
            raise UsageError(f"template {name!r} uses an unknown field {exc}") from None

    def persona(self, index: int) -> tuple[str, str]:
        """(name, text) of the index-th persona, cycling when there are more agents than personas."""
        names = list(self.personas)
        name = names[index % len(names)]
        suffix = "" if index < len(names) else f"-{index // len(names) + 1}"
        return name + suffix, self.personas[name]

    def writer_messages(self, task_prompt: str) -> list[dict[str, str]]:
        """The single-agent writer's chat request for a task (the SciFi prompt text)."""
        return [{"role": "user", "content": self.render(WRITER_TEMPLATE, prompt=task_prompt)}]

    def texts(self) -> dict[str, str]:
        """Every template and persona, for the manifest's hashes."""
        return {**{f"template:{k}": v for k, v in self.templates.items()},
                **{f"persona:{k}": v for k, v in self.personas.items()}}


def load_prompts(templates: str | Path | None = None, personas: str | Path | None = None) -> PromptSet:
    t = {k: str(v) for k, v in load_yaml(templates or DEFAULT_TEMPLATES).items()}
    p = {k: str(v) for k, v in load_yaml(personas or DEFAULT_PERSONAS).items()}
    if not p:
        raise UsageError("the personas file defines no persona")
    return PromptSet(t, p)
