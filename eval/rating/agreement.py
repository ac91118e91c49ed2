"""Agreement among raters (Krippendorff's alpha) and between people and automatic verdicts.

Krippendorff's alpha = 1 - D_o / D_e: the disagreement observed within stories over the
disagreement expected from the same values paired at random. It copes with raters who did not
rate every story (a story rated by one rater only has nothing to pair and is left out) and takes
a distance: squared difference for scores on an interval scale (likert), 0/1 for categories
(verdicts). Implemented here from Krippendorff (2011), "Computing Krippendorff's alpha-
reliability", with the counts form of the expected disagreement; the tests check it against that
paper's worked example and a hand computation.

A study has tens of stories, so each number comes with a confidence interval: alpha's by a
percentile bootstrap over stories (the unit a new study would sample), an agreement rate's by
Wilson's score interval (scipy), which stays inside [0, 1] and is not degenerate at 0 or 1.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np

from eval.icc import CI_LEVEL  # one default level for every interval of the study

Distance = Callable[[float, float], float]
N_BOOT = 2000  # bootstrap resamples of alpha's interval


def interval(a: float, b: float) -> float:
    return (a - b) ** 2


def nominal(a: float, b: float) -> float:
    return 0.0 if a == b else 1.0


def krippendorff_alpha(units: Iterable[Sequence[float]], distance: Distance) -> float:
    """Alpha over `units` (each: the values the raters gave one story); NaN when undefined.

    Args:
        units: one sequence of values per story, one value per rater who rated it.
        distance: `interval` or `nominal`.

    Returns:
        1 for perfect agreement, 0 for agreement at chance, negative below chance; NaN when no
        story has two values or every value is the same (no disagreement to expect).
    """
    pairable = [list(u) for u in units if len(u) >= 2]
    n = sum(len(u) for u in pairable)
    if n < 2:
        return math.nan
    observed = sum(sum(distance(a, b) for i, a in enumerate(u) for j, b in enumerate(u) if i != j) / (len(u) - 1)
                   for u in pairable) / n
    counts = Counter(v for u in pairable for v in u)
    expected = sum(nc * nk * distance(c, k) for c, nc in counts.items() for k, nk in counts.items()) / (n * (n - 1))
    return math.nan if expected == 0 else 1.0 - observed / expected


def alpha_interval(units: Iterable[Sequence[float]], distance: Distance, level: float = CI_LEVEL,
                   n_boot: int = N_BOOT, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of alpha, resampling the pairable stories with replacement.

    Returns:
        (low, high); NaN bounds with fewer than 2 pairable stories, or when alpha is undefined in
        more than half the resamples (too little disagreement in the data to say anything).
    """
    pairable = [list(u) for u in units if len(u) >= 2]
    if len(pairable) < 2:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(pairable), size=(n_boot, len(pairable)))
    alphas = np.array([krippendorff_alpha([pairable[i] for i in draw], distance) for draw in draws])
    alphas = alphas[~np.isnan(alphas)]
    if alphas.size < n_boot / 2:
        return math.nan, math.nan
    low, high = np.quantile(alphas, [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)


def rate_interval(agree: int, n: int, level: float = CI_LEVEL) -> tuple[float, float]:
    """Wilson score interval of an agreement rate of `agree` out of `n` (scipy's binomtest)."""
    from scipy import stats  # imported here: scipy.stats is slow to import for every CLI start

    ci = stats.binomtest(agree, n).proportion_ci(confidence_level=level, method="wilson")
    return float(ci.low), float(ci.high)


def verdict_agreement(human: Mapping[str, int], automatic: Mapping[str, Mapping[str, int | None]],
                      names: Mapping[str, str]) -> tuple[dict, list[str]]:
    """Share of stories on which each automatic verdict equals the human label.

    Args:
        human: story -> human label (1 excellent, 0 not).
        automatic: story -> {verdict key: 0/1 or None}.
        names: verdict key -> what it is, for every key that could be present.

    Returns:
        ({key: {"name", "rate", "rate_ci", "n"}} for the keys some labelled story has, [one line per
        absent key]); `rate_ci` is the rate's Wilson interval at `CI_LEVEL`.
    """
    rates, absent = {}, []
    for key, name in names.items():
        pairs = [(label, automatic.get(story, {}).get(key)) for story, label in human.items()]
        pairs = [(h, int(a)) for h, a in pairs if a is not None]
        if pairs:
            agree = sum(h == a for h, a in pairs)
            rates[key] = {"name": name, "rate": agree / len(pairs), "rate_ci": rate_interval(agree, len(pairs)),
                          "n": len(pairs)}
        else:
            absent.append(f"{key} ({name}): no per-story value in the runs' scores.jsonl")
    return rates, absent
