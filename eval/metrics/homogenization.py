"""Homogenization: do the agents' stories converge on one another, and away from their drafts?

Peer-review style frameworks risk making writers imitate each other. Two views, both on one
embedding per story (e.g. an `Embedder.encode` of the full story text):

- `mean_pairwise_similarity`: mean cosine similarity over all pairs of final stories written for
  one prompt; higher means more homogeneous outputs.
- `draft_to_final_similarity`: per agent, cosine between its first draft and its final story;
  lower means revision moved the story further from where it started.
"""

from __future__ import annotations

import numpy as np

from eval.metrics._vectors import unit_rows


def mean_pairwise_similarity(story_embeddings: np.ndarray) -> float | None:
    """Mean cosine similarity over the unordered pairs of one prompt's final stories.

    Args:
        story_embeddings: (n, d), one embedding per story.

    Returns:
        The mean over the n (n - 1) / 2 pairs, or None when n < 2 (no pair exists).
    """
    stories = unit_rows(story_embeddings, "story_embeddings")
    n = stories.shape[0]
    if n < 2:
        return None
    upper = np.triu_indices(n, k=1)
    return float(np.mean((stories @ stories.T)[upper]))


def draft_to_final_similarity(first_drafts: np.ndarray, finals: np.ndarray) -> np.ndarray:
    """Cosine similarity between each agent's first draft and its final story.

    Args:
        first_drafts: (n, d), row i is agent i's first draft.
        finals: (n, d), row i is agent i's final story.

    Returns:
        (n,) similarities, in agent order.

    Raises:
        ValueError: The two arrays have different shapes.
    """
    drafts = unit_rows(first_drafts, "first_drafts")
    final = unit_rows(finals, "finals")
    if drafts.shape != final.shape:
        raise ValueError(f"first_drafts {drafts.shape} and finals {final.shape} must have the same shape")
    return np.einsum("ij,ij->i", drafts, final)
