"""Semantic novelty: 1 - max cosine similarity to the nearest reference chunk.

The paper embeds ~250-word reference chunks and reports 1 - max cosine between a generated
embedding and every reference chunk. A story longer than one chunk has several embeddings; we
score each of the story's chunks against its nearest reference chunk and take the mean of
(1 - max cos) over the story's chunks. Why the mean: every part of the story counts equally and
the value does not drift with the number of chunks. The minimum would let one derivative passage
decide the whole story; the maximum would reward appending one off-topic chunk, which is easy to
game in a training reward. Stories of ~300 words are a single chunk (see `eval.text.chunk_words`),
where all three choices agree.
"""

from __future__ import annotations

import numpy as np

from eval.metrics._vectors import unit_rows


class CosineNovelty:
    """Nearest-neighbour novelty against a fixed reference, normalised once.

    Args:
        ref_embeddings: (N, d) reference chunk embeddings.
    """

    def __init__(self, ref_embeddings: np.ndarray) -> None:
        self._ref = unit_rows(ref_embeddings, "ref_embeddings")

    def __call__(self, story_embeddings: np.ndarray) -> float:
        """Mean over the story's chunks of (1 - max cosine to any reference chunk).

        Args:
            story_embeddings: (k, d) embeddings of the story's chunks, or one (d,) vector.

        Returns:
            Novelty in [0, 2]; larger means further from the nearest reference chunk.

        Raises:
            ValueError: The story has no chunks, or the dimensions differ.
        """
        story = unit_rows(story_embeddings, "story_embeddings")
        if story.shape[0] == 0:
            raise ValueError("story has no chunks")
        if story.shape[1] != self._ref.shape[1]:
            raise ValueError(f"dimension mismatch: story {story.shape[1]}, reference {self._ref.shape[1]}")
        nearest = (story @ self._ref.T).max(axis=1)
        return float(np.mean(1.0 - nearest))


def cosine_novelty(story_embeddings: np.ndarray, ref_embeddings: np.ndarray) -> float:
    """One-off `CosineNovelty(ref_embeddings)(story_embeddings)`; build the object for loops."""
    return CosineNovelty(ref_embeddings)(story_embeddings)
