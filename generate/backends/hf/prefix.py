"""Greedy decoding of many prompts that share long prefixes, encoding each shared prefix once.

The judge asks the same rubric question about many stories: per aspect, every request is the same
~400 tokens of instructions, then one story, then a short tail. `generate()` re-encodes the
shared instructions for every request, and that prefill is most of a judge call's cost. Here the
requests are grouped by their longest common token prefix; each group's prefix is run once (batch
of one; not at all when the store holds it), and only the suffixes are run, the rows of every group
together, right-padded, each after its own group's prefix cache with positions continuing after
it. Greedy steps then continue from that cache.

The result equals greedy `generate()` on each full prompt up to floating-point noise (the same
attention, in a different association order); tests compare the two on the real model.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import torch
from transformers import DynamicCache

from generate.backends.hf.cache import RoomyCache
from generate.backends.hf.passes import chunks, hf_step
from generate.backends.hf.store import KV, NOTHING, PrefixStore, common_prefix

MIN_SHARED = 32  # a shorter common prefix is not worth a separate prefill


@dataclass
class Group:
    prefix: list[int]
    members: list[int]  # indices into the request list


def shared_prefix_groups(prompts: list[list[int]], min_shared: int = MIN_SHARED) -> list[Group]:
    """Group prompts whose longest common prefix has at least `min_shared` tokens.

    Prompts are sorted by their tokens, so prompts sharing a prefix are neighbours and a prompt's
    next neighbour is the one it shares most with: a one-prompt group takes it if they share
    `min_shared` tokens, and a larger group grows while its running common prefix would not shrink
    below half (a prompt that shares only the first lines with a group opens its own: the judge's
    aspects share their opening but each aspect's ~250-token question is a better prefix for its
    own stories). A pair need not share half of the first prompt: stories longer than the question
    still form a group, so the judge encodes its rubric once. Every prefix leaves at least one token of each member's own (the logits of the last prompt token
    must come from a suffix pass).
    """
    order = sorted(range(len(prompts)), key=lambda i: prompts[i])
    groups: list[Group] = []
    for i in order:
        if groups:
            g = groups[-1]
            common = common_prefix(g.prefix, prompts[i])
            if common >= min_shared and (len(g.members) == 1 or 2 * common > len(g.prefix)):
                g.prefix = g.prefix[:common]
                g.members.append(i)
                continue
        groups.append(Group(list(prompts[i]), [i]))
    for g in groups:
        shortest = min(len(prompts[i]) for i in g.members)
        g.prefix = g.prefix[:min(len(g.prefix), shortest - 1)] if len(g.members) > 1 else []
    return groups


@torch.inference_mode()
def greedy_with_prefix(lm, prompts: list[list[int]], max_new_tokens: int, pad_id: int, stop_ids: set[int],
                       batch_size: int, store: PrefixStore | None = None, step=None,
                       dists: bool = True) -> list[tuple[list[int], list[torch.Tensor]]]:
    """Greedy continuation of every prompt, each shared prefix encoded once, and with a `store`
    once across calls (the judge asks the same five rubric questions at every GRPO step).

    The rows of all groups then run together, in length-sorted chunks of at most `PREFILL_TOKENS`
    padded tokens (`passes.chunks`, as prefill) and `batch_size` rows: the five aspects of a GRPO
    step's short stories share one suffix pass and one set of greedy steps instead of one per
    aspect (single-token passes are costly, and their matrix products too thin for the CPU's peak),
    while long stories go a few rows at a time (a wide pass over long suffixes runs slower: its
    activations no longer fit the CPU's caches). `step` runs one decode step
    (`passes.hf_step`'s signature; default `hf_step` on `lm`), e.g. the CPU folder's fused step.

    Returns:
        Per prompt: (generated token ids up to and including a stop token, the log-softmax over
        the vocabulary at each generated position, or none unless `dists`: each holds its step's
        whole batch alive, 9 MB a step at 48 rows, 3.8 GB for greedy 400-token stories).
    """
    rows: list[tuple[int, KV | None]] = []
    for group in shared_prefix_groups(prompts):
        kv = _encode_prefix(lm, group.prefix, store) if group.prefix else None
        rows += [(i, kv) for i in group.members]
    results: list[tuple[list[int], list[torch.Tensor]]] = [([], []) for _ in prompts]
    for chunk in chunks([len(prompts[i]) - _length(kv) for i, kv in rows], max_rows=batch_size):
        batch = [rows[c] for c in chunk]
        for (i, _), res in zip(batch, _decode(lm, [kv for _, kv in batch],
                                              [prompts[i][_length(kv):] for i, kv in batch],
                                              max_new_tokens, pad_id, stop_ids, step or partial(hf_step, lm), dists)):
            results[i] = res
    return results


def _length(kv: KV | None) -> int:
    return kv[0][0].shape[-2] if kv else 0


def _encode_prefix(lm, prefix: list[int], store: PrefixStore | None) -> KV:
    """The per-layer (H, T, D) keys and values of a shared prefix; a prefix the store holds whole
    costs no forward pass, one it holds in part only the rest."""
    used, kv, _ = store.lookup(prefix, whole=True) if store is not None else NOTHING
    if used == len(prefix):
        return kv
    past = DynamicCache(ddp_cache_data=[(k[None].to(lm.device), v[None].to(lm.device)) for k, v in kv]) if kv else None
    out = lm(input_ids=torch.tensor([prefix[used:]], device=lm.device), past_key_values=past, use_cache=True,
             position_ids=torch.arange(used, len(prefix), device=lm.device)[None], logits_to_keep=1)
    layers = [(layer.keys[0], layer.values[0]) for layer in out.past_key_values.layers]
    if store is not None:
        store.add(prefix, layers)
    return layers


def _prefix_cache(prefixes: list[KV | None], own: list[int], columns: int, room: int, device) -> RoomyCache:
    """A decode cache with `columns` columns in all, holding each row's own prefix keys and values
    at its first columns (zeros up to the longest prefix); grown by `room` columns if ever full.
    Without prefixes, one made by the first update with `columns` to spare."""
    prefix_len = max(own)
    if not prefix_len:
        return RoomyCache(columns)
    ref = next(kv for kv in prefixes if kv)
    buffers = []
    for layer, (k, v) in enumerate(ref):
        shape = (len(prefixes), k.shape[0], columns, k.shape[-1])
        kb, vb = k.new_zeros(shape), v.new_zeros(shape)
        for r, kv in enumerate(prefixes):
            if kv:
                kb[r, :, :own[r]], vb[r, :, :own[r]] = kv[layer]
        buffers.append((kb.to(device), vb.to(device)))
    return RoomyCache(room, buffers, prefix_len)


def _suffix_pass(lm, prefixes: list[KV | None], suffixes: list[list[int]], max_new_tokens: int, pad_id: int):
    """Run right-padded suffixes, each after its own prefix cache (or none): returns the
    log-softmax at each row's last real position, the cache, the mask over its columns and each
    row's next position.

    Each row's prefix keys and values are copied once into a cache with room for the longest
    prefix, the suffixes and the new tokens (`RoomyCache`: no per-step concatenation): a row with a
    shorter prefix has masked columns up to the longest, and its positions continue after its own
    prefix. Only each row's last real position goes through the vocabulary projection (a
    vocabulary-wide row per token otherwise)."""
    device = lm.device
    n, width = len(suffixes), max(len(s) for s in suffixes)
    own = [_length(kv) for kv in prefixes]
    prefix_len = max(own)
    ids = torch.full((n, width), pad_id, dtype=torch.long, device=device)
    real = torch.zeros((n, width), dtype=torch.long, device=device)
    for r, s in enumerate(suffixes):
        ids[r, :len(s)] = torch.tensor(s, device=device)
        real[r, :len(s)] = 1
    cache = _prefix_cache(prefixes, own, prefix_len + width + max_new_tokens, max_new_tokens, device)
    seen = torch.zeros((n, prefix_len), dtype=torch.long, device=device)
    for r, p in enumerate(own):
        seen[r, :p] = 1
    starts = torch.tensor(own, device=device)  # each row's first suffix position
    mask = torch.cat([seen, real], dim=1)
    lengths = real.sum(dim=1)
    keep = sorted(set((lengths - 1).tolist()))
    out = lm(input_ids=ids, attention_mask=mask, position_ids=starts[:, None] + torch.arange(width, device=device),
             past_key_values=cache, use_cache=True, logits_to_keep=torch.tensor(keep, device=device))
    pick = torch.tensor([keep.index(int(k)) for k in lengths - 1], device=device)
    logp = torch.log_softmax(out.logits[torch.arange(n), pick].float(), dim=-1)
    return logp, out.past_key_values, mask, starts + lengths


def _decode(lm, prefixes: list[KV | None], suffixes: list[list[int]], max_new_tokens: int, pad_id: int,
            stop_ids: set[int], step, keep_dists: bool) -> list[tuple[list[int], list[torch.Tensor]]]:
    """Suffixes after their prefixes (`_suffix_pass`), then greedy steps until every row has
    stopped or `max_new_tokens` are out; each step's log-softmax kept only where `keep_dists`."""
    device = lm.device
    n = len(suffixes)
    logp, cache, mask, next_pos = _suffix_pass(lm, prefixes, suffixes, max_new_tokens, pad_id)
    tokens: list[list[int]] = [[] for _ in range(n)]
    dists: list[list[torch.Tensor]] = [[] for _ in range(n)]
    alive = torch.ones(n, dtype=torch.bool)
    for i in range(max_new_tokens):
        choice = logp.argmax(dim=-1)
        for r in range(n):
            if alive[r]:
                tokens[r].append(int(choice[r]))
                if keep_dists:
                    dists[r].append(logp[r])
                if int(choice[r]) in stop_ids:
                    alive[r] = False
        if i == max_new_tokens - 1 or not alive.any():
            break
        # The new token goes right after each row's own last real token: rows are right-padded, so
        # it sits at a slot past the padding; the padding slots stay masked.
        mask = torch.cat([mask, torch.ones((n, 1), dtype=torch.long, device=device)], dim=1)
        logits = step(choice.to(device), next_pos.to(device), mask.bool(), cache)
        logp = torch.log_softmax(logits.float(), dim=-1)
        next_pos = next_pos + 1
    return list(zip(tokens, dists))
