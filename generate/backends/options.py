"""The options that pick a model and say how to reach it, declared once for every command.

A command's config inherits `ModelOptions` (the model spec, batching and connection) or, where
its model field has a name of its own (the evaluation's `--judge`), `BackendOptions` alone; it
changes a default with `batch_size_option(n)`, so flags and YAML keys stay the same everywhere.
`backend_options` hands a backend kind only what it takes: the hf backend batches and takes a
dtype, the openai one connects, vLLM takes neither. Which decode path the hf backend runs is its
own constructor option (`load_backend(spec, path=...)`), not a command's; where a path or a dtype
changes the numbers, the backend says so in its `numerics`, which a resumed run compares
(`generate.common.resumable`).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from generate.backends.model import DEFAULT_RETRY_BUDGET
from generate.backends.specs import check_spec
from generate.common.ranges import AT_LEAST_1, NON_NEGATIVE, POSITIVE, OneOf, checked, in_range

if TYPE_CHECKING:
    from generate.backends.model import Model

DEFAULT_MODEL = "smollm2-135m-instruct"
# The hf backend's weight and compute dtypes; "auto" picks by device (`generate.backends.hf.device`).
DTYPES = ("auto", "float32", "bfloat16", "float16")
MODEL_HELP = "hf:<id|dir>, openai:<model>, vllm:<model> or an alias"

# Backend kind -> the options it takes; a spec without a known kind (an alias) is an hf model.
OPTIONS_BY_KIND: dict[str, tuple[str, ...]] = {
    "hf": ("batch_size", "dtype"),
    "openai": ("base_url", "api_key", "concurrency", "timeout"),
    "vllm": (),
}


def backend_options(spec: str, *, batch_size: int, dtype: str = "auto", base_url: str | None = None,
                    api_key: str | None = None, concurrency: int = 8, timeout: float = 120.0) -> dict[str, Any]:
    """The subset of the model options that the spec's backend kind takes."""
    given = {"batch_size": batch_size, "dtype": dtype, "base_url": base_url, "api_key": api_key,
             "concurrency": concurrency, "timeout": timeout}
    names = OPTIONS_BY_KIND.get(spec.partition(":")[0], OPTIONS_BY_KIND["hf"])
    return {name: given[name] for name in names}


def batch_size_option(default: int) -> Any:
    """The `batch_size` field with a command's own default (its batches differ in size)."""
    return field(default=default, metadata=in_range(AT_LEAST_1, help="hf: sequences per forward pass"))


@dataclass
class BackendOptions:
    """How to batch and reach any model a command loads (its model field is declared apart)."""

    batch_size: int = batch_size_option(16)
    dtype: str = field(default="auto", metadata=checked(OneOf(DTYPES), help=(
        "hf: the weights' and computation's dtype (auto: bf16 on an accelerator or a CPU with native bf16, else "
        "float32; a trained writer's merged model keeps its small update only in float32)")))
    base_url: str | None = field(default=None, metadata={"help": "openai: server URL (else OPENAI_BASE_URL)"})
    api_key: str | None = field(default=None, metadata={"help": "openai: key (else OPENAI_API_KEY)"})
    concurrency: int = field(default=8, metadata=in_range(AT_LEAST_1, help="openai: requests in flight"))
    timeout: float = field(default=120.0, metadata=in_range(
        POSITIVE, help="openai: seconds a request waits for the server (a reply trickled a byte at a time: 5 s more "
                       "in all)"))
    retries: int = field(default=5, metadata=in_range(
        NON_NEGATIVE, help="retries of a failed call before it counts as failed"))
    retry_budget: float = field(default=DEFAULT_RETRY_BUDGET, metadata=in_range(
        NON_NEGATIVE, help="seconds a failing call may spend on tries and waits before it counts as failed (with "
                           "--retries, whichever runs out first; Retry-After is honoured within it)"))

    def connection(self) -> dict[str, Any]:
        """These options by name, for the configs of the runs a composite command makes (a
        benchmark's generations and evaluations), so their manifests record what was used."""
        return {f.name: getattr(self, f.name) for f in fields(BackendOptions)}

    def backend_options(self, spec: str) -> dict[str, Any]:
        return backend_options(spec, batch_size=self.batch_size, dtype=self.dtype, base_url=self.base_url,
                               api_key=self.api_key, concurrency=self.concurrency, timeout=self.timeout)

    def load(self, spec: str) -> Model:
        """The retrying, batching `Model` for `spec` with these options."""
        from generate.backends import load_model  # the registry imports this module

        return load_model(spec, retries=self.retries, retry_budget=self.retry_budget, **self.backend_options(spec))


@dataclass
class _Model:
    model: str = field(default=DEFAULT_MODEL, metadata=checked(check_spec, help=MODEL_HELP))


@dataclass
class ModelOptions(BackendOptions, _Model):
    """A command's one model (`--model`) and how to batch and reach it (fields in that order:
    a dataclass takes its bases' fields from the last base to the first)."""

    def load_model(self) -> Model:
        return self.load(self.model)
