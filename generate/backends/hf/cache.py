"""A decode cache with room reserved for the reply (`RoomyCache`), and the row order that lets
finished rows leave it in place (`compaction`).

`DynamicCache` concatenates every step, copying the whole cache; at a wide batch over long prompts
that copy is a large part of a decode step. Here a step writes one column into a buffer allocated
once, and a row that leaves the batch moves one row of the buffer, never the whole batch.
"""

from __future__ import annotations

from functools import partial

import torch
from transformers import DynamicCache
from transformers.cache_utils import Cache, DynamicLayer

from generate.backends.hf.store import KV


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
        instead would copy every kept row, columns to spare included, into fresh memory at each
        leave: gigabytes at a wide batch over long prompts."""
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

    def __init__(self, room: int, buffers: KV | None = None, used: int = 0):
        if buffers is None:
            Cache.__init__(self, layer_class_to_replicate=partial(RoomyLayer, room))
        else:
            Cache.__init__(self, layers=[RoomyLayer(room, k, v, used) for k, v in buffers])


def compaction(live: list[int]) -> list[int]:
    """The batch's row order once only the `live` rows (ascending) stay: each stays in its
    slot, and a leaver's slot below len(live) takes a live row from past it, so the cache moves one
    row per leaver, in place (`RoomyLayer.batch_select_indices`). Row order changes no row's
    tokens: each row samples with its own generator (a Review run gave the same replies byte for
    byte as with the rows kept in order)."""
    kept = len(live)
    tail = [j for j in live if j >= kept]
    stay = set(live)
    return [j if j in stay else tail.pop() for j in range(kept)]


def row_kv(cache, row: int, cols: torch.Tensor) -> KV:
    """One row's keys and values at the given cache columns (its real tokens), per layer."""
    return [(layer.keys[row][:, cols].clone(), layer.values[row][:, cols].clone()) for layer in cache.layers]
