"""Sampled decoding for the hf backend: nucleus sampling without sorting the vocabulary, one random
stream per request, and rows that leave the batch as soon as they are done.

Measured on this 2-core CPU with SmolLM2-135M at batch 48 (`scripts/bench_engines.py`): of a
236 ms `generate()` step, sorting the 49k-token vocabulary for top-p took 92 ms and
`torch.multinomial` over it 49 ms, while the model itself took ~130 ms. Here:

- **Top-p from a top-k.** The nucleus (the most likely tokens whose mass before them is < top_p,
  exactly the set `TopPLogitsWarper` keeps) is read off `topk(K)`; only a row whose nucleus does
  not end within its K most likely tokens falls back to a full sort, so the kept set is exact.
- **Gumbel-max with a generator per request.** argmax(log p + Gumbel noise) draws from p, and the
  noise of a request comes from its own generator, seeded by the request's seed: a request's
  tokens depend on its seed and its logits, not on which other requests share its batch or in
  which order they arrived. (Logits can still differ in the last bits with batch composition.)
- **Finished rows leave the batch** (their KV cache rows are dropped), so a batch no longer pays
  for its longest member at every step.
- **The cache has room reserved** for the whole reply (`RoomyLayer`): `DynamicCache` concatenates
  every step, copying the whole cache; at batch 48 over 1,000-token prompts that copy was 46% of a
  0.43 s decode step.
"""

from __future__ import annotations

import logging
from collections import OrderedDict, defaultdict
from functools import partial
from itertools import pairwise
from typing import Callable, NamedTuple

import torch
from transformers import DynamicCache
from transformers.cache_utils import Cache, DynamicLayer

from generate.common.machine import available_bytes, release_free_memory

log = logging.getLogger(__name__)

NUCLEUS_K = 256  # candidates read per row before falling back to a full sort


def nucleus(probs: torch.Tensor, top_p: float, k: int = NUCLEUS_K) -> tuple[torch.Tensor, torch.Tensor]:
    """The nucleus of each row: (token ids, probabilities), padded with probability 0.

    A token is kept when the probability mass of the tokens ranked above it is < top_p (the first
    token always), as `transformers`' `TopPLogitsWarper` keeps it. Rows whose nucleus goes on past
    their k most likely tokens (~6% of a Review run's rows) are read again with 16 times k, up to
    the whole vocabulary: a top-4096 costs ~0.4 ms a row where a full sort costs ~2 ms.
    """
    k = min(k, probs.shape[-1])
    vals, idx = probs.topk(k, dim=-1)
    before = vals.cumsum(dim=-1) - vals
    keep = before < top_p
    keep[:, 0] = True
    kept = torch.where(keep, vals, torch.zeros_like(vals))
    spill = keep[:, -1] & (before[:, -1] + vals[:, -1] < top_p)  # the nucleus goes on past k
    if k < probs.shape[-1] and spill.any():
        rows = spill.nonzero(as_tuple=True)[0]
        wide_idx, wide_kept = nucleus(probs[rows], top_p, 16 * k)
        width = int((wide_kept > 0).sum(dim=-1).max())
        idx, kept = (torch.nn.functional.pad(t, (0, max(0, width - k))) for t in (idx, kept))
        idx[rows, :width] = wide_idx[:, :width]
        kept[rows, :width] = wide_kept[:, :width]
        kept[rows, width:] = 0
    return idx, kept


