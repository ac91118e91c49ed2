"""Paired statistics for comparing two runs on the same prompts: bootstrap CI and Wilcoxon test.

Runs are compared on per-prompt differences (run minus base, same prompt). Prompts differ far more
in difficulty than runs differ in quality, so pairing removes the between-prompt variance that
would otherwise swamp a small gain. Two complementary answers are given per comparison:

- a percentile bootstrap CI of the mean difference, resampling prompts with replacement: no
  normality assumption, and the interval is on the metric's own scale;
- a Wilcoxon signed-rank p-value: robust to a few extreme prompts, which judge scores on a 0-5
  scale and heavy-tailed novelty metrics both produce.

A gain is called significant only when both agree: the CI excludes 0 and the p-value, adjusted
for the other tests of the same comparison (`eval.multiplicity`), is below alpha.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# Bound on resampled indices held in memory at once (B x n int64 values, ~16 MB).
_MAX_BLOCK_VALUES = 2_000_000
# Paired differences are rounded to this share of the largest value compared (`paired_differences`).
_DIFF_RESOLUTION = 1e-12


@dataclass(frozen=True)
class Summary:
    """Mean, sample standard deviation (ddof=1), standard error of the mean and count; std and se
    are None below 2 values (se also below 2 clusters), mean None if empty.

    Both spreads are kept because they answer different questions: std how much stories vary,
    se how precisely the mean is known (papers' "±" is often the latter, unlabelled). The se is
    clustered by prompt where the stories' prompts are given (`n_clusters` of them): a
    multi-agent run writes several stories per prompt, which share the prompt's difficulty, so
    std / sqrt(stories) would claim a precision that only more prompts can buy.
    """

    mean: float | None
    std: float | None
    se: float | None
    n: int
    n_clusters: int | None = None


@dataclass(frozen=True)
class PairedTest:
    """Mean paired difference with its bootstrap CI and raw Wilcoxon p-value. No significance
    call: that needs the comparison's other tests (`eval.multiplicity`)."""

    gain: float
    ci_low: float
    ci_high: float
    p_value: float | None
    n_pairs: int


def significant(ci_low: float, ci_high: float, p_adjusted: float | None, alpha: float) -> bool:
    """The significance call: the CI excludes 0 and the adjusted p-value is below alpha."""
    return (ci_low > 0 or ci_high < 0) and p_adjusted is not None and p_adjusted < alpha


def summarize(values: Sequence[float | None], clusters: Sequence[str] | None = None) -> Summary:
    """Mean, std and standard error of `values` (non-finite values dropped), with their count.

    Args:
        values: One value per story.
        clusters: The prompt of each value, same order. The se is then the cluster-robust (CR1)
            standard error of the mean, sqrt(G / (G - 1) * sum over prompts of (sum of the
            prompt's residuals)^2) / n with G prompts: with k stories on every prompt it is the
            std of the prompt means over sqrt(G), and with one story per prompt std / sqrt(n).
    """
    keep = [i for i, v in enumerate(values) if v is not None and math.isfinite(v)]
    x = np.asarray([values[i] for i in keep], dtype=np.float64)
    groups = None if clusters is None else [clusters[i] for i in keep]
    n_clusters = None if groups is None else len(set(groups))
    if x.size == 0:
        return Summary(None, None, None, 0, n_clusters)
    mean = float(np.mean(x))
    std = float(np.std(x, ddof=1)) if x.size >= 2 else None
    if groups is None or n_clusters == x.size:  # independent stories: the plain formula
        se = std / math.sqrt(x.size) if std is not None else None
    elif n_clusters < 2:
        se = None  # one prompt: nothing says how the mean would move on others
    else:
        sums: dict[str, float] = {}
        for g, r in zip(groups, x - mean):
            sums[g] = sums.get(g, 0.0) + float(r)
        se = math.sqrt(n_clusters / (n_clusters - 1) * sum(t * t for t in sums.values())) / x.size
    return Summary(mean, std, se, int(x.size), n_clusters)


def paired_differences(run: Sequence[float], base: Sequence[float]) -> np.ndarray:
    """run - base, pair by pair, rounded to a grid of about `_DIFF_RESOLUTION` times the largest |value|.

    The values are per-prompt means, whose float rounding depends on how each was summed: a prompt
    whose three stories average exactly its base score differs by -2e-16 (mean of 4.3, 4.4, 4.5
    minus 4.4), and two equal gains differ in their last bits. The Wilcoxon test ranks |d|, so
    unrounded, such noise counts as a loss of rank 1 (eight such prompts give p = 0.0078 and a CI
    excluding 0) and breaks ties; on the grid an equal prompt differs by exactly 0, which the test
    drops, and equal gains tie.
    """
    r, b = np.asarray(run, dtype=np.float64), np.asarray(base, dtype=np.float64)
    if r.shape != b.shape or r.ndim != 1:
        raise ValueError(f"run and base must be 1-d and of one length, got shapes {r.shape} and {b.shape}")
    scale = _DIFF_RESOLUTION * float(np.max(np.abs(np.concatenate([r, b])), initial=0.0))
    if scale == 0 or not math.isfinite(scale):
        return r - b
    step = 2.0 ** math.floor(math.log2(scale))  # a power of two: a difference on the grid (0.5) stays exact
    return np.rint((r - b) / step) * step


def paired_bootstrap_ci(
    diffs: Sequence[float], n_boot: int = 10_000, alpha: float = 0.05, seed: int = 0
) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean of paired differences.

    Each resample draws n prompts with replacement and averages their differences; resampling
    whole prompts keeps each (run, base) pair together, which is what makes the CI paired.

    Args:
        diffs: One difference per prompt (run minus base); at least one.
        n_boot: Number of bootstrap resamples.
        alpha: 1 - confidence level; the CI is the [alpha/2, 1 - alpha/2] percentile interval.
        seed: Seed of the resampling, so a table can be reproduced exactly.

    Returns:
        (low, high) bounds of the CI.
    """
    d = np.asarray(diffs, dtype=np.float64)
    if d.ndim != 1 or d.size == 0:
        raise ValueError(f"diffs must be a non-empty 1-d sequence, got shape {d.shape}")
    if n_boot < 1 or not 0 < alpha < 1:
        raise ValueError(f"need n_boot >= 1 and 0 < alpha < 1, got {n_boot} and {alpha}")
    rng = np.random.default_rng(seed)
    block = max(1, _MAX_BLOCK_VALUES // d.size)
    means = np.concatenate([
        d[rng.integers(0, d.size, size=(min(block, n_boot - start), d.size))].mean(axis=1)
        for start in range(0, n_boot, block)
    ])
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def wilcoxon_p(diffs: Sequence[float]) -> float | None:
    """Two-sided Wilcoxon signed-rank p-value of paired differences.

    Returns:
        The p-value; 1.0 when every difference is zero (no evidence of any difference, where
        scipy would divide by zero); None with fewer than 2 pairs (no test is possible).
    """
    d = np.asarray(diffs, dtype=np.float64)
    if d.size < 2:
        return None
    if not np.any(d):
        return 1.0
    # Imported here: scipy.stats takes seconds to import, which every CLI run (even one that
    # fails on a bad argument) would otherwise pay before doing anything.
    from scipy import stats

    with warnings.catch_warnings():
        # scipy warns that the normal approximation is rough for tiny samples; the p-value is
        # still the right one to report, and the CI carries the rest of the evidence.
        warnings.simplefilter("ignore", UserWarning)
        p = float(stats.wilcoxon(d).pvalue)
    return None if math.isnan(p) else p


def paired_test(diffs: Sequence[float], n_boot: int = 10_000, alpha: float = 0.05, seed: int = 0) -> PairedTest:
    """Mean paired difference, its bootstrap CI and Wilcoxon p.

    Args:
        diffs: One difference per prompt (run minus base, from `paired_differences`); at least one.
        n_boot: Bootstrap resamples.
        alpha: Significance level; the CI has level 1 - alpha.
        seed: Bootstrap seed.
    """
    low, high = paired_bootstrap_ci(diffs, n_boot=n_boot, alpha=alpha, seed=seed)
    return PairedTest(float(np.mean(diffs)), low, high, wilcoxon_p(diffs), len(diffs))
