"""Agreement among raters (Krippendorff's alpha) and between people and automatic verdicts.

Krippendorff's alpha = 1 - D_o / D_e: the disagreement observed within stories over the
disagreement expected from the same values paired at random. It copes with raters who did not
rate every story (a story rated by one rater only has nothing to pair and is left out) and takes
a distance: squared difference for scores on an interval scale (likert), 0/1 for categories
(verdicts). Implemented here from Krippendorff (2011), "Computing Krippendorff's alpha-
reliability", with the counts form of the expected disagreement; the tests check it against that
paper's worked example and a hand computation.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence

Distance = Callable[[float, float], float]


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


def verdict_agreement(human: Mapping[str, int], automatic: Mapping[str, Mapping[str, int | None]],
                      names: Mapping[str, str]) -> tuple[dict, list[str]]:
    """Share of stories on which each automatic verdict equals the human label.

    Args:
        human: story -> human label (1 excellent, 0 not).
        automatic: story -> {verdict key: 0/1 or None}.
        names: verdict key -> what it is, for every key that could be present.

    Returns:
        ({key: {"name", "rate", "n"}} for the keys some labelled story has, [one line per absent key]).
    """
    rates, absent = {}, []
    for key, name in names.items():
        pairs = [(label, automatic.get(story, {}).get(key)) for story, label in human.items()]
        pairs = [(h, int(a)) for h, a in pairs if a is not None]
        if pairs:
            rates[key] = {"name": name, "rate": sum(h == a for h, a in pairs) / len(pairs), "n": len(pairs)}
        else:
            absent.append(f"{key} ({name}): no per-story value in the runs' scores.jsonl")
    return rates, absent
