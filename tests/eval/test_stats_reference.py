"""eval.stats against formulas written out here: the clustered se of two prompts and the CI level."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from eval.stats import paired_test, summarize


def test_two_prompts_give_a_clustered_se():
    """Two prompts are the fewest that say how the mean moves across prompts: CR1 by hand,
    sqrt(G / (G - 1) * sum over prompts of (sum of residuals)^2) / n, with G = 2, n = 4."""
    s = summarize([1.0, 2.0, 3.0, 6.0], ["a", "a", "b", "b"])
    mean = 3.0
    sums = [(1 - mean) + (2 - mean), (3 - mean) + (6 - mean)]
    assert s.n_clusters == 2 and s.se == pytest.approx(math.sqrt(2 * sum(t * t for t in sums)) / 4)


def test_the_paired_ci_has_the_level_alpha_asks_for():
    """The percentile bootstrap CI of a mean of 400 differences is close to the normal one,
    mean +- z(1 - alpha / 2) sd / sqrt(n): at alpha = 0.5 a 50% interval, a third as wide as at 0.05."""
    d = np.random.default_rng(3).normal(0.2, 1.0, size=400)
    half = d.std(ddof=1) / math.sqrt(d.size)
    for alpha in (0.05, 0.5):
        test = paired_test(d, n_boot=4000, alpha=alpha)
        z = stats.norm.ppf(1 - alpha / 2)
        assert test.ci_low == pytest.approx(d.mean() - z * half, abs=0.1 * z * half)
        assert test.ci_high == pytest.approx(d.mean() + z * half, abs=0.1 * z * half)