def sample(logits: torch.Tensor, temperature: float, top_p: float, generators: list[torch.Generator]) -> torch.Tensor:
    """One token per row from softmax(logits / temperature) restricted to its top-p nucleus."""
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    if top_p < 1.0:
        idx, kept = nucleus(probs, top_p)
    else:
        idx, kept = torch.arange(probs.shape[-1]).expand_as(probs), probs
    # A row draws as many numbers as its own nucleus needs (at least NUCLEUS_K), never as many as the
    # widest row of its batch: else one long-tailed neighbour would shift every row's random stream.
    draws = (kept > 0).sum(dim=-1).clamp_min(min(NUCLEUS_K, kept.shape[-1])).tolist()
    noise = torch.ones_like(kept)  # past a row's draws every candidate has probability 0
    for r, (g, d) in enumerate(zip(generators, draws)):
        noise[r, :d] = torch.rand(d, generator=g)
    gumbel = -torch.log(-torch.log(noise.clamp_min(1e-20)))
    scores = torch.where(kept > 0, kept.log() + gumbel, torch.full_like(kept, -torch.inf))
    return idx.gather(-1, scores.argmax(dim=-1, keepdim=True)).squeeze(-1)


class Reuse(NamedTuple):
    """What `PrefixStore.lookup` found for a prompt: its first `tokens` tokens' per-layer keys and
    values (`kv`), taken from the stored sequence `key` (0, None, None: nothing to reuse)."""

    tokens: int
    kv: list[tuple[torch.Tensor, torch.Tensor]] | None
    key: tuple[int, ...] | None = None


NOTHING = Reuse(0, None)


class PrefixStore:
    """Key/value caches of sequences the engine already encoded, reused by later prompts that
    start with them.

    Multi-round protocols re-send what the model has already read: Debate and Discussion resend
    each agent's whole chat history (the previous prompt and the agent's own reply), and Review's
    paper variant asks every round's reviewers about the same initial drafts (an exact repeat of the
    previous round's review prompt). Prefill is most of a multi-agent run's compute on a CPU
    (37.5k prompt tokens against 7.9k generated in a 6-prompt Review run), so a prompt's longest
    common token prefix with a stored sequence is taken from here instead of recomputed.

    Entries are bounded by `budget_bytes` and evicted least recently used first, except that an
    entry a prompt reused is superseded once that prompt's own continuation is stored (`add`'s
    `supersedes`): a conversation's next prompt starts with its latest turn, never with an older
    one. Without that rule a wide round evicted exactly the wrong entries: at `make
    benchmark-full`'s width (96 conversations a round, ~44 MB of keys and values each by round
    two), the first batch's new entries pushed out the histories the second batch was about to
    reuse, while the histories the first batch had just consumed stayed.

    The budget bounds what the store counts, not what the process holds: the decode cache of the
    next batch (3.6 GB at 48 rows over 2,900 columns), the judge and the heap's freed but still
    resident pages all come on top. `reserve_bytes` is the memory the machine must keep available
    (MemAvailable): when an `add` leaves less, entries go, least recently used first, and freed heap
    pages are handed back to the OS, until it is met or the store is empty. A benchmark process
    (single, teacher and their evaluations, then Debate) was killed for memory in Debate's third
    round at 24.4 GB resident on a 23 GiB machine, the store within its 7 GB: most of the rest was
    freed heap pages, which `HFBackend` now hands back after every batch; the reserve is the floor
    under whatever else grows.
    """

    BUCKET = 64  # sequences are looked up by their first tokens (past the shared system prompt)

    def __init__(self, budget_bytes: int = 2 << 30, reserve_bytes: int = 0,
                 available: Callable[[], int | None] = available_bytes):
        self.budget = budget_bytes
        self.reserve = reserve_bytes
        self.available = available
        self.size = 0
        self.entries: OrderedDict[tuple[int, ...], list[tuple[torch.Tensor, torch.Tensor]]] = OrderedDict()
        self.buckets: dict[tuple[int, ...], set[tuple[int, ...]]] = defaultdict(set)
        self.hits = self.reused_tokens = 0
        self.relieved = 0  # entries dropped because the machine ran short of memory
        self.evicted = 0  # entries dropped to stay within the budget

    def add(self, tokens: list[int], kv: list[tuple[torch.Tensor, torch.Tensor]],
            supersedes: tuple[int, ...] | None = None) -> None:
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
            if _common(supersedes, tokens) == len(supersedes):
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

    def lookup(self, tokens: list[int], whole: bool = False) -> Reuse:
        """The longest stored prefix of `tokens` and its per-layer keys/values, leaving at least
        one token of its own (whose logits the caller needs) unless `whole` (a caller that wants
        only the cache); `NOTHING` when none is long enough."""
        best, best_key = self._longest(tokens, whole)
        if best_key is None:
            return NOTHING
        self.entries.move_to_end(best_key)
        self.hits += 1
        self.reused_tokens += best
        return Reuse(best, [(k[:, :best], v[:, :best]) for k, v in self.entries[best_key]], best_key)

    def held(self, tokens: list[int]) -> int:
        """How many of `tokens` `lookup` would reuse (0 for none), without counting it as a use."""
        return self._longest(tokens, whole=False)[0]

    def _longest(self, tokens: list[int], whole: bool) -> tuple[int, tuple[int, ...] | None]:
        best, best_key = 0, None
        for key in self.buckets.get(tuple(tokens[:self.BUCKET]), ()):
            n = _common(key, tokens)
            if n > best:
                best, best_key = n, key
        best = min(best, len(tokens) - (0 if whole else 1))
        return (best, best_key) if best >= self.BUCKET and best_key is not None else (0, None)


