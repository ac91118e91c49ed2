"""The forward passes of the hf backend's decode loops: one decode step (`hf_step`), one prefill
pass (`hf_encode`), and the batched prefill that lays prompts out in one decode cache (`prefill`).

`hf_step` and `hf_encode` define the contracts the CPU folder's fused Llama step replaces
(`generate/backends/cpu/`): a loop takes a `step` and an `encode` of the same signatures.
"""

from __future__ import annotations

from functools import partial
from typing import NamedTuple

import torch
from transformers import DynamicCache

from generate.backends.hf.cache import RoomyCache
from generate.backends.hf.store import KV, Reuse

PREFILL_TOKENS = 4096  # padded prompt tokens per prefill forward pass


def chunks(lengths: list[int], budget: int = PREFILL_TOKENS, max_rows: int | None = None) -> list[list[int]]:
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


def hf_encode(lm, ids: torch.Tensor, positions: torch.Tensor, past: KV | None, mask: torch.Tensor | None,
              keep: torch.Tensor) -> tuple[torch.Tensor, KV]:
    """A prefill pass through transformers' forward: right-padded ids and their positions (b, s),
    each row after its `past` keys and values ((b, Hkv, P, D) per layer) or none, `mask` (b, P + s)
    over past and new columns (None: no past, causal). Returns the logits (b, len(keep), V) at the
    `keep` positions and every layer's keys and values (b, Hkv, P + s, D)."""
    out = lm(input_ids=ids, position_ids=positions, use_cache=True, attention_mask=mask, logits_to_keep=keep,
             past_key_values=DynamicCache(ddp_cache_data=past) if past is not None else None)
    return out.logits, [(layer.keys, layer.values) for layer in out.past_key_values.layers]


def hf_step(lm, tokens: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor, cache) -> torch.Tensor:
    """One decode step through transformers' forward: logits (B, V) of one new token per row at its
    position, attending to the (B, T) bool mask's columns (the new token's last).

    The mask goes in 4D, used as given: with an all-ones 2D one transformers drops the mask and asks
    SDPA for `enable_gqa`, much slower on CPU than its grouped-query path for one token."""
    return lm(input_ids=tokens[:, None], attention_mask=mask[:, None, None, :], position_ids=positions[:, None],
              past_key_values=cache, use_cache=True).logits[:, -1]


class _Group(NamedTuple):
    """One prefill pass's inputs: right-padded suffixes after a common width of `past` columns."""

    ids: torch.Tensor  # (b, span) the tokens after each row's reused prefix, right-padded
    positions: torch.Tensor  # (b, span) their true positions
    mask: torch.Tensor  # (b, past + span) the real columns: each row's reused prefix, then its suffix
    past: int  # columns of reused keys and values before the suffixes (the longest reuse)
    past_kv: KV | None  # per layer, (b, Hkv, past, D); None without reuse
    last: list[int]  # each row's last real column


def _group_inputs(prompts: list[list[int]], reuse: list[Reuse], rows: list[int], pad_id: int, device) -> _Group:
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
    past_kv = _stacked([reuse[r].kv for r in rows], past, device) if past else None
    return _Group(ids, positions, mask, past, past_kv, [past + len(s) - 1 for s in suffix])


def _stacked(stored: list[KV | None], past: int, device) -> KV:
    """The rows' reused keys and values as one (b, Hkv, past, D) pair per layer, zero-padded on the
    right (a row without reuse: all zeros, masked)."""
    ref = next(kv for kv in stored if kv is not None)
    return [tuple(torch.stack([_pad_to(kv[i][w] if kv else ref[i][w][:, :0], past) for kv in stored]).to(device)
                  for w in (0, 1))
            for i in range(len(ref))]


def _pad_to(t: torch.Tensor, width: int) -> torch.Tensor:
    """(H, T, D) keys or values right-padded with zeros to `width` columns."""
    return torch.nn.functional.pad(t, (0, 0, 0, width - t.shape[1]))


def prefill(lm, prompts: list[list[int]], reuse: list[Reuse], pad_id: int, room: int,
            encode=None) -> tuple[RoomyCache, torch.Tensor]:
    """Encode the prompts (each after its reused prefix) into one decode cache; also the logits of
    each prompt's last token. `encode` runs a pass (`hf_encode`'s contract, its default on `lm`).

    Prefill is compute-bound on a CPU, so it runs in length-sorted groups (`chunks`), each right-
    padded: a real token never attends to padding, so a group without reused prefixes needs no mask
    and takes SDPA's causal fast path, and only the last real position of each row goes through the
    vocabulary projection. The rows' keys and values are then laid out right-aligned in one cache
    ([padding][prompt], every token at its true position) for the batched decode.
    """
    device, n = lm.device, len(prompts)
    encode = encode or partial(hf_encode, lm)
    width = max(len(p) for p in prompts)
    cache = logits = None
    for rows in chunks([len(p) - got.tokens for p, got in zip(prompts, reuse)]):
        g = _group_inputs(prompts, reuse, rows, pad_id, device)
        keep = sorted(set(g.last))
        out_logits, layers = encode(g.ids.to(device), g.positions.to(device), g.past_kv,
                                    g.mask.to(device) if g.past else None,
                                    torch.tensor([k - g.past for k in keep], device=device))
        pick = torch.tensor([keep.index(k) for k in g.last], device=device)
        rows_logits = out_logits[torch.arange(len(rows), device=device), pick]
        if cache is None:
            k0 = layers[0][0]
            shape = (n, k0.shape[1], width + room, k0.shape[-1])
            cache = RoomyCache(room, [(k0.new_zeros(shape), k0.new_zeros(shape)) for _ in layers], width)
            logits = rows_logits.new_empty((n, rows_logits.shape[-1]))
        logits[torch.tensor(rows, device=device)] = rows_logits
        _place(cache, layers, rows, g.mask, [len(prompts[r]) for r in rows], width, device)
    return cache, logits


def _place(cache: RoomyCache, layers: KV, rows: list[int], mask: torch.Tensor, lengths: list[int], width: int,
           device) -> None:
    """Copy a pass's rows (their real columns only) into the decode cache, right-aligned at `width`."""
    for j, (r, length) in enumerate(zip(rows, lengths)):
        cols = mask[j].nonzero(as_tuple=True)[0].to(device)
        for mine, (keys, values) in zip(cache.layers, layers):
            mine._k[r, :, width - length:width] = keys[j][:, cols]
            mine._v[r, :, width - length:width] = values[j][:, cols]
