"""Backend registry: a spec string picks the engine (`hf:`, `openai:`, `vllm:` or an alias).

Backends are imported lazily so that, e.g., vLLM is only needed when a `vllm:` spec is used.
"""

from __future__ import annotations

import importlib
from typing import Any

from generate.backends.base import Backend, ChatRequest, Completion, SamplingParams, TokenLogprob, numerics_change
from generate.backends.model import DEFAULT_RETRY_BUDGET, BackendUnavailable, Model, RetryPolicy, RetryStats, gave_up
from generate.backends.options import BackendOptions, ModelOptions, backend_options
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

__all__ = ["Backend", "BackendOptions", "BackendUnavailable", "ChatRequest", "Completion", "Model", "ModelOptions",
           "RetryPolicy", "RetryStats", "SamplingParams", "TokenLogprob", "backend_options", "gave_up",
           "load_backend", "load_model", "numerics_change", "resolve_spec"]


def _import(target: str) -> Any:
    module, attr = target.split(":")
    return getattr(importlib.import_module(module), attr)


def resolve_spec(spec: str) -> tuple[str, str]:
    """Split `kind:name`, expanding aliases; an unknown kind lists the valid ones."""
    if spec in ALIASES:
        spec = _import(ALIASES[spec])()
    kind, sep, name = spec.partition(":")
    if not sep or kind not in BACKENDS or not name:
        valid = ", ".join([f"{k}:<model>" for k in BACKENDS] + list(ALIASES))
        raise UsageError(f"unknown model {spec!r}; expected one of: {valid}")
    return kind, name


def load_backend(spec: str, **options: Any) -> Backend:
    kind, name = resolve_spec(spec)
    cls = _import(BACKENDS[kind])
    try:
        return cls(name, **options)
    except TypeError as exc:
        raise UsageError(f"bad options for {kind} backend: {exc}") from None


def load_model(spec: str, *, retries: int = 5, retry_budget: float = DEFAULT_RETRY_BUDGET, timeout: float | None = None,
               concurrency: int | None = None, **backend_options: Any) -> Model:
    """Build the retrying, batching `Model` for a spec string."""
    return Model(load_backend(spec, **backend_options), policy=RetryPolicy(retries=retries, budget=retry_budget),
                 timeout=timeout, concurrency=concurrency)
