"""The model interface every backend implements: a batch of chat requests in, completions out.

Backends only translate requests to one engine. Retries, timeouts and concurrency live in
`generate.backends.model.Model`, the single wrapper every caller goes through.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field


@dataclass(frozen=True)
class SamplingParams:
    """Decoding settings; identical across compared frameworks by construction (one per run)."""

    max_new_tokens: int = 400
    temperature: float = 0.9
    top_p: float = 0.9


@dataclass
class ChatRequest:
    """One stateless chat call.

    Attributes:
        messages: OpenAI-style `[{"role", "content"}]` list.
        params: decoding settings.
        seed: per-request seed, derived by the caller from the run seed and the request's place.
        logprobs: None for no logprobs; k >= 0 to return each generated token's logprob and its k
            most likely alternatives (the judge's `logprob` mode reads digit probabilities).
        prefill: text the assistant turn starts with (e.g. "Score:"); backends that cannot
            prefill ignore it and the caller must cope (see `supports_prefill`).
    """

    messages: list[dict[str, str]]
    params: SamplingParams = field(default_factory=SamplingParams)
    seed: int | None = None
    logprobs: int | None = None
    prefill: str | None = None


@dataclass
class TokenLogprob:
    token: str
    logprob: float
    top: dict[str, float] = field(default_factory=dict)


@dataclass
class Completion:
    """One request's result.

    Attributes:
        prompt_tokens, completion_tokens: what the call cost, the tries that failed before it
            included where the backend could tell (`TransientBackendError`).
        error: set when this one request cannot succeed whatever the retries (e.g. its prompt is
            longer than the model's context): the caller fails what depends on it, with this
            reason, while the other requests of the batch go on. `text` is then empty.
        usage_reported: False when the engine did not say what the call cost (a server reply
            without `usage`): its token counts are then 0 for want of better, not measured.
    """

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None
    logprobs: list[TokenLogprob] | None = None
    error: str | None = None
    usage_reported: bool = True


class TransientBackendError(Exception):
    """A failure worth retrying: rate limit, 5xx, timeout, dropped connection, malformed reply.

    Attributes:
        cause: the kind of failure, as `Model` counts retries in the manifests ("HTTP 429",
            "timeout", "malformed reply", ...); the message when not given.
        retry_after: seconds the server asked us to wait (a 429's Retry-After), if any.
        prompt_tokens, completion_tokens: what the failed try cost, where the reply said so (a
            malformed reply whose `usage` is readable was still billed): `Model` adds them to the
            completion the call ends with. Only backends that run one request per call set them.
    """

    def __init__(self, message: str, *, cause: str | None = None, retry_after: float | None = None,
                 prompt_tokens: int = 0, completion_tokens: int = 0):
        super().__init__(message)
        self.cause = cause or message
        self.retry_after = retry_after
        self.prompt_tokens, self.completion_tokens = prompt_tokens, completion_tokens


class Backend(abc.ABC):
    """One inference engine.

    Attributes:
        batch_size: requests per `generate` call (local engines batch them on the device);
            1 for servers, whose parallelism comes from `max_concurrency` concurrent calls.
        max_concurrency: how many `generate` calls may be in flight at once.
        timeout: seconds one `generate` call may take before it counts as failed (None: no
            limit, for local engines whose threads cannot be cancelled anyway).
        supports_prefill: whether `ChatRequest.prefill` is honoured.
        NUMERICS: the `describe` fields that change the numbers a request gets (not only their
            speed), the weights included: what the model is beyond its name (`identity`, see
            `generate.backends.identity`) and what the backend picks by the machine (the hf
            backend's dtype).
        SAMPLING: the `describe` fields that change how a sampled request draws its tokens from the
            same logits (the hf decode `path`): a resumed run keeps them too (`resume_numerics`).
    """

    NUMERICS: tuple[str, ...] = ()
    SAMPLING: tuple[str, ...] = ()
    batch_size: int = 1
    max_concurrency: int = 1
    timeout: float | None = None
    supports_prefill: bool = False

    def __init__(self, model: str):
        self.model = model

    @abc.abstractmethod
    async def generate(self, requests: list[ChatRequest]) -> list[Completion]:
        """Run a batch of requests; raise TransientBackendError for retryable failures."""

    def describe(self) -> dict:
        """What the manifest records about this backend (never credentials)."""
        return {"backend": type(self).__name__, "model": self.model}

    def batch_limit(self, request: ChatRequest) -> int:
        """Requests like this one (same decoding settings) per `generate` call: `batch_size`,
        unless the engine batches such requests by its own measure (the hf backend's static path)."""
        return self.batch_size

    def counters(self) -> dict[str, int]:
        """Running totals of the engine's own work that a run reports per phase (e.g. prompt tokens
        taken from a prefix cache); none by default."""
        return {}

    def numerics(self) -> dict:
        """The `NUMERICS` fields of `describe`: results made with other values are not the same
        computation, so a run refuses to mix them (`numerics_change`)."""
        described = self.describe()
        return {k: described[k] for k in self.NUMERICS if k in described}

    def resume_numerics(self) -> dict:
        """`numerics` and the `SAMPLING` fields: what a resumed run of sampled calls must keep, else its
        stories mix two ways of drawing tokens under a manifest that names one. Journal rows and the
        evaluation's fingerprints keep to `numerics`: greedy calls and scores do not depend on them."""
        described = self.describe()
        return {k: described[k] for k in (*self.NUMERICS, *self.SAMPLING) if k in described}

    async def aclose(self) -> None:  # noqa: B027 - optional hook
        """Release what belongs to the running event loop (connection pools) before it ends."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release engine resources."""


def numerics_change(before: dict | None, now: dict) -> str | None:
    """The first `Backend.numerics` field recorded `before` (a manifest's backend description) that
    differs `now`, as "dtype 'bfloat16' then, 'float32' now"; None when none does. A field the
    earlier record lacks (written before it was recorded) counts as unknown, not as a change."""
    for key, value in now.items():
        if before and key in before and before[key] != value:
            return f"{key} {before[key]!r} then, {value!r} now"
    return None
