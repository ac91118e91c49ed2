"""Model specs, read in one place: `kind:name` (`hf:`, `openai:`, `vllm:`) or an alias.

`check_spec` is what a command's config runs on every model field (`metadata=checked(check_spec)`),
so a misspelt `--judge` is refused before anything is written, not after a benchmark has
generated its first framework. It resolves no alias: the embedded default converts its GGUF on
first use, which is the backend's job, not the config's.
"""

from __future__ import annotations

import importlib
from typing import Any

from generate.common.errors import UsageError

BACKENDS: dict[str, str] = {
    "hf": "generate.backends.hf:HFBackend",
    "openai": "generate.backends.openai_backend:OpenAIBackend",
    "vllm": "generate.backends.vllm_backend:VLLMBackend",
}

# Alias -> function returning a full spec; the embedded default needs a one-time conversion.
ALIASES: dict[str, str] = {
    "smollm2-135m-instruct": "generate.backends.embedded:smollm2_spec",
}


def import_target(target: str) -> Any:
    module, attr = target.split(":")
    return getattr(importlib.import_module(module), attr)


def check_spec(spec: str) -> None:
    """Refuse a spec that is neither an alias nor `kind:name` with a known kind (lists the valid ones)."""
    kind, sep, name = spec.partition(":")
    if spec not in ALIASES and (not sep or kind not in BACKENDS or not name):
        valid = ", ".join([f"{k}:<model>" for k in BACKENDS] + list(ALIASES))
        raise UsageError(f"unknown model {spec!r}; expected one of: {valid}")


def resolve_spec(spec: str) -> tuple[str, str]:
    """Split `kind:name`, expanding aliases; an unknown kind lists the valid ones."""
    check_spec(spec)
    if spec in ALIASES:
        spec = import_target(ALIASES[spec])()
        check_spec(spec)
    kind, _, name = spec.partition(":")
    return kind, name
