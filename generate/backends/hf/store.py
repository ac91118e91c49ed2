"""The prefix store: key/value caches of sequences the hf backend already encoded, reused by later
prompts that start with them (`PrefixStore`)."""

from __future__ import annotations

import logging
from collections import OrderedDict, defaultdict
from typing import Callable, NamedTuple

import torch

from generate.common.machine import available_bytes, release_free_memory

log = logging.getLogger(__name__)

KV = list[tuple[torch.Tensor, torch.Tensor]]  # per layer: keys and values


class Reuse(NamedTuple):
    """What `PrefixStore.lookup` found for a prompt: its first `tokens` tokens' per-layer keys and
    values (`kv`), taken from the stored sequence `key` (0, None, None: nothing to reuse)."""

    tokens: int
    kv: KV | None
    key: tuple[int, ...] | None = None


NOTHING = Reuse(0, None)


class PrefixStore:
    """Key/value caches of sequences the engine already encoded, reused by later prompts that
    start with them.

    Multi-round protocols re-send what the model has already read: Debate and Discussion resend
    each agent's whole chat history (the previous prompt and the agent's own reply), and Review's
    paper variant asks every round's reviewers about the same initial drafts (an exact repeat of the
    previous round's review prompt). Prefill is most of a multi-agent run's compute on a CPU (a
    Review run reads several times more prompt tokens than it writes), so a prompt's longest
    common token prefix with a stored sequence is taken from here instead of recomputed.

    Entries are bounded by `budget_bytes` and evicted least recently used first, except that an
    entry a prompt reused is superseded once that prompt's own continuation is stored (`add`'s
    `supersedes`): a conversation's next prompt starts with its latest turn, never with an older
    one. Without that rule a wide round evicts exactly the wrong entries: the first batch's new
    entries push out the histories the second batch is about to reuse, while the histories the
    first batch has just consumed stay.

    The budget bounds what the store counts, not what the process holds: the decode cache of the
    next batch, the judge and the heap's freed but still resident pages all come on top.
    `reserve_bytes` is the memory the machine must keep available (MemAvailable): when an `add`
    leaves less, entries go, least recently used first, and freed heap pages are handed back to the
    OS, until it is met or the store is empty, so a long multi-round run is not killed for memory.
    """

    BUCKET = 64  # sequences are looked up by their first tokens (past the shared system prompt)

    def __init__(self, budget_bytes: int = 2 << 30, reserve_bytes: int = 0,
                 available: Callable[[], int | None] = available_bytes):
        self.budget = budget_bytes
        self.reserve = reserve_bytes
        self.available = available
        self.size = 0
        self.entries: OrderedDict[tuple[int, ...], KV] = OrderedDict()
        self.buckets: dict[tuple[int, ...], set[tuple[int, ...]]] = defaultdict(set)
        self.hits = self.reused_tokens = 0
        self.relieved = 0  # entries dropped because the machine ran short of memory
        self.evicted = 0  # entries dropped to stay within the budget

    def add(self, tokens: list[int], kv: KV, supersedes: tuple[int, ...] | None = None) -> None:
        """Store the (H, T, D) keys and values of each layer for `tokens` (T of them).

        `supersedes`: the entry `tokens`' prompt reused (`Reuse.key`). It goes at once where
        `tokens` holds it whole (any prompt it would serve, the new entry serves at least as far),
        else to the front of the eviction order: only its tail past the reused part is lost, the
        part this conversation has moved on from.
        """
        key = tuple(tokens)
        if key not in self.entries and len(key) >= self.BUCKET:
            self.entries[key] = kv
            self.buckets[key[:self.BUCKET]].add(key)
            self.size += _nbytes(kv)
        if supersedes is not None and supersedes != key and supersedes in self.entries:
            if common_prefix(supersedes, tokens) == len(supersedes):
                self._drop(supersedes)
            else:
                self.entries.move_to_end(supersedes, last=False)
        while self.size > self.budget and self.entries:
            self._drop(next(iter(self.entries)))
            self.evicted += 1
        if self.reserve:
            self._relieve()

    def _relieve(self) -> None:
        """Drop entries, least recently used first, while the machine has less than `reserve`
        bytes available; each round drops the shortfall (at least an eighth of the store), then
        trims the heap so the freed pages count."""
        free = self.available()
        if free is None or free >= self.reserve or not self.entries:
            return
        before, short = len(self.entries), free
        while self.entries and free is not None and free < self.reserve:
            goal = self.size - max(self.reserve - free, self.size // 8)
            while self.entries and self.size > goal:
                self._drop(next(iter(self.entries)))
            release_free_memory()
            free = self.available()
        if not self.relieved:
            log.warning("prefix store: the machine is short of memory (%.1f GiB available, %.1f GiB kept in "
                        "reserve); dropping cached prefixes, least recently used first",
                        short / 2**30, self.reserve / 2**30)
        self.relieved += before - len(self.entries)

    def _drop(self, key: tuple[int, ...]) -> None:
        self.buckets[key[:self.BUCKET]].discard(key)
        self.size -= _nbytes(self.entries.pop(key))

    def lookup(self, tokens: list[int], whole: bool = False, prompt: bool = True) -> Reuse:
        """The longest stored prefix of `tokens` and its per-layer keys/values, leaving at least
        one token of its own (whose logits the caller needs) unless `whole` (a caller that wants
        only the cache); `NOTHING` when none is long enough. Counted in `hits` and `reused_tokens`
        (prompt tokens served, as run manifests report them) only for a `prompt`: an opening
        encoded for several prompts is not one, and each of them counts its whole reuse."""
        best, best_key = self._longest(tokens, whole)
        if best_key is None:
            return NOTHING
        self.entries.move_to_end(best_key)
        if prompt:
            self.hits += 1
            self.reused_tokens += best
        return Reuse(best, [(k[:, :best], v[:, :best]) for k, v in self.entries[best_key]], best_key)

    def held(self, tokens: list[int]) -> int:
        """How many of `tokens` `lookup` would reuse (0 for none), without counting it as a use."""
        return self._longest(tokens, whole=False)[0]

    def _longest(self, tokens: list[int], whole: bool) -> tuple[int, tuple[int, ...] | None]:
        best, best_key = 0, None
        for key in self.buckets.get(tuple(tokens[:self.BUCKET]), ()):
            n = common_prefix(key, tokens)
            if n > best:
                best, best_key = n, key
        best = min(best, len(tokens) - (0 if whole else 1))
        return (best, best_key) if best >= self.BUCKET and best_key is not None else (0, None)


def _nbytes(kv: KV) -> int:
    return sum(k.numel() * k.element_size() * 2 for k, _ in kv)


def common_prefix(a: tuple[int, ...] | list[int], b: list[int]) -> int:
    """How many leading tokens `a` and `b` share."""
    n = min(len(a), len(b))
    if n == 0:
        return 0
    diff = (torch.tensor(a[:n]) != torch.tensor(b[:n])).nonzero()
    return int(diff[0]) if len(diff) else n
