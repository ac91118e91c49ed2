"""Unigram KL divergence against hand arithmetic and a brute-force sum over the vocabulary."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from eval.metrics.kl import UnigramReference, unigram_kl
from eval.text import word_tokens


def test_three_word_vocabulary_by_hand() -> None:
    # Reference {a: 2, b: 1}; story "a c c". Union vocabulary {a, b, c}, alpha = 1:
    # p = (1/3, 0, 2/3) (empirical; b contributes nothing)
    # q = ((2+1)/6, (1+1)/6, (0+1)/6) = (3/6, 2/6, 1/6)
    expected = 1 / 3 * math.log((1 / 3) / (3 / 6)) + 2 / 3 * math.log((2 / 3) / (1 / 6))
    assert unigram_kl("a c c", {"a": 2, "b": 1}) == pytest.approx(expected, rel=1e-12)


def test_alpha_half_by_hand() -> None:
    # Reference {x: 3}; story "x y", alpha = 0.5, vocabulary {x, y}:
    # p(x) = 1/2, p(y) = 1/2
    # q(x) = (3+0.5)/(3+1) = 0.875, q(y) = 0.5/4 = 0.125
    expected = 0.5 * math.log(0.5 / 0.875) + 0.5 * math.log(0.5 / 0.125)
    assert unigram_kl("x y", {"x": 3}, alpha=0.5) == pytest.approx(expected, rel=1e-12)


def test_identical_distribution_is_zero_up_to_smoothing() -> None:
    assert unigram_kl("a b b", {"a": 1, "b": 2}, alpha=1e-9) == pytest.approx(0.0, abs=1e-8)


def test_rare_words_diverge_more_than_common_ones() -> None:
    counts = {"the": 1000, "ship": 50, "moon": 40, "xenolith": 1}
    assert unigram_kl("xenolith xenolith moon", counts) > unigram_kl("the the ship", counts)


def _brute_force(story: str, counts: dict[str, int], alpha: float) -> float:
    story_counts = Counter(word_tokens(story))
    vocab = sorted(set(counts) | set(story_counts))
    p = np.array([story_counts[w] for w in vocab], dtype=float)
    q = np.array([counts.get(w, 0) + alpha for w in vocab], dtype=float)
    p, q = p / p.sum(), q / q.sum()
    used = p > 0
    return float(np.sum(p[used] * np.log(p[used] / q[used])))


@pytest.mark.parametrize("alpha", [1.0, 0.1, 0.01])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_brute_force_sum(alpha: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    ref_vocab = [f"r{i}" for i in range(300)]
    counts = {w: int(c) for w, c in zip(ref_vocab, rng.integers(1, 500, size=300), strict=True)}
    words = list(rng.choice(ref_vocab[:120], size=80)) + [f"new{i}" for i in rng.integers(0, 10, size=20)]
    story = " ".join(words)
    reference = UnigramReference(counts)
    assert unigram_kl(story, reference, alpha) == pytest.approx(_brute_force(story, counts, alpha), rel=1e-10)
    assert unigram_kl(story, counts, alpha) == unigram_kl(story, reference, alpha)


def test_reference_summary() -> None:
    reference = UnigramReference({"a": 2, "b": 1})
    assert (reference.total, reference.vocab_size) == (3, 2)


@pytest.mark.parametrize(("story", "alpha"), [("", 1.0), ("!!! ...", 1.0), ("a", 0.0), ("a", -1.0)])
def test_rejects_undefined_inputs(story: str, alpha: float) -> None:
    with pytest.raises(ValueError):
        unigram_kl(story, {"a": 1}, alpha)
