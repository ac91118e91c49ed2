"""A deterministic stand-in sentence encoder for testing our own logic (caching, grouping)."""

from __future__ import annotations

import zlib

import numpy as np

from eval.embed import Embedder


class CountingEmbedder(Embedder):
    """Unit vectors seeded by a hash of each text; records how many texts each call embedded."""

    def __init__(self, name: str = "counting-fake", dim: int = 8) -> None:
        super().__init__(name)
        self.fake_dim = dim
        self.calls: list[int] = []

    def encode(self, texts, batch_size: int = 32, show_progress: bool = False) -> np.ndarray:
        self.calls.append(len(texts))
        vectors = np.array([np.random.default_rng(zlib.crc32(t.encode())).normal(size=self.fake_dim) for t in texts])
        return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
