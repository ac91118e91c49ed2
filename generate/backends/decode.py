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
"""

from __future__ import annotations

from collections import OrderedDict, defaultdict

import torch
from transformers import DynamicCache

NUCLEUS_K = 256  # candidates read per row before falling back to a full sort


def nucleus(probs: torch.Tensor, top_p: float, k: int = NUCLEUS_K) -> tuple[torch.Tensor, torch.Tensor]:
    """The nucleus of each row: (token ids, probabilities), padded with probability 0.

    A token is kept when the probability mass of the tokens ranked above it is < top_p (the first
    token always), as `transformers`' `TopPLogitsWarper` keeps it.
    """
    k = min(k, probs.shape[-1])
    vals, idx = probs.topk(k, dim=-1)
    before = vals.cumsum(dim=-1) - vals
    keep = before < top_p
    keep[:, 0] = True
    spill = keep[:, -1] & (before[:, -1] + vals[:, -1] < top_p)  # the nucleus goes on past k
    if k < probs.shape[-1] and spill.any():
        rows = spill.nonzero(as_tuple=True)[0]
        full_vals, full_idx = probs[rows].sort(dim=-1, descending=True)
        full_keep = (full_vals.cumsum(dim=-1) - full_vals) < top_p
        width = int(full_keep.sum(dim=-1).max())
        pad = max(0, width - k)
        vals, idx, keep = (torch.nn.functional.pad(t, (0, pad)) for t in (vals, idx, keep))
        vals[rows, :width] = full_vals[:, :width]
        idx[rows, :width] = full_idx[:, :width]
        keep[rows, :width] = full_keep[:, :width]
        keep[rows, width:] = False
    return idx, torch.where(keep, vals, torch.zeros_like(vals))


def sample(logits: torch.Tensor, temperature: float, top_p: float, generators: list[torch.Generator]) -> torch.Tensor:
    """One token per row from softmax(logits / temperature) restricted to its top-p nucleus."""
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    if top_p < 1.0:
        idx, kept = nucleus(probs, top_p)
    else:
        idx, kept = torch.arange(probs.shape[-1]).expand_as(probs), probs
    noise = torch.stack([torch.rand(kept.shape[-1], generator=g) for g in generators])
    gumbel = -torch.log(-torch.log(noise.clamp_min(1e-20)))
    scores = torch.where(kept > 0, kept.log() + gumbel, torch.full_like(kept, -torch.inf))
    return idx.gather(-1, scores.argmax(dim=-1, keepdim=True)).squeeze(-1)


class PrefixStore:
    """Key/value caches of sequences the engine already encoded, reused by later prompts that
    start with them.

    Multi-round protocols re-send what the model has already read: Debate and Discussion resend
    each agent's whole chat history (the previous prompt and the agent's own reply), and Review's
    paper variant asks every round's reviewers about the same initial drafts (an exact repeat of the
    previous round's review prompt). Prefill is most of a multi-agent run's compute on a CPU
    (37.5k prompt tokens against 7.9k generated in a 6-prompt Review run), so a prompt's longest
    common token prefix with a stored sequence is taken from here instead of recomputed.
    Entries are least-recently-used and bounded by `budget_bytes`.
    """

    BUCKET = 64  # sequences are looked up by their first tokens (past the shared system prompt)

    def __init__(self, budget_bytes: int = 2 << 30):
        self.budget = budget_bytes
        self.size = 0
        self.entries: OrderedDict[tuple[int, ...], list[tuple[torch.Tensor, torch.Tensor]]] = OrderedDict()
        self.buckets: dict[tuple[int, ...], set[tuple[int, ...]]] = defaultdict(set)
        self.hits = self.reused_tokens = 0

    def add(self, tokens: list[int], kv: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        """Store the (H, T, D) keys and values of each layer for `tokens` (T of them)."""
        key = tuple(tokens)
        if key in self.entries or len(key) < self.BUCKET:
            return
        self.entries[key] = kv
        self.buckets[key[:self.BUCKET]].add(key)
        self.size += sum(k.numel() * k.element_size() * 2 for k, _ in kv)
        while self.size > self.budget and self.entries:
            old, old_kv = self.entries.popitem(last=False)
            self.buckets[old[:self.BUCKET]].discard(old)
            self.size -= sum(k.numel() * k.element_size() * 2 for k, _ in old_kv)

    def lookup(self, tokens: list[int]) -> tuple[int, list[tuple[torch.Tensor, torch.Tensor]] | None]:
        """(n, per-layer keys/values of the first n tokens) for the longest stored prefix of
        `tokens`, leaving at least one token of its own; (0, None) when none is long enough."""
        best, best_key = 0, None
        for key in self.buckets.get(tuple(tokens[:self.BUCKET]), ()):
            n = _common(key, tokens)
            if n > best:
                best, best_key = n, key
        best = min(best, len(tokens) - 1)
        if best < self.BUCKET or best_key is None:
            return 0, None
        self.entries.move_to_end(best_key)
        self.hits += 1
        self.reused_tokens += best
        return best, [(k[:, :best], v[:, :best]) for k, v in self.entries[best_key]]


def _common(a: tuple[int, ...], b: list[int]) -> int:
    n = min(len(a), len(b))
    if n == 0:
        return 0
    diff = (torch.tensor(a[:n]) != torch.tensor(b[:n])).nonzero()
    return int(diff[0]) if len(diff) else n


def _row_kv(cache, row: int, cols: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """One row's keys and values at the given cache columns (its real tokens), per layer."""
    return [(layer.keys[row][:, cols].clone(), layer.values[row][:, cols].clone()) for layer in cache.layers]


