"""Embedding volume gain: the fast factored form against its definition."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from eval.metrics.story import StoryMetrics
from eval.metrics.volume_gain import VolumeGain, naive_volume_gain, too_few_chunks
from eval.reference import ReferenceCorpus
from tests.embedders import CountingEmbedder


def test_one_dimension_by_hand() -> None:
    # ref = {0, 2}: sample variance 2. With the story {4}: {0, 2, 4}, sample variance 4.
    eps = 1e-6
    expected = math.log(4 + eps) - math.log(2 + eps)
    ref, story = np.array([[0.0], [2.0]]), np.array([[4.0]])
    assert naive_volume_gain(ref, story, eps) == pytest.approx(expected, rel=1e-12)
    assert VolumeGain(ref, eps)(story) == pytest.approx(expected, rel=1e-12)


def test_story_at_the_mean_shrinks_volume_by_hand() -> None:
    # ref = {-1, 1} (variance 2); adding 0 gives {-1, 0, 1} (variance 1); eps = 0.5.
    expected = math.log(1.5) - math.log(2.5)
    assert VolumeGain(np.array([[-1.0], [1.0]]), eps=0.5)(np.array([0.0])) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    ("n", "d", "k", "eps"),
    [
        (50, 8, 1, 1e-6),
        (50, 8, 2, 1e-6),
        (200, 16, 3, 1e-6),
        (1000, 32, 5, 1e-6),
        (30, 4, 40, 1e-3),  # more story chunks than dimensions
        (10, 16, 2, 1e-6),  # rank-deficient reference: eps carries the empty directions
        (400, 64, 1, 1e-2),
    ],
)
def test_fast_equals_naive(n: int, d: int, k: int, eps: float) -> None:
    rng = np.random.default_rng(n * 1000 + d * 10 + k)
    ref = rng.normal(size=(n, d)) * rng.uniform(0.1, 2.0, size=d)
    story = rng.normal(loc=0.3, size=(k, d))
    fast = VolumeGain(ref, eps)(story)
    assert fast == pytest.approx(naive_volume_gain(ref, story, eps), rel=1e-6)


def test_unit_norm_embeddings_like_the_encoder() -> None:
    rng = np.random.default_rng(7)
    ref = rng.normal(size=(2000, 48)) + 2.0
    ref /= np.linalg.norm(ref, axis=1, keepdims=True)
    story = rng.normal(size=(2, 48)) + 2.0
    story /= np.linalg.norm(story, axis=1, keepdims=True)
    assert VolumeGain(ref)(story) == pytest.approx(naive_volume_gain(ref, story), rel=1e-6)


def test_batch_matches_single_calls_and_empty_story_is_zero() -> None:
    rng = np.random.default_rng(3)
    ref = rng.normal(size=(120, 10))
    stories = [rng.normal(size=(k, 10)) for k in (1, 2, 3, 2, 1)] + [np.zeros((0, 10))]
    gain = VolumeGain(ref)
    batched = gain.batch(stories)
    assert batched[-1] == 0.0
    np.testing.assert_allclose(batched[:-1], [naive_volume_gain(ref, s) for s in stories[:-1]], rtol=1e-6)
    np.testing.assert_allclose(batched, [gain(s) for s in stories], rtol=1e-12)


@pytest.mark.parametrize(
    ("ref", "eps"),
    [(np.ones((1, 3)), 1e-6), (np.ones(3), 1e-6), (np.ones((4, 3)), 0.0)],
    ids=["one-row", "1-d", "zero-eps"],
)
def test_rejects_bad_reference(ref: np.ndarray, eps: float) -> None:
    with pytest.raises(ValueError):
        VolumeGain(ref, eps)


def test_rejects_dimension_mismatch() -> None:
    with pytest.raises(ValueError):
        VolumeGain(np.eye(3))(np.ones((1, 4)))


@pytest.mark.parametrize(("n", "d", "defined"), [(384, 384, False), (100, 384, False), (385, 384, True)])
def test_volume_gain_is_defined_only_for_more_reference_chunks_than_dimensions(n: int, d: int, defined: bool) -> None:
    assert (too_few_chunks(n, d) is None) == defined


def _story_metrics(n: int, d: int) -> StoryMetrics:
    rng = np.random.default_rng(n)
    ref = rng.normal(size=(n, d)).astype(np.float32)
    ref /= np.linalg.norm(ref, axis=1, keepdims=True)
    corpus = ReferenceCorpus(Path("corpus"), "fake", 250, [f"w#{i}" for i in range(n)], {"moon": 3}, ref)
    return StoryMetrics(corpus, CountingEmbedder(dim=d))


def test_story_metrics_leave_volume_gain_missing_with_its_reason_below_the_dimension(caplog) -> None:
    """The shared path of evaluation and rewards: below N = d the gain is a number of eps."""
    with caplog.at_level("WARNING"):
        small = _story_metrics(8, 8).measure(["The moon rose over the quiet sea."])[0]
    assert small.values["volume_gain"] is None
    assert "not more than the 8 embedding dimensions" in small.missing["volume_gain"]
    assert small.values["novelty_cos"] is not None and small.values["kl"] is not None
    assert sum("volume_gain unavailable" in m for m in caplog.messages) == 1
    enough = _story_metrics(9, 8)
    assert enough.measure(["The moon rose over the quiet sea."])[0].values["volume_gain"] is not None
    assert enough.fingerprint()["volume_eps"] == 1e-6