def _nbytes(kv: list[tuple[torch.Tensor, torch.Tensor]]) -> int:
    return sum(k.numel() * k.element_size() * 2 for k, _ in kv)


class RoomyLayer(DynamicLayer):
    """A `DynamicLayer` whose keys and values are views into buffers with room for more tokens, so
    a decode step writes one column instead of copying the whole cache. The buffers are given, or
    made by the first update with `room` columns to spare; running out of room grows them by
    another `room` (amortised, never wrong)."""

    def __init__(self, room: int, keys: torch.Tensor | None = None, values: torch.Tensor | None = None,
                 used: int = 0):
        super().__init__()
        self.room = max(1, room)
        self._k, self._v = keys, values
        if keys is not None:
            self.lazy_initialization(keys, values)
            self.keys, self.values = keys[:, :, :used], values[:, :, :used]

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if self._k is None:
            self.lazy_initialization(key_states, value_states)
            shape = (*key_states.shape[:2], 0, key_states.shape[-1])
            self._k, self._v = key_states.new_empty(shape), value_states.new_empty(shape)
        used = self.extend(key_states.shape[-2])
        self.keys[:, :, used:] = key_states
        self.values[:, :, used:] = value_states
        return self.keys, self.values

    def extend(self, n: int) -> int:
        """Take n more columns (their contents are the caller's to write) and return the first."""
        used = self.get_seq_length()
        new = used + n
        if new > self._k.shape[-2]:
            grow = (0, 0, 0, new - self._k.shape[-2] + self.room)
            self._k = torch.nn.functional.pad(self._k, grow)
            self._v = torch.nn.functional.pad(self._v, grow)
        self.keys, self.values = self._k[:, :, :new], self._v[:, :, :new]
        return used

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        """Keep the rows at `indices`, in that order. When every row that moves comes from past the
        kept ones (`compaction`'s order), this is done in place: only the moved rows' used columns
        are copied and the buffers narrow to a view of their first rows. Indexing the buffers
        instead copies every kept row, columns to spare included, into fresh memory at each leave:
        at 48 rows of 2,800 columns (SmolLM2-135M, bf16) ~3 GB and ~0.7 s a leave here, against
        ~23 ms in place."""
        if self._k is None:
            return
        used, kept = self.get_seq_length(), len(indices)
        moved = (indices != torch.arange(kept, device=indices.device)).nonzero(as_tuple=True)[0]
        if bool((indices[moved] >= kept).all()):
            if len(moved):
                src = indices[moved]
                self._k[moved, :, :used] = self._k[src, :, :used]
                self._v[moved, :, :used] = self._v[src, :, :used]
            self._k, self._v = self._k[:kept], self._v[:kept]
        else:
            self._k, self._v = self._k[indices], self._v[indices]
        self.keys, self.values = self._k[:, :, :used], self._v[:, :, :used]