@torch.inference_mode()
def sample_batch(lm, prompts: list[list[int]], *, max_new_tokens: int, temperature: float, top_p: float,
                 seeds: list[int | None], pad_id: int, stop_ids: set[int],
                 store: PrefixStore | None = None) -> list[list[int]]:
    """Sampled continuations of the prompts; each row leaves the batch at its stop token.

    Row layout in the cache: [padding][reused prefix][padding][rest of the prompt], the padding
    masked out and every real token at its true position, so rows with different reused prefix
    lengths share one batch. With a `store`, each prompt's longest stored prefix is reused, and
    each finished row's prompt and reply are stored for later prompts.

    Returns:
        Per prompt, the generated tokens (a stop token, if reached, last).
    """
    device = lm.device
    n = len(prompts)
    reuse = [store.lookup(p) if store is not None else (0, None) for p in prompts]
    past_w = max(r[0] for r in reuse)
    suffixes = [p[r[0]:] for p, r in zip(prompts, reuse)]
    width = max(len(s) for s in suffixes)
    ids = torch.full((n, width), pad_id, dtype=torch.long)
    mask = torch.zeros((n, past_w + width), dtype=torch.long)
    positions = torch.zeros((n, width), dtype=torch.long)
    for r, (s, (used, _)) in enumerate(zip(suffixes, reuse)):
        ids[r, width - len(s):] = torch.tensor(s)
        mask[r, past_w - used:past_w] = 1
        mask[r, past_w + width - len(s):] = 1
        positions[r, width - len(s):] = used + torch.arange(len(s))
    cache = None
    if past_w:
        layers = []
        for i in range(len(next(kv for _, kv in reuse if kv is not None))):
            ref = next(kv for _, kv in reuse if kv is not None)[i][0]
            keys = ref.new_zeros((n, ref.shape[0], past_w, ref.shape[-1]))
            values = torch.zeros_like(keys)
            for r, (used, kv) in enumerate(reuse):
                if kv is not None:
                    keys[r, :, past_w - used:] = kv[i][0]
                    values[r, :, past_w - used:] = kv[i][1]
            layers.append((keys.to(device), values.to(device)))
        cache = DynamicCache(ddp_cache_data=layers)
    generators = []
    for r, seed in enumerate(seeds):
        g = torch.Generator()
        g.manual_seed(int(seed) if seed is not None else int(torch.randint(0, 2**31 - 1, ())) + r)
        generators.append(g)
    out = lm(input_ids=ids.to(device), attention_mask=mask.to(device), position_ids=positions.to(device),
             past_key_values=cache, use_cache=True)
    cache, logits = out.past_key_values, out.logits[:, -1]
    rows = list(range(n))  # original index of each live row
    next_pos = torch.tensor([len(p) for p in prompts])
    tokens: list[list[int]] = [[] for _ in range(n)]

    def keep(j: int, r: int) -> None:  # store a leaving row's prompt and reply (its last token unread)
        if store is not None:
            store.add(prompts[r] + tokens[r][:-1], _row_kv(cache, j, mask[j].nonzero(as_tuple=True)[0]))

    for step in range(max_new_tokens):
        chosen = sample(logits, temperature, top_p, [generators[r] for r in rows]).cpu()
        live = []
        for j, r in enumerate(rows):
            tokens[r].append(int(chosen[j]))
            if int(chosen[j]) not in stop_ids and step < max_new_tokens - 1:
                live.append(j)
            else:
                keep(j, r)
        if not live:
            break
        if len(live) < len(rows):
            select = torch.tensor(live)
            cache.batch_select_indices(select.to(device))
            mask, next_pos, chosen = mask[select], next_pos[select], chosen[select]
            rows = [rows[j] for j in live]
        mask = torch.cat([mask, torch.ones((len(rows), 1), dtype=torch.long)], dim=1)
        out = lm(input_ids=chosen[:, None].to(device), attention_mask=mask.to(device),
                 position_ids=next_pos[:, None].to(device), past_key_values=cache, use_cache=True)
        cache, logits = out.past_key_values, out.logits[:, -1]
        next_pos = next_pos + 1
    return tokens
