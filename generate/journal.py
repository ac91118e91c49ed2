"""A run's append-only records: the call journal and the log of failed prompts.

Call journal: every finished model call of a run, keyed by a hash of the full request.
Re-running a run replays journaled calls instead of recomputing them. Because per-call seeds
are derived from the run seed and the call's place in the protocol, a resumed run rebuilds the
same requests, hits the journal, and continues exactly where the crash stopped it.

Failure log (`failed.jsonl`): one line per failed attempt of a prompt, with its cause. A re-run
keeps what succeeded, so that it converges however flaky the server: only a call whose failure is
deterministic (a reply still blank after the re-asks: replaying it would return the same blank
forever) gets a new seed, drawn from the number of times that call failed so (`reseed`); a call
that failed for a transient cause (its retries ran out) keeps its seed and is asked again, and
every call that finished is replayed. A request the backend refused (longer than the context)
would be refused again: its prompt fails for good (`final`) and is not retried. Lines written
before causes were recorded (no `reseed`) gave every call of the prompt new seeds, and still do,
so the journals they belong to stay valid.

A journaled call also records a short digest of the backend numerics it was made with (`numerics`:
dtype, device, decode kernels, the model's identity: `Backend.numerics`): a journal shared by runs
(curation's `--journal`) or a model retrained into the same directory must not replay calls made
with other weights or in another dtype as if this model had made them, so such a replay is refused
(`NumericsMismatch`). Rows written before digests were recorded are replayed as before.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from generate.backends import ChatRequest, Completion, Model, TokenLogprob
from generate.common.errors import UsageError
from generate.common.jsonl import append_jsonl, read_jsonl, repair_jsonl
from generate.usage import Usage


def request_key(model: str, req: ChatRequest) -> str:
    blob = json.dumps([model, req.messages, req.params.__dict__, req.seed, req.logprobs, req.prefill],
                      sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def numerics_digest(numerics: dict) -> str | None:
    """A short digest of a backend's `numerics()`, as journal rows record it; None when it has none
    (a remote model its server does not list: known by its name only)."""
    if not numerics:
        return None
    blob = json.dumps(numerics, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


class NumericsMismatch(UsageError):
    """A journaled call was made with other backend numerics than the model asking for it now."""

    def __init__(self, path: Path, then: str, now: str, fields: list[str]):
        super().__init__(f"{path} holds calls made with other backend numerics (one of {', '.join(fields)} "
                         f"differs: digest {then} then, {now} now); use another --out (curate: or another --journal)")


def derive_seed(*parts: object) -> int:
    """A stable 31-bit seed from the run seed and a call's coordinates."""
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).hexdigest()
    return int(digest[:8], 16) & 0x7FFFFFFF


def call_seed(run_seed: int, prompt_id: str, step: int, call: int, *, attempt: int = 0, reask: int = 0) -> int:
    """The seed of the `call`-th call of a prompt's `step`-th phase.

    Attempt 0 without re-asks keeps the derivation the first journals were written with, so they
    stay valid; a call retried after a deterministic failure (`attempt` k, `FailureLog.call_attempt`)
    and a re-asked blank reply (`reask` r) get fresh seeds, which also makes them new journal keys.
    """
    parts: list[object] = [run_seed, prompt_id, step, call]
    if attempt:
        parts.append(f"attempt-{attempt}")
    if reask:
        parts.append(f"reask-{reask}")
    return derive_seed(*parts)


