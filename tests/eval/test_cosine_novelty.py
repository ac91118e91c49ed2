"""Nearest-neighbour semantic novelty on hand-checkable 2-d vectors."""

from __future__ import annotations

import numpy as np
import pytest

from eval.metrics.novelty_cos import CosineNovelty, cosine_novelty

REF = np.array([[1.0, 0.0], [0.0, 1.0]])


@pytest.mark.parametrize(
    ("story", "expected"),
    [
        # cos((0.6, 0.8), e1) = 0.6, cos(., e2) = 0.8 -> 1 - 0.8
        ([[0.6, 0.8]], 0.2),
        # unnormalised input: (3, 4) has the same direction
        ([[3.0, 4.0]], 0.2),
        # a copy of a reference chunk is not novel
        ([[0.0, 2.0]], 0.0),
        # opposite to both: max cos = -1/sqrt(2)
        ([[-1.0, -1.0]], 1 + 1 / np.sqrt(2)),
        # mean over chunks of (1 - max cos): (0.2 + 0.0) / 2
        ([[0.6, 0.8], [1.0, 0.0]], 0.1),
        # one (d,) vector is one chunk
        ([0.8, 0.6], 0.2),
    ],
)
def test_novelty_by_hand(story: list, expected: float) -> None:
    assert cosine_novelty(np.array(story), REF) == pytest.approx(expected, abs=1e-12)


def test_prebuilt_object_matches_function() -> None:
    rng = np.random.default_rng(0)
    ref, story = rng.normal(size=(50, 6)), rng.normal(size=(3, 6))
    assert CosineNovelty(ref)(story) == pytest.approx(cosine_novelty(story, ref), abs=1e-12)


@pytest.mark.parametrize("story", [np.zeros((0, 2)), np.ones((1, 3)), np.zeros((1, 2))], ids=["empty", "dim", "zero"])
def test_rejects_bad_story(story: np.ndarray) -> None:
    with pytest.raises(ValueError):
        cosine_novelty(story, REF)