class RoomyCache(DynamicCache):
    """A `DynamicCache` of `RoomyLayer`s: over given (B, H, used + room, D) buffers, one pair per
    layer, or made by the first update."""

    def __init__(self, room: int, buffers: list[tuple[torch.Tensor, torch.Tensor]] | None = None, used: int = 0):
        if buffers is None:
            Cache.__init__(self, layer_class_to_replicate=partial(RoomyLayer, room))
        else:
            Cache.__init__(self, layers=[RoomyLayer(room, k, v, used) for k, v in buffers])


PREFILL_TOKENS = 4096  # padded prompt tokens per prefill forward pass


def compaction(live: list[int]) -> list[int]:
    """The batch's row order once only the `live` rows (ascending) stay: each stays in its
    slot, and a leaver's slot below len(live) takes a live row from past it, so the cache moves one
    row per leaver, in place (`RoomyLayer.batch_select_indices`). Row order changes no row's
    tokens: each row samples with its own generator (a 126-call Review run gave the same replies
    byte for byte as with the rows kept in order)."""
    kept = len(live)
    tail = [j for j in live if j >= kept]
    stay = set(live)
    return [j if j in stay else tail.pop() for j in range(kept)]


def _chunks(lengths: list[int], budget: int = PREFILL_TOKENS, max_rows: int | None = None) -> list[list[int]]:
    """Row indices grouped for a forward pass: sorted by length, each group's rows x longest <=
    budget (or a single row) and at most `max_rows` rows, so a short sequence is never padded to a
    long one and a pass's activations (or logits) stay bounded."""
    groups: list[list[int]] = []
    for r in sorted(range(len(lengths)), key=lengths.__getitem__):
        if (groups and (len(groups[-1]) + 1) * lengths[r] <= budget
                and (max_rows is None or len(groups[-1]) < max_rows)):
            groups[-1].append(r)
        else:
            groups.append([r])
    return groups


def hf_encode(lm, ids: torch.Tensor, positions: torch.Tensor, past: list[tuple[torch.Tensor, torch.Tensor]] | None,
              mask: torch.Tensor | None, keep: torch.Tensor) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]:
    """A prefill pass through transformers' forward: right-padded ids and their positions (b, s),
    each row after its `past` keys and values ((b, Hkv, P, D) per layer) or none, `mask` (b, P + s)
    over past and new columns (None: no past, causal). Returns the logits (b, len(keep), V) at the
    `keep` positions and every layer's keys and values (b, Hkv, P + s, D)."""
    out = lm(input_ids=ids, position_ids=positions, use_cache=True, attention_mask=mask, logits_to_keep=keep,
             past_key_values=DynamicCache(ddp_cache_data=past) if past is not None else None)
    return out.logits, [(layer.keys, layer.values) for layer in out.past_key_values.layers]


