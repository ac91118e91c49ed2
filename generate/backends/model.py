"""`Model`: the one wrapper around a backend that owns batching, concurrency, timeouts and retries.

Callers hand it every request of a phase at once; it groups requests that can share one engine
call (same decoding settings), sorts them by length to cut padding, splits them into the
backend's batch size and keeps up to `concurrency` calls in flight.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from tqdm.auto import tqdm

from generate.backends.base import Backend, ChatRequest, Completion, TransientBackendError
from generate.common.errors import UsageError

log = logging.getLogger(__name__)

OnDone = Callable[[list[int], list[Completion]], None]


class BackendUnavailable(UsageError):
    """The backend kept failing after every retry (server down, timeouts)."""


@dataclass
class RetryPolicy:
    retries: int = 5
    backoff: float = 1.0  # seconds before the first retry; doubles each time (with jitter)
    max_backoff: float = 30.0
    empty_retries: int = 2  # a blank completion is re-asked with another seed before it is kept


class Model:
    """Batching + retry + timeout wrapper shared by every backend."""

    def __init__(self, backend: Backend, *, policy: RetryPolicy | None = None,
                 timeout: float | None = None, concurrency: int | None = None):
        self.backend = backend
        self.policy = policy or RetryPolicy()
        self.timeout = timeout if timeout is not None else backend.timeout
        self.concurrency = concurrency or backend.max_concurrency
        self.calls = 0

    @property
    def name(self) -> str:
        return self.backend.model

    def generate(self, requests: list[ChatRequest], desc: str | None = None,
                 on_done: OnDone | None = None) -> list[Completion]:
        """Synchronous entry point: run every request, results in request order."""
        return asyncio.run(self.agenerate(requests, desc, on_done))

    async def agenerate(self, requests: list[ChatRequest], desc: str | None = None,
                        on_done: OnDone | None = None) -> list[Completion]:
        """Run every request; `on_done(indices, completions)` fires as each engine call returns,
        so callers can journal results and a crash loses only the calls in flight."""
        results: list[Completion | None] = [None] * len(requests)
        chunks = self._chunks(requests)
        sem = asyncio.Semaphore(self.concurrency)
        bar = tqdm(total=len(requests), desc=desc, unit="call", disable=desc is None, leave=False)

        async def run(idx: list[int]) -> None:
            async with sem:
                outs = await self._call_with_retries([requests[i] for i in idx])
            for i, out in zip(idx, outs):
                results[i] = out
            if on_done is not None:
                on_done(idx, outs)
            bar.update(len(idx))

        try:
            # Let every chunk finish (and be journaled by `on_done`) before reporting a failure.
            outcomes = await asyncio.gather(*(run(idx) for idx in chunks), return_exceptions=True)
        finally:
            bar.close()
        errors = [o for o in outcomes if isinstance(o, BaseException)]
        if errors:
            raise errors[0]
        self.calls += len(requests)
        return results  # type: ignore[return-value]

    def _chunks(self, requests: list[ChatRequest]) -> list[list[int]]:
        """Group by decoding settings, sort each group by prompt length, cut to batch size."""
        groups: dict[tuple, list[int]] = defaultdict(list)
        for i, r in enumerate(requests):
            groups[(r.params, r.logprobs, r.prefill is not None)].append(i)
        size = max(1, self.backend.batch_size)
        chunks = []
        for idx in groups.values():
            idx.sort(key=lambda i: sum(len(m["content"]) for m in requests[i].messages))
            chunks.extend(idx[j:j + size] for j in range(0, len(idx), size))
        return chunks

    async def _call_with_retries(self, batch: list[ChatRequest]) -> list[Completion]:
        outs = await self._call(batch)
        for attempt in range(self.policy.empty_retries):
            # Greedy decoding would only repeat itself, so only sampled requests are re-asked.
            blank = [i for i, o in enumerate(outs) if not o.text.strip() and o.error is None
                     and batch[i].params.max_new_tokens > 0 and batch[i].params.temperature > 0]
            if not blank:
                break
            log.warning("%d blank completion(s); asking again with new seeds", len(blank))
            retry = [_reseeded(batch[i], attempt + 1) for i in blank]
            for i, out in zip(blank, await self._call(retry)):
                outs[i] = out
        return outs

    async def _call(self, batch: list[ChatRequest]) -> list[Completion]:
        last: Exception | None = None
        for attempt in range(self.policy.retries + 1):
            try:
                coro = self.backend.generate(batch)
                outs = await (asyncio.wait_for(coro, self.timeout) if self.timeout else coro)
                if len(outs) != len(batch):
                    raise TransientBackendError(f"backend returned {len(outs)} results for {len(batch)} requests")
                return outs
            except (TransientBackendError, asyncio.TimeoutError) as exc:
                last = exc
                if attempt == self.policy.retries:
                    break
                delay = min(self.policy.max_backoff, self.policy.backoff * 2**attempt) * (1 + 0.25 * random.random())
                log.warning("%s: %s; retry %d/%d in %.1fs", self.name, _describe(exc), attempt + 1,
                            self.policy.retries, delay)
                await asyncio.sleep(delay)
        raise BackendUnavailable(f"{self.name}: still failing after {self.policy.retries} retries ({_describe(last)})")

    def close(self) -> None:
        self.backend.close()


def _reseeded(req: ChatRequest, bump: int) -> ChatRequest:
    return ChatRequest(messages=req.messages, params=req.params, logprobs=req.logprobs, prefill=req.prefill,
                       seed=None if req.seed is None else req.seed + 7919 * bump)


def _describe(exc: BaseException | None) -> str:
    if isinstance(exc, asyncio.TimeoutError):
        return "timed out"
    return f"{type(exc).__name__}: {exc}" if exc else "unknown error"
