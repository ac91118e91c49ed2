"""How well a Detector separates good from bad responses: the paper's Table 4 numbers plus AUC.

"Positive" is a good response (label 1), as the Detector's reward is P(good): precision is the
share of responses called good that are good, recall the share of good responses called good.
A verdict counts as "good" at P(good) >= 0.5. AUC needs no threshold: it is the probability that
a random good response gets a higher P(good) than a random bad one (ties count half), so it shows
whether a weak Detector's scores carry any signal even when they all sit on one side of 0.5.
Undefined values (no response called good: precision; one class only: recall or AUC) are None,
never 0; F1 is 2 TP / (2 TP + FP + FN), 0 when good responses exist and none is called good (a
Detector that calls everything bad finds nothing: leaving such resamples out of F1's bootstrap
interval would lift it), None only without any good response or "good" verdict. Responses
without a verdict (the Detector failed) are counted as `missing` and left out.
"""

from __future__ import annotations

from eval.scorers.principles.detector import THRESHOLD


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


def binary_metrics(labels: list[int], scores: list[float | None], threshold: float = THRESHOLD) -> dict:
    """Accuracy, precision, recall, F1, AUC and the confusion counts of `scores` against `labels`."""
    pairs = [(int(y), float(s)) for y, s in zip(labels, scores, strict=True) if s is not None]
    tp = sum(1 for y, s in pairs if y == 1 and s >= threshold)
    fp = sum(1 for y, s in pairs if y == 0 and s >= threshold)
    fn = sum(1 for y, s in pairs if y == 1 and s < threshold)
    tn = sum(1 for y, s in pairs if y == 0 and s < threshold)
    precision, recall = _ratio(tp, tp + fp), _ratio(tp, tp + fn)
    return {"n": len(pairs), "missing": len(labels) - len(pairs), "accuracy": _ratio(tp + tn, len(pairs)),
            "precision": precision, "recall": recall, "f1": f1_score(tp, fp, fn), "auc": auc(pairs),
            "tp": tp, "fp": fp, "tn": tn, "fn": fn,
            "mean_p_good": {"good": _mean([s for y, s in pairs if y == 1]), "bad": _mean([s for y, s in pairs if y == 0])}}


def f1_score(tp: int, fp: int, fn: int) -> float | None:
    """2 TP / (2 TP + FP + FN): 0 for a Detector that calls no good response good (every good one
    is a miss), None only with no good response and none called good (nothing to find)."""
    return _ratio(2 * tp, 2 * tp + fp + fn)


def auc(pairs: list[tuple[int, float]]) -> float | None:
    """P(score of a random good > score of a random bad), ties half (Mann-Whitney U / n1 n0)."""
    good = [s for y, s in pairs if y == 1]
    bad = [s for y, s in pairs if y == 0]
    if not good or not bad:
        return None
    wins = sum(1.0 if g > b else 0.5 if g == b else 0.0 for g in good for b in bad)
    return wins / (len(good) * len(bad))


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None
