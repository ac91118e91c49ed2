"""Corrections for multiplicity: one comparison runs many paired tests at once.

`review-lab compare` tests every run against the baseline on every metric: 4 runs x 11 metrics
are 44 tests, and at alpha = 0.05 about two of them come out "significant" by chance alone when
nothing differs. The verdict names winners, so the p-values of the whole comparison (its family)
are adjusted before anything is called significant:

- `holm` (the default): Holm's step-down, which keeps the chance of *any* false "significant" in
  the comparison (the family-wise error) at alpha; uniformly more powerful than Bonferroni.
- `bh`: Benjamini-Hochberg (scipy's `false_discovery_control`), which keeps the expected share of
  false claims among those made at alpha: more power, a weaker promise.
- `none`: each test on its own, right only for a single comparison planned in advance.

The family is every test of one comparison; `--metrics` narrows it to the claims one planned.

A small sample can rule significance out before any data is seen: on n pairs the Wilcoxon test
cannot give a p-value below `min_wilcoxon_p(n)` (2 / 2^n up to 50 pairs; lower with ties beyond,
where scipy uses the normal approximation), so with 8 prompts and 30 tests Holm can call nothing
significant. `attainable` says so, and how many prompts would be needed, so that "no significant
difference" is not read as evidence.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from eval.stats import wilcoxon_p

# Beyond this many pairs the search for the prompts needed stops (the floor is ~1e-300 by then).
_MAX_PAIRS = 1000


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm-adjusted p-values: the i-th smallest is max over j <= i of (m - j + 1) p_(j), capped at 1.

    Rejecting where the adjusted value is below alpha is Holm's step-down procedure (Holm 1979).
    """
    p = np.asarray(p_values, dtype=np.float64)
    order = np.argsort(p, kind="stable")
    steps = (p.size - np.arange(p.size)) * p[order]
    adjusted = np.empty_like(p)
    adjusted[order] = np.minimum(1.0, np.maximum.accumulate(steps))
    return adjusted


def benjamini_hochberg(p_values: Sequence[float]) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (scipy's implementation)."""
    from scipy import stats  # imported here: scipy.stats is slow to import for every CLI start

    return stats.false_discovery_control(np.asarray(p_values, dtype=np.float64), method="bh")


@dataclass(frozen=True)
class Correction:
    """A multiplicity correction: how it adjusts a family's p-values, what it promises, and the
    largest raw p-value it can ever call significant among m tests (`entry(alpha, m)`), which
    decides whether a sample is large enough for any claim at all."""

    adjust: Callable[[Sequence[float]], np.ndarray]
    label: str
    promise: str
    entry: Callable[[float, int], float]


CORRECTIONS: dict[str, Correction] = {
    # Holm rejects nothing unless the smallest p is below alpha / m.
    "holm": Correction(holm, "Holm", "family-wise error <= alpha", lambda alpha, m: alpha / m),
    # BH rejects all m tests when every p is below alpha, and nothing above it.
    "bh": Correction(benjamini_hochberg, "Benjamini-Hochberg", "false discovery rate <= alpha",
                     lambda alpha, m: alpha),
    "none": Correction(lambda p: np.asarray(p, dtype=np.float64), "uncorrected", "each test on its own",
                       lambda alpha, m: alpha),
}


@lru_cache(maxsize=None)
def min_wilcoxon_p(n: int) -> float | None:
    """The smallest p-value the Wilcoxon signed-rank test can give on n pairs (None below 2).

    Reached when every difference has the same sign: with distinct values the exact test gives
    2 / 2^n; with every value tied scipy uses a permutation test (same floor) up to 13 pairs and
    the normal approximation with the tie correction beyond, lower than the exact test's floor
    above 50 pairs. Both are asked of the test itself (`eval.stats.wilcoxon_p`), so
    the floor follows whatever method scipy picks. Zero differences are dropped by the test, so
    they only raise the floor.
    """
    ranks = wilcoxon_p(np.arange(1.0, n + 1))
    tied = wilcoxon_p(np.ones(n))
    return None if ranks is None or tied is None else min(ranks, tied)


def prompts_needed(threshold: float) -> int | None:
    """The fewest pairs on which the Wilcoxon test can give p < `threshold` (None: over 1000)."""
    return next((n for n in range(2, _MAX_PAIRS + 1) if (floor := min_wilcoxon_p(n)) is not None and floor < threshold),
                None)


def attainable(n_pairs: int, tests: int, correction: str, alpha: float) -> dict[str, object]:
    """Whether any of `tests` Wilcoxon tests on at most `n_pairs` pairs can be called significant.

    Returns:
        `tests`, `max_pairs`, `min_p` (the test's floor on `n_pairs`), `needed_p` (the raw p the
        correction needs at least), `possible` and `prompts_needed` (pairs for the floor to pass).
    """
    needed = CORRECTIONS[correction].entry(alpha, max(tests, 1))
    floor = min_wilcoxon_p(n_pairs) if n_pairs >= 2 else None
    return {"tests": tests, "max_pairs": n_pairs, "min_p": floor, "needed_p": needed,
            "possible": floor is not None and floor < needed, "prompts_needed": prompts_needed(needed)}