class Journal:
    """`calls.jsonl`: every completion a run received, by request key, with the seconds its engine
    call took per request and the digest of the backend numerics it was made with. A resumed run
    replays them (those made with the same numerics), and `replayed` adds up what the replayed
    calls cost when they were made (calls, prompt_tokens, completion_tokens, seconds), so the time
    a run reports is the time its stories took across interruptions, not only the last
    invocation's, and a phase's engine tokens leave the replayed ones out."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        repair_jsonl(self.path)
        self._done = {r["key"]: r for r in read_jsonl(self.path)}
        self.replayed: Counter[str] = Counter()

    def __len__(self) -> int:
        """Calls kept: every finished call of every invocation."""
        return len(self._done)

    def get(self, key: str, numerics: dict | None = None) -> Completion | None:
        """The journaled completion of `key`, or None. With `numerics` (the asking backend's), a row
        recorded with another digest is refused (`NumericsMismatch`); a row without one is replayed."""
        row = self._done.get(key)
        if row is None:
            return None
        now = numerics_digest(numerics or {})
        if now is not None and row.get("numerics", now) != now:
            raise NumericsMismatch(self.path, row["numerics"], now, list(numerics or {}))
        self.replayed.update(calls=1, prompt_tokens=row["prompt_tokens"] or 0,
                             completion_tokens=row["completion_tokens"] or 0, seconds=row.get("seconds", 0.0))
        logprobs = row.get("logprobs")
        return Completion(text=row["text"], prompt_tokens=row["prompt_tokens"],
                          completion_tokens=row["completion_tokens"], finish_reason=row.get("finish_reason"),
                          logprobs=None if logprobs is None else [TokenLogprob(*t) for t in logprobs])

    def add(self, keys: list[str], completions: list[Completion], seconds: float | None = None,
            numerics: dict | None = None) -> None:
        """Journal completions; `seconds`: the engine time of each (its call's, shared equally);
        `numerics`: the backend's that made them (recorded as `numerics_digest`)."""
        # A request refused by the backend (`error`, e.g. too long for the context) is no result:
        # it is not journaled, so a later run asks again.
        rows = [_row(k, c) for k, c in zip(keys, completions) if c.error is None]
        digest = numerics_digest(numerics or {})
        for row in rows:
            if seconds is not None:
                row["seconds"] = round(seconds, 4)
            if digest is not None:
                row["numerics"] = digest
        append_jsonl(self.path, rows)
        self._done.update({r["key"]: r for r in rows})

    def complete(self, model: Model, spec: str, requests: list[ChatRequest], desc: str | None = None, *,
                 reask_blank: bool = True) -> list[Completion]:
        """Every request's completion: replayed from the journal when it is there, else asked of
        `model` in one batch and journaled as each engine call returns (a crash loses only the
        calls in flight). `spec` is the model's name in the request keys; `reask_blank` goes to
        `Model.generate` (False for a caller that re-asks blank replies itself). A journaled call made
        with other backend numerics than `model`'s is refused (`NumericsMismatch`).
        """
        numerics = model.backend.numerics()
        keys = [request_key(spec, r) for r in requests]
        results: list[Completion | None] = [self.get(k, numerics) for k in keys]
        missing = [i for i, r in enumerate(results) if r is None]
        if missing:
            last = time.perf_counter()

            def save(idx: list[int], outs: list[Completion]) -> None:
                # The time since the previous engine call returned (or since asking), shared by this
                # call's requests: the intervals add up to the wall time of the whole batch.
                nonlocal last
                now = time.perf_counter()
                self.add([keys[missing[i]] for i in idx], outs, seconds=(now - last) / max(len(outs), 1),
                         numerics=numerics)
                last = now

            outs = model.generate([requests[i] for i in missing], desc=desc, on_done=save, reask_blank=reask_blank)
            for i, out in zip(missing, outs):
                results[i] = out
        return results  # type: ignore[return-value]


def _row(key: str, c: Completion) -> dict[str, Any]:
    row = {"key": key, "text": c.text, "prompt_tokens": c.prompt_tokens, "completion_tokens": c.completion_tokens,
           "finish_reason": c.finish_reason}
    if c.logprobs is not None:  # verdicts read from digit probabilities must replay with them
        row["logprobs"] = [[t.token, t.logprob, t.top] for t in c.logprobs]
    return row


class FailureLog:
    """`failed.jsonl`: why each failed attempt of an item (a prompt, a curated response) failed.

    Append-only. A line says whether the failure was `transient` or `deterministic`, which calls
    need new seeds on the next attempt (`reseed`: each call's coordinates, e.g. [step, call]), and
    whether the item failed for good (`final`: a request the backend refused). `key` names the
    item's id field.
    """

    def __init__(self, path: str | Path, key: str = "prompt_id"):
        self.path, self.key = Path(path), key
        repair_jsonl(self.path)
        self._lines: Counter[str] = Counter()
        self._legacy: Counter[str] = Counter()  # lines without `reseed`: every call was reseeded
        self._reseeds: dict[str, Counter] = defaultdict(Counter)
        self._final: dict[str, str] = {}
        self._lost: dict[str, list[dict]] = defaultdict(list)
        for record in read_jsonl(self.path):
            self._count(record)

    def _count(self, record: dict[str, Any]) -> None:
        item = record[self.key]
        self._lines[item] += 1
        if "reseed" not in record:
            self._legacy[item] += 1
        for call in record.get("reseed") or ():
            self._reseeds[item][tuple(call)] += 1
        if record.get("final"):
            self._final[item] = record.get("reason", "")
        if record.get("lost_usage"):
            self._lost[item].append(record["lost_usage"])

    def attempt(self, item: str) -> int:
        """The number of the attempt the item runs with now (0 if it never failed)."""
        return self._lines[item]

    def call_attempt(self, item: str, *call: object) -> int:
        """The attempt number of one call's seed: how often it failed deterministically (plus the
        older lines that reseeded every call)."""
        return self._legacy[item] + self._reseeds[item][call] if item in self._lines else 0

    def lost(self, item: str) -> Usage:
        """What the item's failed attempts spent on calls no later attempt replays (`lost_usage`:
        a call blank after its re-asks is asked anew with a new seed): part of the item's cost."""
        return Usage.total(self._lost.get(item, ()))

    def final(self) -> dict[str, str]:
        """Items that failed for good (a refused request), with their reasons: not retried."""
        return dict(self._final)

    def add(self, record: dict[str, Any]) -> None:
        append_jsonl(self.path, record)
        self._count(record)