def _prefill(lm, prompts: list[list[int]], reuse: list, pad_id: int, room: int,
             encode=None) -> tuple[RoomyCache, torch.Tensor]:
    """Encode the prompts (each after its reused prefix) into one decode cache; also the logits of
    each prompt's last token. `encode` runs a pass (`hf_encode`'s contract, its default on `lm`).

    Prefill is compute-bound on a CPU, so it runs in length-sorted groups (`_chunks`), each right-
    padded: a real token never attends to padding, so a group without reused prefixes needs no mask
    and takes SDPA's causal fast path, and only the last real position of each row goes through the
    vocabulary projection. The rows' keys and values are then laid out right-aligned in one cache
    ([padding][prompt], every token at its true position) for the batched decode.
    """
    device, n = lm.device, len(prompts)
    encode = encode or partial(hf_encode, lm)
    width = max(len(p) for p in prompts)
    cache = logits = None
    for rows in _chunks([len(p) - got.tokens for p, got in zip(prompts, reuse)]):
        past = max(reuse[r].tokens for r in rows)
        suffix = [prompts[r][reuse[r].tokens:] for r in rows]
        span = max(len(s) for s in suffix)
        ids = torch.full((len(rows), span), pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), past + span), dtype=torch.long)
        for j, (r, s) in enumerate(zip(rows, suffix)):
            ids[j, :len(s)] = torch.tensor(s)
            mask[j, :reuse[r].tokens] = 1
            mask[j, past:past + len(s)] = 1
        positions = torch.stack([reuse[r].tokens + torch.arange(span) for r in rows])
        past_kv = None
        if past:
            stored = [reuse[r].kv for r in rows]
            ref = next(kv for kv in stored if kv is not None)
            past_kv = [
                tuple(torch.stack([_pad_to(kv[i][w] if kv else ref[i][w][:, :0], past) for kv in stored]).to(device)
                      for w in (0, 1))
                for i in range(len(ref))]
        last = [past + len(s) - 1 for s in suffix]
        keep = sorted(set(last))
        out_logits, layers = encode(ids.to(device), positions.to(device), past_kv, mask.to(device) if past else None,
                                    torch.tensor([k - past for k in keep], device=device))
        pick = torch.tensor([keep.index(k) for k in last], device=device)
        rows_logits = out_logits[torch.arange(len(rows), device=device), pick]
        if cache is None:
            k0 = layers[0][0]
            shape = (n, k0.shape[1], width + room, k0.shape[-1])
            cache = RoomyCache(room, [(k0.new_zeros(shape), k0.new_zeros(shape)) for _ in layers], width)
            logits = rows_logits.new_empty((n, rows_logits.shape[-1]))
        logits[torch.tensor(rows, device=device)] = rows_logits
        for j, r in enumerate(rows):
            cols = mask[j].nonzero(as_tuple=True)[0].to(device)
            for mine, (keys, values) in zip(cache.layers, layers):
                mine._k[r, :, width - len(prompts[r]):width] = keys[j][:, cols]
                mine._v[r, :, width - len(prompts[r]):width] = values[j][:, cols]
    return cache, logits


def _store_shared_prefixes(lm, prompts: list[list[int]], store: PrefixStore, pad_id: int, encode=None) -> int:
    """Encode once, and store, the prefixes that prompts of one batch share beyond what the store
    already holds of them; returns how many were stored.

    Review's reviewers each read two peers' drafts after the same persona, task and instructions
    (~100-250 tokens the store does not hold: the persona's earlier prompt went on differently):
    ~1.9k of the 7.9k tokens a 6-prompt review round would encode. Prompts sorted by their tokens
    put the ones sharing most side by side; a neighbour pair's common prefix is worth a pass of its
    own when it runs at least `PrefixStore.BUCKET` tokens past what the store holds of either.
    """
    order = sorted(range(len(prompts)), key=prompts.__getitem__)
    shared: dict[tuple[int, ...], None] = {}
    for a, b in pairwise(order):
        n = min(_common(tuple(prompts[a]), prompts[b]), len(prompts[a]) - 1, len(prompts[b]) - 1)
        if n - max(store.held(prompts[a]), store.held(prompts[b])) >= PrefixStore.BUCKET:
            shared[tuple(prompts[a][:n])] = None
    if not shared:
        return 0
    prefixes = [list(p) for p in shared]
    cache, _ = _prefill(lm, prefixes, [store.lookup(p) for p in prefixes], pad_id, 0, encode)
    width = max(map(len, prefixes))
    for r, p in enumerate(prefixes):
        store.add(p, _row_kv(cache, r, torch.arange(width - len(p), width, device=lm.device)))
    return len(prefixes)


def _pad_to(t: torch.Tensor, width: int) -> torch.Tensor:
    """(H, T, D) keys or values right-padded with zeros to `width` columns."""
    return torch.nn.functional.pad(t, (0, 0, 0, width - t.shape[1]))


def _common(a: tuple[int, ...], b: list[int]) -> int:
    n = min(len(a), len(b))
    if n == 0:
        return 0
    diff = (torch.tensor(a[:n]) != torch.tensor(b[:n])).nonzero()
    return int(diff[0]) if len(diff) else n


