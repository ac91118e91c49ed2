"""Story embeddings shared by the embedding-based rewards of one training step.

`novelty_cos`, `volume_gain` and `group_diversity` all need the same embeddings of the same
completions; trl calls them one after another with the same batch, so the last few batches are
kept and the encoder runs once per step. Stories are chunked exactly as the metrics chunk them
(`eval.text.chunk_words`), so a reward equals the evaluation metric on the same text.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from functools import lru_cache

import numpy as np

from eval.embed import Embedder
from eval.text import chunk_words
from rewards import timing

_KEEP = 4  # batches kept: a step's rewards share one; evaluation alternates a few
_lock = threading.Lock()
_cache: OrderedDict[tuple, list[np.ndarray]] = OrderedDict()


@lru_cache(maxsize=None)
def get_embedder(name: str) -> Embedder:
    """One `Embedder` per name and process (the model itself is cached by `eval.embed`)."""
    return Embedder(name)


def story_chunk_embeddings(texts: list[str], embedder: str, chunk_size: int = 250) -> list[np.ndarray]:
    """Per story, the (k, d) unit-norm embeddings of its ~chunk_size-word chunks (k = 0 if empty).

    All chunks of the batch go to the encoder in one call; the result is cached per batch.
    """
    key = (embedder, chunk_size, tuple(texts))
    with _lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    chunks = [chunk_words(text, chunk_size) for text in texts]
    flat = [c for story in chunks for c in story]
    with timing.timed("embed"):
        vectors = get_embedder(embedder).encode(flat) if flat else np.zeros((0, 0), dtype=np.float32)
    out, start = [], 0
    for story in chunks:
        out.append(vectors[start:start + len(story)])
        start += len(story)
    with _lock:
        _cache[key] = out
        while len(_cache) > _KEEP:
            _cache.popitem(last=False)
    return out


def story_embeddings(texts: list[str], embedder: str, chunk_size: int = 250) -> list[np.ndarray | None]:
    """One unit-norm vector per story (the normalised mean of its chunk embeddings), None if empty."""
    out: list[np.ndarray | None] = []
    for chunks in story_chunk_embeddings(texts, embedder, chunk_size):
        if len(chunks) == 0:
            out.append(None)
            continue
        mean = chunks.mean(axis=0)
        norm = float(np.linalg.norm(mean))
        out.append(mean / norm if norm > 0 else None)
    return out
