"""Input checking and normalisation shared by the embedding-based metrics."""

from __future__ import annotations

import numpy as np


def unit_rows(vectors: np.ndarray, name: str) -> np.ndarray:
    """Return a 2-d float array whose rows are the input rows scaled to unit L2 norm.

    Cosine similarity is a dot product of unit vectors; normalising here keeps the metrics
    correct for embeddings that did not come from `Embedder.encode` (already unit-norm).

    Args:
        vectors: (n, d) array, or a single (d,) vector.
        name: Argument name for error messages.

    Raises:
        ValueError: Not 1-d/2-d, or a row is zero (its direction is undefined).
    """
    array = np.asarray(vectors)
    if not np.issubdtype(array.dtype, np.floating):
        array = array.astype(np.float64)
    if array.ndim == 1:
        array = array[None, :]
    if array.ndim != 2:
        raise ValueError(f"{name} must be a (n, d) array, got shape {array.shape}")
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    if np.any(norms == 0):
        raise ValueError(f"{name} has a zero vector; cosine similarity is undefined for it")
    return array / norms
