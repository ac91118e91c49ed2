"""Multiplicity corrections: against the textbook procedures, on null families, and the Wilcoxon floor."""

from __future__ import annotations

import numpy as np
import pytest

from eval.multiplicity import CORRECTIONS, attainable, benjamini_hochberg, holm, min_wilcoxon_p, prompts_needed
from eval.stats import significant, wilcoxon_p


def holm_step_down(p: np.ndarray, alpha: float) -> set[int]:
    """Holm (1979) as written: reject the smallest p-values while p_(i) <= alpha / (m - i + 1)."""
    rejected = set()
    for i, j in enumerate(np.argsort(p, kind="stable")):
        if p[j] > alpha / (p.size - i):
            break
        rejected.add(int(j))
    return rejected


def bh_step_up(p: np.ndarray, alpha: float) -> set[int]:
    """Benjamini-Hochberg (1995) as written: reject the k smallest, k the largest i with p_(i) <= i alpha / m."""
    order = np.argsort(p, kind="stable")
    passing = [i for i in range(p.size) if p[order[i]] <= (i + 1) * alpha / p.size]
    return {int(j) for j in order[: passing[-1] + 1]} if passing else set()


@pytest.mark.parametrize("adjust, procedure", [(holm, holm_step_down), (benjamini_hochberg, bh_step_up)])
def test_adjusted_p_values_reject_what_the_procedure_rejects(adjust, procedure):
    rng = np.random.default_rng(0)
    for _ in range(300):
        m = int(rng.integers(1, 40))
        # A mix of true effects (small p) and nulls (uniform p), as in a real comparison.
        p = np.where(rng.random(m) < 0.3, rng.random(m) * 0.01, rng.random(m))
        adjusted = adjust(p)
        assert np.all(adjusted >= p - 1e-15) and np.all(adjusted <= 1.0)
        for alpha in (0.01, 0.05, 0.1):
            assert {int(i) for i in np.flatnonzero(adjusted <= alpha)} == procedure(p, alpha)


def test_holm_on_a_worked_example():
    # Sorted 0.005, 0.01, 0.03, 0.04 -> 4*0.005, 3*0.01, 2*0.03, 1*0.04, made non-decreasing.
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5]) == pytest.approx([0.5]) and holm([]).size == 0


def test_without_a_correction_a_null_comparison_finds_winners_and_with_holm_it_does_not():
    # 44 tests (4 runs x 11 metrics) where nothing differs: p-values are uniform.
    families = np.random.default_rng(1).random((4000, 44))
    any_claim = {name: np.mean([np.any(c.adjust(f) < 0.05) for f in families]) for name, c in CORRECTIONS.items()}
    assert any_claim["none"] > 0.85  # 1 - 0.95^44 = 0.90: almost every comparison "finds" something
    assert any_claim["holm"] <= 0.06 and any_claim["bh"] <= 0.06  # with no true effect, FDR = FWER


@pytest.mark.parametrize("n", [2, 3, 5, 8, 12, 20])
def test_the_wilcoxon_floor_is_the_exact_tests_for_small_samples(n):
    assert min_wilcoxon_p(n) == pytest.approx(2 / 2**n)
    assert wilcoxon_p(np.arange(1.0, n + 1)) == pytest.approx(min_wilcoxon_p(n))


def test_above_50_pairs_ties_lower_the_floor():
    # scipy's normal approximation: ties shrink the variance, so equal differences give the lowest p.
    assert min_wilcoxon_p(60) == pytest.approx(wilcoxon_p(np.ones(60)))
    assert min_wilcoxon_p(60) < wilcoxon_p(np.arange(1.0, 61)) / 100


# 8: ties make scipy permute exactly (2^n outcomes); 30: ties make it use the normal approximation.
@pytest.mark.parametrize("n", [5, 8, 30])
def test_the_wilcoxon_floor_is_never_beaten(n):
    floor = min_wilcoxon_p(n)
    rng = np.random.default_rng(n)
    for _ in range(60):  # same-sign, tied, rounded and mixed differences
        d = np.round(rng.normal(rng.choice([0.0, 3.0]), 1.0, size=n), int(rng.integers(0, 3)))
        p = wilcoxon_p(d)
        assert p is None or p >= floor - 1e-12


def test_prompts_needed_is_the_first_sample_whose_floor_passes():
    assert prompts_needed(0.05) == 6  # 2/2^5 = 0.0625, 2/2^6 = 0.031
    threshold = 0.05 / 33
    n = prompts_needed(threshold)
    assert min_wilcoxon_p(n) < threshold <= min_wilcoxon_p(n - 1)


def test_attainable_says_when_no_claim_is_possible():
    eight = attainable(8, 33, "holm", 0.05)
    assert eight["min_p"] == pytest.approx(2 / 2**8) and eight["needed_p"] == pytest.approx(0.05 / 33)
    assert not eight["possible"] and eight["prompts_needed"] == 11
    assert attainable(8, 33, "none", 0.05)["possible"]  # uncorrected, 8 prompts can reach p < 0.05
    assert attainable(8, 1, "holm", 0.05)["possible"]  # one planned test: Holm is no correction
    assert not attainable(1, 5, "holm", 0.05)["possible"]  # one pair: no test at all


def test_a_p_value_equal_to_the_threshold_is_no_claim_and_attainable_agrees():
    """`significant` calls p < alpha, so a floor equal to the threshold cannot pass: on 5 pairs the exact
    Wilcoxon floor is 2/2^5 = 0.0625 (exact in binary), and with alpha = 0.0625 neither one uncorrected
    test nor Holm over two at alpha = 0.125 (alpha / m = 0.0625) is attainable; 6 pairs (0.03125) are."""
    assert min_wilcoxon_p(5) == 0.0625
    assert not significant(0.1, 0.2, 0.0625, 0.0625)
    assert significant(0.1, 0.2, 0.0624, 0.0625)
    for tests, correction, alpha in ((1, "none", 0.0625), (2, "holm", 0.125)):
        power = attainable(5, tests, correction, alpha)
        assert power["needed_p"] == 0.0625 and not power["possible"] and power["prompts_needed"] == 6
        assert attainable(6, tests, correction, alpha)["possible"]
    assert prompts_needed(0.0625) == 6 and prompts_needed(0.0625 + 1e-12) == 5


@pytest.mark.parametrize("correction", sorted(CORRECTIONS))
def test_attainable_agrees_with_what_the_correction_does_to_the_floor(correction):
    """`possible` is a shortcut for: a family of m tests that all reach the Wilcoxon floor, adjusted
    by the correction itself, has an adjusted p below alpha (BH leaves m equal p-values as they are;
    Holm multiplies the smallest by m)."""
    for n in (5, 8, 12, 20):
        floor = min_wilcoxon_p(n)
        for m in (1, 3, 11, 33):
            adjusted = min(CORRECTIONS[correction].adjust([floor] * m))
            assert attainable(n, m, correction, 0.05)["possible"] == (adjusted < 0.05), (n, m)
