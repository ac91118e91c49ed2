"""Homogenization among a prompt's final stories and between drafts and finals."""

from __future__ import annotations

import numpy as np
import pytest

from eval.metrics.homogenization import draft_to_final_similarity, mean_pairwise_similarity


def test_mean_pairwise_similarity_by_hand() -> None:
    # e1, e2 and (1, 1): cosines 0, 1/sqrt(2), 1/sqrt(2) over the three pairs.
    stories = np.array([[1.0, 0.0], [0.0, 3.0], [1.0, 1.0]])
    assert mean_pairwise_similarity(stories) == pytest.approx(np.sqrt(2) / 3, abs=1e-12)


def test_identical_stories_are_fully_homogeneous() -> None:
    assert mean_pairwise_similarity(np.array([[0.2, 0.5]] * 3)) == pytest.approx(1.0)


@pytest.mark.parametrize("stories", [np.zeros((0, 2)), np.array([[1.0, 0.0]])], ids=["none", "one"])
def test_fewer_than_two_stories_is_none(stories: np.ndarray) -> None:
    assert mean_pairwise_similarity(stories) is None


def test_draft_to_final_similarity_by_hand() -> None:
    drafts = np.array([[1.0, 0.0], [0.0, 1.0], [3.0, 4.0]])
    finals = np.array([[2.0, 0.0], [1.0, 0.0], [4.0, 3.0]])
    # same direction -> 1; orthogonal -> 0; (0.6, 0.8).(0.8, 0.6) = 0.96
    np.testing.assert_allclose(draft_to_final_similarity(drafts, finals), [1.0, 0.0, 0.96], atol=1e-12)


def test_draft_to_final_requires_matching_shapes() -> None:
    with pytest.raises(ValueError):
        draft_to_final_similarity(np.ones((2, 2)), np.ones((3, 2)))
