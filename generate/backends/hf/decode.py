"""Sampled decoding for the hf backend: prompts prefilled once into a cache with room for the
reply, then decoded together, each row with its own random stream, leaving the batch as soon as
it is done.

- **Finished rows leave the batch** (their cache rows are dropped, in place: `cache.compaction`),
  so a batch no longer pays for its longest member at every step.
- **The prefix store** (`store.PrefixStore`): each prompt's longest stored prefix is reused, an
  opening several prompts of a batch share is encoded once, and each finished prompt + reply is
  stored for the prompts of later rounds.
- **Sampling** (`sampling.py`): top-p read off a top-k, a Gumbel-max draw from a generator per
  request, so a request's tokens depend on its seed, not on its neighbours.
"""

from __future__ import annotations

from functools import partial
from itertools import pairwise
from typing import Callable

import torch

from generate.backends.hf.cache import compaction, row_kv
from generate.backends.hf.passes import hf_step, prefill
from generate.backends.hf.sampling import generators, sample
from generate.backends.hf.store import NOTHING, PrefixStore, common_prefix


def store_shared_prefixes(lm, prompts: list[list[int]], store: PrefixStore, pad_id: int, encode=None) -> int:
    """Encode once, and store, the prefixes that prompts of one batch share beyond what the store
    already holds of them; returns how many were stored.

    Review's reviewers each read two peers' drafts after the same persona, task and instructions
    (a few hundred tokens the store does not hold: the persona's earlier prompt went on
    differently). Prompts sorted by their tokens put the ones sharing most side by side; a
    neighbour pair's common prefix is worth a pass of its own when it runs at least
    `PrefixStore.BUCKET` tokens past what the store holds of either.
    """
    order = sorted(range(len(prompts)), key=prompts.__getitem__)
    shared: dict[tuple[int, ...], None] = {}
    for a, b in pairwise(order):
        n = min(common_prefix(tuple(prompts[a]), prompts[b]), len(prompts[a]) - 1, len(prompts[b]) - 1)
        if n - max(store.held(prompts[a]), store.held(prompts[b])) >= PrefixStore.BUCKET:
            shared[tuple(prompts[a][:n])] = None
    if not shared:
        return 0
    prefixes = [list(p) for p in shared]
    cache, _ = prefill(lm, prefixes, [store.lookup(p, prompt=False) for p in prefixes], pad_id, 0, encode)
    width = max(map(len, prefixes))
    for r, p in enumerate(prefixes):
        store.add(p, row_kv(cache, r, torch.arange(width - len(p), width, device=lm.device)))
    return len(prefixes)


def _left_padded_mask(prompts: list[list[int]]) -> torch.Tensor:
    """(n, width) bool: the real columns of prompts laid out as [padding][prompt]."""
    width = max(len(p) for p in prompts)
    mask = torch.zeros((len(prompts), width), dtype=torch.bool)
    for r, p in enumerate(prompts):
        mask[r, width - len(p):] = True
    return mask


def _take(chosen: torch.Tensor, rows: list[int], tokens: list[list[int]], stop_ids: set[int], last: bool,
          leave: Callable[[int, int], None]) -> list[int]:
    """Append each live row's sampled token; `leave(j, r)` each row that is done (a stop token, or
    the `last` step). Returns the batch positions of the rows still live."""
    live = []
    for j, r in enumerate(rows):
        tokens[r].append(int(chosen[j]))
        if int(chosen[j]) not in stop_ids and not last:
            live.append(j)
        else:
            leave(j, r)
    return live


@torch.inference_mode()
def sample_batch(lm, prompts: list[list[int]], *, max_new_tokens: int, temperature: float, top_p: float,
                 seeds: list[int | None], pad_id: int, stop_ids: set[int],
                 store: PrefixStore | None = None, step=None, encode=None) -> list[list[int]]:
    """Sampled continuations of the prompts; each row leaves the batch at its stop token.

    Prompts are encoded in length-sorted groups (`passes.prefill`) and decoded together, each row
    laid out as [padding][prompt][reply] with every real token at its true position. With a
    `store`, each prompt's longest stored prefix is reused, and each finished row's prompt and reply
    are stored for later prompts. `step` runs one decode step and `encode` one prefill pass
    (`passes.hf_step`'s and `passes.hf_encode`'s contracts; by default those on `lm`), e.g. the
    CPU folder's fused step of the same model.

    Returns:
        Per prompt, the generated tokens (a stop token, if reached, last).
    """
    device = lm.device
    step = step or partial(hf_step, lm)
    if store is not None:
        store_shared_prefixes(lm, prompts, store, pad_id, encode)
    reuse = [store.lookup(p) if store is not None else NOTHING for p in prompts]
    cache, logits = prefill(lm, prompts, reuse, pad_id, max_new_tokens, encode)
    mask = _left_padded_mask(prompts)
    streams = generators(seeds)
    rows = list(range(len(prompts)))  # original index of each live row
    next_pos = torch.tensor([len(p) for p in prompts])
    tokens: list[list[int]] = [[] for _ in prompts]

    def leave(j: int, r: int) -> None:  # store a leaving row's prompt and reply (its last token unread)
        if store is not None:
            store.add(prompts[r] + tokens[r][:-1], row_kv(cache, j, mask[j].nonzero(as_tuple=True)[0]),
                      supersedes=reuse[r].key)

    for i in range(max_new_tokens):
        chosen = sample(logits, temperature, top_p, [streams[r] for r in rows]).cpu()
        live = _take(chosen, rows, tokens, stop_ids, i == max_new_tokens - 1, leave)
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
