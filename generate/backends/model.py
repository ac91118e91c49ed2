"""`Model`: the one wrapper around a backend that owns batching, concurrency, timeouts and retries.

Callers hand it every request of a phase at once; it groups requests that can share one engine
call (same decoding settings), sorts them by length to cut padding, splits them into the
backend's batch size and keeps up to `concurrency` calls in flight.

Failures never stop a run from here. A transient one (429, 5xx, timeout, dropped connection,
malformed reply) is retried with exponential backoff, honouring a server's Retry-After (one
longer than what is left of the budget ends the call at once: waiting less would only be refused
again), within two budgets per call: a count (`RetryPolicy.retries`, `--retries`) and seconds
(`RetryPolicy.budget`, `--retry-budget`, counted from the call's first try, the tries themselves
included), because rate limits and 5xx bursts of hosted APIs last minutes, not a number of
tries. A call that spends either budget comes back as a `Completion` with `error` set and
`finish_reason` `GAVE_UP` (`gave_up`): transient, so its caller keeps what depends on it to ask
again on the next run with the same seed, while the other items go on. A request the backend
refuses (longer than the context; a batch that raises a non-transient RuntimeError or
MemoryError, split and retried one request at a time so only the offending request fails) comes
back with `error` and `finish_reason` "error": deterministic, asking again would fail again.
`BackendUnavailable` stops the run only when every call of a batch gives up and the backend has
never answered (a server that is down, a wrong URL): failing each item would bury that one
cause, while a server that did answer is flaky, and its failed items are retried by the next
run. Bad requests the user must fix (400/401/404) raise at once. Every retry is counted by
cause in `stats`, which the generation and evaluation manifests record.

A sampled completion that comes back blank is asked again with new seeds
(`RetryPolicy.empty_retries`), and the tokens of the blank attempts are added to the completion
returned, so what they cost is counted. A caller that re-asks blank replies itself (the generation
runner, which also re-asks replies blank once cleaned) passes `reask_blank=False`: one layer
re-asks, so a call that stays blank is sent 1 + its re-asks times, not their product.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import random
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from tqdm.auto import tqdm

from generate.backends.base import Backend, ChatRequest, Completion, TransientBackendError
from generate.common.errors import UsageError

log = logging.getLogger(__name__)

OnDone = Callable[[list[int], list[Completion]], None]


class BackendUnavailable(UsageError):
    """Every call of a batch kept failing after its retries: the server is down or unreachable,
    not one reply broken. Raised after the calls that did finish were handed to `on_done`."""


GAVE_UP = "unavailable"  # finish_reason of a call that still failed after every retry
DEFAULT_RETRY_BUDGET = 300.0


def gave_up(completion: Completion) -> bool:
    """Whether a failed completion failed for a transient cause (its retries ran out): the same
    request may well succeed later, so a re-run asks it again with the same seed; any other
    `error` is the backend refusing this request, which asking again cannot change."""
    return completion.error is not None and completion.finish_reason == GAVE_UP


@dataclass
class RetryPolicy:
    """How long a failing call is retried: at most `retries` retries and, counted from its first
    try, no retry starts after `budget` seconds (a try in flight then runs to its timeout)."""

    retries: int = 5
    budget: float = DEFAULT_RETRY_BUDGET  # a server's Retry-After is honoured within what is left of it
    backoff: float = 1.0  # seconds before the first retry; doubles each time (with jitter)
    max_backoff: float = 30.0
    empty_retries: int = 2  # a blank completion is re-asked with another seed before it is kept (`reask_blank`)


@dataclass
class RetryStats:
    """What failures cost a model: retries by cause, calls given up, seconds spent waiting.

    Attributes:
        retries: cause ("HTTP 429", "timeout", "malformed reply", ...) -> retries made.
        failed_calls: cause -> requests that still failed after every retry.
        split_batches: batches that raised (e.g. out of memory) and were retried one by one.
        waited_s: seconds slept in backoff before retries.
        usage_unreported: replies whose server did not say what they cost: their tokens count as
            0, so token and cost columns undercount by them.
    """

    retries: Counter = field(default_factory=Counter)
    failed_calls: Counter = field(default_factory=Counter)
    split_batches: int = 0
    waited_s: float = 0.0
    usage_unreported: int = 0

    def copy(self) -> RetryStats:
        return RetryStats(Counter(self.retries), Counter(self.failed_calls), self.split_batches, self.waited_s,
                          self.usage_unreported)

    def since(self, before: RetryStats) -> RetryStats:
        """What happened after the snapshot `before` (a model shared by several runs)."""
        return RetryStats(self.retries - before.retries, self.failed_calls - before.failed_calls,
                          self.split_batches - before.split_batches, self.waited_s - before.waited_s,
                          self.usage_unreported - before.usage_unreported)

    def to_json(self) -> dict:
        return {"retries": dict(sorted(self.retries.items())), "total_retries": sum(self.retries.values()),
                "failed_calls": dict(sorted(self.failed_calls.items())), "split_batches": self.split_batches,
                "waited_s": round(self.waited_s, 3), "usage_unreported": self.usage_unreported}


class Model:
    """Batching + retry + timeout wrapper shared by every backend."""

    def __init__(self, backend: Backend, *, policy: RetryPolicy | None = None,
                 timeout: float | None = None, concurrency: int | None = None):
        self.backend = backend
        self.policy = policy or RetryPolicy()
        self.timeout = timeout if timeout is not None else backend.timeout
        self.concurrency = concurrency or backend.max_concurrency
        self.calls = 0
        self.stats = RetryStats()
        self.answered = 0  # engine calls that returned: a backend that ever did is up, if flaky
        self._active = 0  # agenerate calls in flight: the last one out releases the loop's resources

    @property
    def name(self) -> str:
        return self.backend.model

    def generate(self, requests: list[ChatRequest], desc: str | None = None,
                 on_done: OnDone | None = None, *, reask_blank: bool = True) -> list[Completion]:
        """Synchronous entry point: run every request, results in request order."""
        return asyncio.run(self.agenerate(requests, desc, on_done, reask_blank=reask_blank))

    async def agenerate(self, requests: list[ChatRequest], desc: str | None = None,
                        on_done: OnDone | None = None, *, reask_blank: bool = True) -> list[Completion]:
        """Run every request; `on_done(indices, completions)` fires as each engine call returns,
        so callers can journal results and a crash loses only the calls in flight. `reask_blank`:
        re-ask a blank sampled completion here (False: the caller re-asks blanks itself)."""
        results: list[Completion | None] = [None] * len(requests)
        chunks = self._chunks(requests)
        sem = asyncio.Semaphore(self.concurrency)
        bar = tqdm(total=len(requests), desc=desc, unit="call", disable=desc is None, leave=False)
        fatal: list[BaseException] = []  # a call that raised: the calls not started yet are not sent

        async def run(idx: list[int]) -> None:
            async with sem:
                if fatal:
                    return
                try:
                    outs = await self._call_with_retries([requests[i] for i in idx], reask_blank)
                except BaseException as exc:
                    fatal.append(exc)
                    raise
            for i, out in zip(idx, outs):
                results[i] = out
            if on_done is not None:
                on_done(idx, outs)
            bar.update(len(idx))

        self._active += 1
        try:
            # Let every chunk finish (and be journaled by `on_done`) before reporting a failure.
            outcomes = await asyncio.gather(*(run(idx) for idx in chunks), return_exceptions=True)
        finally:
            bar.close()
            self._active -= 1
            if not self._active:  # else a client pool outlives its loop and fails when collected
                await self.backend.aclose()
        errors = [o for o in outcomes if isinstance(o, BaseException)]
        if errors:
            raise errors[0]
        if results and not self.answered and all(r is not None and r.finish_reason == GAVE_UP for r in results):
            raise BackendUnavailable(f"{self.name}: every call failed ({results[0].error}); finished calls are "
                                     "saved: re-run the same command to resume")
        self.calls += len(requests)
        return results  # type: ignore[return-value]

    def _chunks(self, requests: list[ChatRequest]) -> list[list[int]]:
        """Group by decoding settings, sort each group, cut to batch size.

        Sampled requests are sorted by prompt length (less padding). Greedy ones (a judge's) are
        sorted by their text, so requests sharing a long prefix (one rubric question asked about
        many stories) land in the same engine call, where a backend can encode the prefix once.
        """
        groups: dict[tuple, list[int]] = defaultdict(list)
        for i, r in enumerate(requests):
            groups[(r.params, r.logprobs, r.prefill is not None)].append(i)
        chunks = []
        for (params, _, _), idx in groups.items():
            size = max(1, self.backend.batch_limit(requests[idx[0]]))
            if params.temperature <= 0:
                idx.sort(key=lambda i: [m["content"] for m in requests[i].messages])
            else:
                idx.sort(key=lambda i: sum(len(m["content"]) for m in requests[i].messages))
            chunks.extend(idx[j:j + size] for j in range(0, len(idx), size))
        return chunks

    async def _call_with_retries(self, batch: list[ChatRequest], reask_blank: bool = True) -> list[Completion]:
        outs = await self._call(batch)
        for attempt in range(self.policy.empty_retries if reask_blank else 0):
            # Greedy decoding would only repeat itself, so only sampled requests are re-asked.
            blank = [i for i, o in enumerate(outs) if not o.text.strip() and o.error is None
                     and batch[i].params.max_new_tokens > 0 and batch[i].params.temperature > 0]
            if not blank:
                break
            log.warning("%d blank completion(s); asking again with new seeds", len(blank))
            retry = [_reseeded(batch[i], attempt + 1) for i in blank]
            for i, out in zip(blank, await self._call(retry)):
                outs[i] = _after(outs[i], out)
        return outs

    async def _call(self, batch: list[ChatRequest]) -> list[Completion]:
        """One engine call with retries; a batch that raises RuntimeError/MemoryError (out of
        memory on one huge request) is retried one request at a time."""
        try:
            return await self._retrying(batch)
        except (MemoryError, RuntimeError) as exc:
            if isinstance(exc, (NotImplementedError, RecursionError)):  # bugs, not resource limits
                raise
            if len(batch) == 1:
                reason = f"the backend failed on this request: {_describe(exc)}"
                log.warning("%s: %s", self.name, reason)
                self.stats.failed_calls[type(exc).__name__] += 1
                return [_failed(reason)]
            log.warning("%s: a batch of %d raised %s; retrying its requests one at a time", self.name, len(batch),
                        _describe(exc))
            self.stats.split_batches += 1
            return [out for req in batch for out in await self._call([req])]

    async def _retrying(self, batch: list[ChatRequest]) -> list[Completion]:
        started = time.monotonic()
        lost = Completion(text="")  # what the failed tries cost, where the backend could tell
        for attempt in itertools.count():
            try:
                coro = self.backend.generate(batch)
                outs = await (asyncio.wait_for(coro, self.timeout) if self.timeout else coro)
                if len(outs) != len(batch):
                    raise TransientBackendError(f"backend returned {len(outs)} results for {len(batch)} requests",
                                                cause="malformed reply")
                self.answered += 1
                self._count_usage(outs)
                return [_after(lost, outs[0]), *outs[1:]] if lost.prompt_tokens or lost.completion_tokens else outs
            except (TransientBackendError, TimeoutError) as exc:
                cause = getattr(exc, "cause", "timeout")
                lost.prompt_tokens += getattr(exc, "prompt_tokens", 0)
                lost.completion_tokens += getattr(exc, "completion_tokens", 0)
                elapsed = time.monotonic() - started
                asked = getattr(exc, "retry_after", None)
                spent = self._spent(attempt, elapsed, asked)
                if spent is not None:
                    reason = f"{cause}: {spent} ({_describe(exc)})"
                    log.warning("%s: %s", self.name, reason)
                    self.stats.failed_calls[cause] += len(batch)
                    failed = [_failed(reason, GAVE_UP) for _ in batch]
                    return [_after(lost, failed[0]), *failed[1:]]
                delay = self._delay(attempt, asked, self.policy.budget - elapsed)
                self.stats.retries[cause] += 1
                self.stats.waited_s += delay
                log.warning("%s: %s; retry %d/%d in %.2fs", self.name, _describe(exc), attempt + 1,
                            self.policy.retries, delay)
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")  # for type checkers: the loop returns

    def _count_usage(self, outs: list[Completion]) -> None:
        """Count the replies whose engine did not say what they cost; warn at the first."""
        unreported = sum(not o.usage_reported for o in outs)
        if unreported and not self.stats.usage_unreported:
            log.warning("%s: the server's replies say nothing of the tokens they cost (no `usage`): they count as 0 "
                        "tokens, so token and cost columns undercount (the manifest's reliability has how many)",
                        self.name)
        self.stats.usage_unreported += unreported

    def _spent(self, retries: int, elapsed: float, asked: float | None) -> str | None:
        """Which retry budget a call that failed `retries` times in `elapsed` seconds has used up
        (or would, waiting the `asked` seconds of a Retry-After), in words for its error; None
        while both last."""
        p = self.policy
        if asked is not None and asked > p.budget - elapsed:
            return (f"the server asked to wait {asked:g}s (Retry-After), more than the "
                    f"{max(0.0, p.budget - elapsed):.1f}s left of the {p.budget:g}s --retry-budget")
        if retries >= p.retries:
            return (f"still failing after {p.retries} retries: the --retries budget ran out "
                    f"({elapsed:.1f}s of the {p.budget:g}s --retry-budget used)")
        if elapsed >= p.budget:
            return (f"still failing after {elapsed:.1f}s and {retries} of {p.retries} retries: the {p.budget:g}s "
                    "--retry-budget ran out (it counts the tries, each bounded by --timeout, and the waits between "
                    "them; a try started within it may run to --timeout beyond it)")
        return None

    def _delay(self, attempt: int, retry_after: float | None, left: float) -> float:
        """Exponential backoff with jitter, or the server's Retry-After (which fits in what is left
        of the budget, see `_spent`), at most the `left` seconds of the call's retry budget."""
        if retry_after is not None and retry_after >= 0:
            wait = retry_after
        else:
            wait = min(self.policy.max_backoff, self.policy.backoff * 2**attempt) * (1 + 0.25 * random.random())
        return max(0.0, min(wait, left))

    def close(self) -> None:
        self.backend.close()


def _failed(reason: str, finish_reason: str = "error") -> Completion:
    return Completion(text="", finish_reason=finish_reason, error=reason)


def _after(blank: Completion, out: Completion) -> Completion:
    """`out`, the answer to a re-ask of a blank completion (or to a retry of a failed try),
    carrying the earlier attempt's tokens too: they were spent, and a caller counting a call's cost
    must see them."""
    return replace(out, prompt_tokens=(out.prompt_tokens or 0) + (blank.prompt_tokens or 0),
                   completion_tokens=(out.completion_tokens or 0) + (blank.completion_tokens or 0))


def _reseeded(req: ChatRequest, bump: int) -> ChatRequest:
    return ChatRequest(messages=req.messages, params=req.params, logprobs=req.logprobs, prefill=req.prefill,
                       seed=None if req.seed is None else req.seed + 7919 * bump)


def _describe(exc: BaseException | None) -> str:
    if isinstance(exc, TimeoutError):
        return "timed out"
    return f"{type(exc).__name__}: {exc}" if exc else "unknown error"
