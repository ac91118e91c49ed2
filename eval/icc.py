"""ICC(A,1) and its confidence interval from a two-way ANOVA of an n targets x k raters matrix.

A module of its own, apart from `eval.alignment` (which pairs the judge with the human consensus,
k = 2), because the estimate and its McGraw & Wong interval are functions of the mean squares
alone, for any k: that is how they are checked against Shrout & Fleiss's 6 x 4 table.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

# Confidence level of every interval unless a caller passes another.
CI_LEVEL = 0.95
NO_INTERVAL = (math.nan, math.nan)


class MeanSquares(NamedTuple):
    """Two-way ANOVA mean squares of an n targets x k raters matrix, one score per cell."""

    rows: float  # MS_R, between targets (stories)
    cols: float  # MS_C, between raters
    error: float  # MS_E, residual
    n: int
    k: int


def check_level(level: float) -> float:
    """A confidence level strictly between 0 and 1 (0.95, not 95)."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"confidence level must lie strictly between 0 and 1, got {level}")
    return float(level)


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator != 0 else math.nan


def mean_squares(scores: np.ndarray | Sequence[Sequence[float]]) -> MeanSquares:
    """MS_R, MS_C and MS_E of a two-way ANOVA without replication.

    The ICC(A,1) point estimate and its interval are both functions of these mean squares and of
    n and k only, so they are computed once here, for any number of raters k.

    Args:
        scores: n x k matrix, one row per target (story), one column per rater; n, k >= 2.
    """
    x = np.asarray(scores, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] < 2 or x.shape[1] < 2:
        raise ValueError(f"need an n x k score matrix with n, k >= 2, got shape {x.shape}")
    n, k = x.shape
    grand = x.mean()
    row_means = x.mean(axis=1)
    col_means = x.mean(axis=0)
    residual = x - row_means[:, None] - col_means[None, :] + grand
    return MeanSquares(
        rows=float(k * np.sum((row_means - grand) ** 2) / (n - 1)),
        cols=float(n * np.sum((col_means - grand) ** 2) / (k - 1)),
        error=float(np.sum(residual**2) / ((n - 1) * (k - 1))),
        n=n,
        k=k,
    )


def icc_from_mean_squares(ms: MeanSquares) -> float:
    """ICC(A,1) (McGraw & Wong 1996, case 2A; Shrout & Fleiss's ICC(2,1)) from the mean squares.

    ICC = (MS_R - MS_E) / (MS_R + ((n - 1) k - n) / n * MS_E + k / n * MS_C); NaN when every
    score is identical (all mean squares 0).
    """
    n, k = ms.n, ms.k
    denominator = ms.rows + ((n - 1) * k - n) / n * ms.error + k / n * ms.cols
    return _ratio(ms.rows - ms.error, denominator)


def icc_interval(ms: MeanSquares, level: float = CI_LEVEL) -> tuple[float, float]:
    """Confidence interval of ICC(A,1): McGraw & Wong (1996), Table 7, case 2A / 3A, single measure.

    The interval psych::ICC, irr::icc and pingouin report. With the point estimate p,
    a = k p / (n (1 - p)) and b = 1 + k p (n - 1) / (n (1 - p)), Satterthwaite's degrees of freedom
    v = (a MS_C + b MS_E)^2 / ((a MS_C)^2 / (k - 1) + (b MS_E)^2 / ((n - 1)(k - 1))), and the upper
    quantiles F* = F(1 - alpha/2; n - 1, v), F_* = F(1 - alpha/2; v, n - 1) (alpha = 1 - level):
        low  = n (MS_R - F* MS_E) / (F* (k MS_C + (k n - k - n) MS_E) + n MS_R)
        high = n (F_* MS_R - MS_E) / (k MS_C + (k n - k - n) MS_E + n F_* MS_R)

    Returns:
        (low, high); NaN where the estimate is undefined (every score identical), v is not a
        positive number, or the interval misses the estimate; (1, 1) for perfect agreement
        (MS_E = MS_C = 0), where both bounds are 1 for any quantile: no sampling error is left.
    """
    from scipy import stats  # imported where used: scipy.stats is slow to import for every CLI start

    level = check_level(level)
    icc = icc_from_mean_squares(ms)
    if math.isnan(icc):
        return NO_INTERVAL
    if icc >= 1.0:
        return (1.0, 1.0)
    n, k = ms.n, ms.k
    a = k * icc / (n * (1 - icc))
    b = 1 + k * icc * (n - 1) / (n * (1 - icc))
    spread = (a * ms.cols) ** 2 / (k - 1) + (b * ms.error) ** 2 / ((n - 1) * (k - 1))
    v = _ratio((a * ms.cols + b * ms.error) ** 2, spread)
    if not (math.isfinite(v) and v > 0):
        return NO_INTERVAL
    upper_tail = 1 - (1 - level) / 2
    f_star = float(stats.f.ppf(upper_tail, n - 1, v))
    f_sub = float(stats.f.ppf(upper_tail, v, n - 1))
    raters = k * ms.cols + (k * n - k - n) * ms.error
    low = _ratio(n * (ms.rows - f_star * ms.error), f_star * raters + n * ms.rows)
    high = _ratio(n * (f_sub * ms.rows - ms.error), raters + n * f_sub * ms.rows)
    # Satterthwaite's approximation assumes a, b >= 0; with a negative estimate on a handful of
    # stories it can fail so badly that the interval misses the estimate (the bare formula, with no
    # such check, prints it). Such an interval says nothing: report none.
    return (low, high) if low <= icc <= high else NO_INTERVAL
