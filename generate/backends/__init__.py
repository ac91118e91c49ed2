"""Backend registry: a spec string picks the engine (`hf:`, `openai:`, `vllm:` or an alias;
read in `specs`).

Backends are imported lazily so that, e.g., vLLM is only needed when a `vllm:` spec is used.
"""

from __future__ import annotations

from typing import Any

from generate.backends.base import Backend, ChatRequest, Completion, SamplingParams, TokenLogprob, numerics_change
from generate.backends.model import DEFAULT_RETRY_BUDGET, BackendUnavailable, Model, RetryPolicy, RetryStats, gave_up
from generate.backends.options import OPTIONS_BY_KIND, BackendOptions, ModelOptions, backend_options
from generate.backends.specs import ALIASES, BACKENDS, check_spec, import_target, resolve_spec
from generate.common.errors import UsageError

__all__ = ["ALIASES", "BACKENDS", "Backend", "BackendOptions", "BackendUnavailable", "ChatRequest", "Completion",
           "Model", "ModelOptions", "RetryPolicy", "RetryStats", "SamplingParams", "TokenLogprob", "backend_options",
           "check_spec", "gave_up", "load_backend", "load_model", "numerics_change", "resolve_spec"]


def load_backend(spec: str, **options: Any) -> Backend:
    kind, name = resolve_spec(spec)
    cls = import_target(BACKENDS[kind])
    try:
        return cls(name, **options)
    except TypeError as exc:
        raise UsageError(f"bad options for {kind} backend: {exc}") from None


def load_model(spec: str, *, retries: int = 5, retry_budget: float = DEFAULT_RETRY_BUDGET, timeout: float | None = None,
               concurrency: int | None = None, **backend_options: Any) -> Model:
    """Build the retrying, batching `Model` for a spec string.

    `timeout` and `concurrency` go to the backend where its kind takes them (`OPTIONS_BY_KIND`: an
    OpenAI-compatible server's client times its requests out itself, and bounds the whole call a
    little later, see `generate.backends.openai_backend`), else to the `Model` wrapper.
    """
    takes = OPTIONS_BY_KIND.get(spec.partition(":")[0], ())
    for name, value in (("timeout", timeout), ("concurrency", concurrency)):
        if name in takes and value is not None:
            backend_options[name] = value
    return Model(load_backend(spec, **backend_options), policy=RetryPolicy(retries=retries, budget=retry_budget),
                 timeout=None if "timeout" in takes else timeout, concurrency=concurrency)