def hf_step(lm, tokens: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor, cache) -> torch.Tensor:
    """One decode step through transformers' forward: logits (B, V) of one new token per row at its
    position, attending to the (B, T) bool mask's columns (the new token's last).

    The mask goes in 4D, used as given: with an all-ones 2D one transformers drops the mask and asks
    SDPA for `enable_gqa`, ~4x slower on CPU than its grouped-query path for one token."""
    return lm(input_ids=tokens[:, None], attention_mask=mask[:, None, None, :], position_ids=positions[:, None],
              past_key_values=cache, use_cache=True).logits[:, -1]


def _row_kv(cache, row: int, cols: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """One row's keys and values at the given cache columns (its real tokens), per layer."""
    return [(layer.keys[row][:, cols].clone(), layer.values[row][:, cols].clone()) for layer in cache.layers]


@torch.inference_mode()
def sample_batch(lm, prompts: list[list[int]], *, max_new_tokens: int, temperature: float, top_p: float,
                 seeds: list[int | None], pad_id: int, stop_ids: set[int],
                 store: PrefixStore | None = None, step=None, encode=None) -> list[list[int]]:
    """Sampled continuations of the prompts; each row leaves the batch at its stop token.

    Prompts are encoded in length-sorted groups (`_prefill`) and decoded together, each row laid out
    as [padding][prompt][reply] with every real token at its true position. With a `store`, each
    prompt's longest stored prefix is reused, and each finished row's prompt and reply are stored
    for later prompts. `step` runs one decode step and `encode` one prefill pass (`hf_step`'s and
    `hf_encode`'s contracts; by default those on `lm`), e.g. a `FusedDecoder`'s of the same model.

    Returns:
        Per prompt, the generated tokens (a stop token, if reached, last).
    """
    device = lm.device
    step = step or partial(hf_step, lm)
    n = len(prompts)
    if store is not None:
        _store_shared_prefixes(lm, prompts, store, pad_id, encode)
    reuse = [store.lookup(p) if store is not None else NOTHING for p in prompts]
    cache, logits = _prefill(lm, prompts, reuse, pad_id, max_new_tokens, encode)
    width = max(len(p) for p in prompts)
    mask = torch.zeros((n, width), dtype=torch.bool)
    for r, p in enumerate(prompts):
        mask[r, width - len(p):] = True
    generators = []
    for r, seed in enumerate(seeds):
        g = torch.Generator()
        g.manual_seed(int(seed) if seed is not None else int(torch.randint(0, 2**31 - 1, ())) + r)
        generators.append(g)
    rows = list(range(n))  # original index of each live row
    next_pos = torch.tensor([len(p) for p in prompts])
    tokens: list[list[int]] = [[] for _ in range(n)]

    def keep(j: int, r: int) -> None:  # store a leaving row's prompt and reply (its last token unread)
        if store is not None:
            store.add(prompts[r] + tokens[r][:-1], _row_kv(cache, j, mask[j].nonzero(as_tuple=True)[0]),
                      supersedes=reuse[r].key)

    for i in range(max_new_tokens):
        chosen = sample(logits, temperature, top_p, [generators[r] for r in rows]).cpu()
        live = []
        for j, r in enumerate(rows):
            tokens[r].append(int(chosen[j]))
            if int(chosen[j]) not in stop_ids and i < max_new_tokens - 1:
                live.append(j)
            else:
                keep(j, r)
        if not live:
            break
        if len(live) < len(rows):
            order = compaction(live)
            select = torch.tensor(order)
            cache.batch_select_indices(select.to(device))
            mask, next_pos, chosen = mask[select], next_pos[select], chosen[select]
            rows = [rows[j] for j in order]
        mask = torch.cat([mask, torch.ones((len(rows), 1), dtype=torch.bool)], dim=1)
        logits = step(chosen.to(device), next_pos.to(device), mask.to(device), cache)
        next_pos = next_pos + 1
    return tokens
