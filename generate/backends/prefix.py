"""Greedy decoding of many prompts that share long prefixes, encoding each shared prefix once.

The judge asks the same rubric question about many stories: per aspect, every request is the same
~400 tokens of instructions, then one story, then a short tail. `generate()` re-encodes the
shared instructions for every request, and that prefill is most of a judge call's cost. Here the
requests are grouped by their longest common token prefix; each group's prefix is run once (batch
of one), its KV cache is repeated over the group, and only the suffixes are run, right-padded, with
positions continuing after the prefix. Greedy steps then continue from that cache.

The result equals greedy `generate()` on each full prompt up to floating-point noise (the same
attention, in a different association order); tests compare the two on the real model.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from transformers import DynamicCache

from generate.backends.decode import PrefixStore, RoomyCache

MIN_SHARED = 32  # a shorter common prefix is not worth a separate prefill


@dataclass
class Group:
    prefix: list[int]
    members: list[int]  # indices into the request list


def shared_prefix_groups(prompts: list[list[int]], min_shared: int = MIN_SHARED) -> list[Group]:
    """Group prompts whose longest common prefix has at least `min_shared` tokens.

    Prompts are sorted by their tokens, so prompts sharing a prefix are neighbours; a group grows
    while its running common prefix stays long enough and would not shrink below half (a prompt
    that shares only the first lines with a group opens its own: the judge's aspects share their
    opening but each aspect's ~400-token question is a better prefix for its own stories). Every
    prefix leaves at least one token of each member's own (the logits of the last prompt token
    must come from a suffix pass).
    """
    order = sorted(range(len(prompts)), key=lambda i: prompts[i])
    groups: list[Group] = []
    for i in order:
        if groups:
            g = groups[-1]
            common = _common(g.prefix, prompts[i])
            if common >= min_shared and 2 * common > len(g.prefix):
                g.prefix = g.prefix[:common]
                g.members.append(i)
                continue
        groups.append(Group(list(prompts[i]), [i]))
    for g in groups:
        shortest = min(len(prompts[i]) for i in g.members)
        g.prefix = g.prefix[:min(len(g.prefix), shortest - 1)] if len(g.members) > 1 else []
    return groups


def _common(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    for k in range(n):
        if a[k] != b[k]:
            return k
    return n


@torch.inference_mode()
def greedy_with_prefix(lm, prompts: list[list[int]], max_new_tokens: int, pad_id: int, stop_ids: set[int],
                       batch_size: int, top_k: int = 0,
                       store: PrefixStore | None = None) -> list[tuple[list[int], list[torch.Tensor]]]:
    """Greedy continuation of every prompt, each shared prefix encoded once, and with a `store`
    once across calls (the judge asks the same five rubric questions at every GRPO step).

    Returns:
        Per prompt: (generated token ids up to and including a stop token, the log-softmax over
        the vocabulary at each generated position).
    """
    results: list[tuple[list[int], list[torch.Tensor]]] = [([], []) for _ in prompts]
    for group in shared_prefix_groups(prompts):
        cache = None
        if group.prefix:
            cache = _encode_prefix(lm, group.prefix, store)
        for start in range(0, len(group.members), batch_size):
            idx = group.members[start:start + batch_size]
            for i, res in zip(idx, _decode(lm, cache, len(group.prefix), [prompts[i][len(group.prefix):] for i in idx],
                                           max_new_tokens, pad_id, stop_ids)):
                results[i] = res
    return results


def _encode_prefix(lm, prefix: list[int], store: PrefixStore | None) -> DynamicCache:
    """The (batch of one) cache of a shared prefix, reusing what the store has of it."""
    used, kv = store.lookup(prefix) if store is not None else (0, None)
    past = DynamicCache(ddp_cache_data=[(k[None].to(lm.device), v[None].to(lm.device)) for k, v in kv]) if kv else None
    out = lm(input_ids=torch.tensor([prefix[used:]], device=lm.device), past_key_values=past, use_cache=True,
             position_ids=torch.arange(used, len(prefix), device=lm.device)[None], logits_to_keep=1)
    if store is not None:
        store.add(prefix, [(layer.keys[0], layer.values[0]) for layer in out.past_key_values.layers])
    return out.past_key_values


def _decode(lm, prefix_cache, prefix_len: int, suffixes: list[list[int]], max_new_tokens: int, pad_id: int,
            stop_ids: set[int]) -> list[tuple[list[int], list[torch.Tensor]]]:
    """Run right-padded suffixes after a shared prefix cache, then greedy steps.

    The prefix's keys and values are copied once into a cache with room for the suffixes and the
    new tokens (`RoomyCache`: no per-step concatenation), and only each row's last real position
    goes through the vocabulary projection (a 49k-wide row per token otherwise)."""
    device = lm.device
    n, width = len(suffixes), max(len(s) for s in suffixes)
    ids = torch.full((n, width), pad_id, dtype=torch.long, device=device)
    real = torch.zeros((n, width), dtype=torch.long, device=device)
    for r, s in enumerate(suffixes):
        ids[r, :len(s)] = torch.tensor(s, device=device)
        real[r, :len(s)] = 1
    if prefix_cache is None:
        cache = RoomyCache(width + max_new_tokens)
    else:
        buffers = []
        for layer in prefix_cache.layers:
            k, v = layer.keys, layer.values
            shape = (n, k.shape[1], prefix_len + width + max_new_tokens, k.shape[-1])
            kb, vb = k.new_empty(shape), v.new_empty(shape)
            kb[:, :, :prefix_len], vb[:, :, :prefix_len] = k, v
            buffers.append((kb, vb))
        cache = RoomyCache(max_new_tokens, buffers, prefix_len)
    mask = torch.cat([torch.ones((n, prefix_len), dtype=torch.long, device=device), real], dim=1)
    positions = (prefix_len + torch.arange(width, device=device)).expand(n, width)
    lengths = real.sum(dim=1)
    keep = sorted(set((lengths - 1).tolist()))
    out = lm(input_ids=ids, attention_mask=mask, position_ids=positions, past_key_values=cache, use_cache=True,
             logits_to_keep=torch.tensor(keep, device=device))
    pick = torch.tensor([keep.index(int(k)) for k in lengths - 1], device=device)
    logp = torch.log_softmax(out.logits[torch.arange(n), pick].float(), dim=-1)
    cache = out.past_key_values
    tokens: list[list[int]] = [[] for _ in range(n)]
    dists: list[list[torch.Tensor]] = [[] for _ in range(n)]
    alive = torch.ones(n, dtype=torch.bool)
    next_pos = prefix_len + lengths  # each row's next position
    for step in range(max_new_tokens):
        choice = logp.argmax(dim=-1)
        for r in range(n):
            if alive[r]:
                tokens[r].append(int(choice[r]))
                dists[r].append(logp[r])
                if int(choice[r]) in stop_ids:
                    alive[r] = False
        if step == max_new_tokens - 1 or not alive.any():
            break
        # The new token goes right after each row's own last real token: rows are right-padded, so
        # it sits at a slot past the padding; the padding slots stay masked.
        mask = torch.cat([mask, torch.ones((n, 1), dtype=torch.long, device=device)], dim=1)
        out = lm(input_ids=choice[:, None].to(device), attention_mask=mask[:, None, None, :].bool(),
                 position_ids=next_pos[:, None].to(device),
                 past_key_values=cache, use_cache=True)
        cache = out.past_key_values
        logp = torch.log_softmax(out.logits[:, -1].float(), dim=-1)
        next_pos = next_pos + 1
    return list(zip(tokens, dists))
