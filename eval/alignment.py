"""Judge-human alignment per aspect: ICC(A,1), Bland-Altman bias and limits, Pearson r.

Follows the paper's appendix C: the human consensus score (mean over annotators) and the judge
score are two raters of the same stories. ICC(A,1) (two-way random effects, absolute agreement,
single rater) penalises a judge that ranks stories like humans but on a shifted scale, which
Pearson r alone would miss; Bland-Altman gives that shift (bias) and the spread of disagreement.

Usage (`python -m eval.alignment` is an alias):
    review-lab align --ratings ratings.csv [--out alignment.json]

The CSV has columns story_id, aspect, human, judge (one row per story and aspect). The JSON is
{aspect: {"icc_a1", "bias", "loa_low", "loa_high", "pearson_r", "n"}}; a statistic that is
undefined for the data (e.g. Pearson r when one rater gives every story the same score) is null.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from generate.common.cli import run_cli
from generate.common.config import new_parser
from generate.common.errors import UsageError

_COLUMNS = ("story_id", "aspect", "human", "judge")
# 97.5th percentile of the standard normal: 95% of normally distributed differences fall
# within bias ± 1.96 SD.
_Z_975 = 1.96


@dataclass(frozen=True)
class Agreement:
    """Alignment statistics of one aspect; NaN marks a statistic undefined for the data."""

    icc_a1: float
    bias: float
    loa_low: float
    loa_high: float
    pearson_r: float
    n: int


def _pair(human: Sequence[float], judge: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    h = np.asarray(human, dtype=np.float64)
    s = np.asarray(judge, dtype=np.float64)
    if h.ndim != 1 or h.shape != s.shape:
        raise ValueError(f"human and judge must be 1-d of equal length, got {h.shape} and {s.shape}")
    if h.size < 2:
        raise ValueError(f"need at least 2 stories, got {h.size}")
    return h, s


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator != 0 else math.nan


def icc_a1(human: Sequence[float], judge: Sequence[float]) -> float:
    """ICC(A,1): two-way random effects, absolute agreement, single rater (McGraw & Wong).

    Uses the two-way ANOVA mean squares of the N x k score matrix (k = 2 raters):
    rows MS_R, columns MS_C, residual MS_E, and
    ICC = (MS_R - MS_E) / (MS_R + ((N - 1) k - N) / N * MS_E + k / N * MS_C).

    Args:
        human: Human consensus score per story.
        judge: Judge score per story, same order.

    Returns:
        The ICC (1 = perfect agreement; may be negative), NaN if every score is identical.
    """
    x = np.column_stack(_pair(human, judge))
    n, k = x.shape
    grand = x.mean()
    row_means = x.mean(axis=1)
    col_means = x.mean(axis=0)
    ms_rows = k * np.sum((row_means - grand) ** 2) / (n - 1)
    ms_cols = n * np.sum((col_means - grand) ** 2) / (k - 1)
    residual = x - row_means[:, None] - col_means[None, :] + grand
    ms_error = np.sum(residual**2) / ((n - 1) * (k - 1))
    denominator = ms_rows + ((n - 1) * k - n) / n * ms_error + k / n * ms_cols
    return float(_ratio(ms_rows - ms_error, denominator))


def bland_altman(human: Sequence[float], judge: Sequence[float]) -> tuple[float, float, float]:
    """Bland-Altman bias and 95% limits of agreement of judge - human.

    Args:
        human: Human consensus score per story.
        judge: Judge score per story, same order.

    Returns:
        (bias, loa_low, loa_high): mean difference and bias ± 1.96 sample SD (ddof=1).
    """
    h, s = _pair(human, judge)
    diff = s - h
    bias = float(diff.mean())
    spread = _Z_975 * float(diff.std(ddof=1))
    return bias, bias - spread, bias + spread


def pearson_r(human: Sequence[float], judge: Sequence[float]) -> float:
    """Pearson correlation of judge and human scores; NaN if either is constant."""
    h, s = _pair(human, judge)
    hc, sc = h - h.mean(), s - s.mean()
    return float(_ratio(np.sum(hc * sc), math.sqrt(np.sum(hc**2) * np.sum(sc**2))))


def agreement(human: Sequence[float], judge: Sequence[float]) -> Agreement:
    """All alignment statistics of one aspect."""
    bias, low, high = bland_altman(human, judge)
    return Agreement(icc_a1(human, judge), bias, low, high, pearson_r(human, judge), len(human))


def read_ratings(path: str | Path) -> dict[str, tuple[list[float], list[float]]]:
    """Read a ratings CSV into {aspect: (human scores, judge scores)}, aspects in file order.

    Raises:
        UsageError: Missing file or columns, a non-numeric score, a repeated (story_id, aspect),
            or an aspect with fewer than 2 stories.
    """
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"ratings file not found: {path}")
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in _COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise UsageError(f"{path}: missing column(s) {', '.join(missing)}; expected {', '.join(_COLUMNS)}")
        by_aspect: dict[str, tuple[list[float], list[float]]] = {}
        seen: set[tuple[str, str]] = set()
        for row in reader:
            line = reader.line_num
            key = (row["story_id"], row["aspect"])
            if key in seen:
                raise UsageError(f"{path}:{line}: story {key[0]!r} rated twice for aspect {key[1]!r}")
            seen.add(key)
            human, judge = by_aspect.setdefault(row["aspect"], ([], []))
            human.append(_score(row["human"], path, line, "human"))
            judge.append(_score(row["judge"], path, line, "judge"))
    if not by_aspect:
        raise UsageError(f"{path}: no ratings")
    for aspect, (human, _) in by_aspect.items():
        if len(human) < 2:
            raise UsageError(f"{path}: aspect {aspect!r} has {len(human)} story; alignment needs at least 2")
    return by_aspect


def _score(value: str | None, path: Path, line: int, column: str) -> float:
    try:
        score = float(value or "")
    except ValueError:
        raise UsageError(f"{path}:{line}: {column} score {value!r} is not a number") from None
    if not math.isfinite(score):
        raise UsageError(f"{path}:{line}: {column} score {value!r} is not a finite number")
    return score


def alignment_table(ratings: dict[str, tuple[list[float], list[float]]]) -> dict[str, Agreement]:
    """Alignment statistics per aspect, in the order of `ratings`."""
    return {aspect: agreement(human, judge) for aspect, (human, judge) in ratings.items()}


def _json_value(value: float | int) -> float | int | None:
    return None if isinstance(value, float) and math.isnan(value) else value


def _format_table(table: dict[str, Agreement]) -> str:
    width = max(len("aspect"), *(len(a) for a in table))
    header = f"{'aspect':<{width}}  {'n':>4}  {'ICC(A,1)':>8}  {'r':>6}  {'bias':>6}  {'LoA low':>7}  {'LoA high':>8}"
    lines = [header]
    for aspect, a in table.items():
        lines.append(
            f"{aspect:<{width}}  {a.n:>4}  {a.icc_a1:>8.3f}  {a.pearson_r:>6.3f}  {a.bias:>+6.3f}"
            f"  {a.loa_low:>+7.3f}  {a.loa_high:>+8.3f}"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the per-aspect alignment table and optionally write it as JSON."""
    parser = new_parser("review-lab align", __doc__.split("\n\n")[0],
                        "review-lab align --ratings ratings.csv --out alignment.json")
    parser.add_argument("--ratings", required=True, help="CSV with columns story_id,aspect,human,judge")
    parser.add_argument("--out", help="write the table as JSON to this file")
    args = parser.parse_args(argv)

    table = alignment_table(read_ratings(args.ratings))
    print(_format_table(table))
    if args.out:
        out = Path(args.out)
        out.parent.mkdir(parents=True, exist_ok=True)
        payload = {aspect: {k: _json_value(v) for k, v in asdict(a).items()} for aspect, a in table.items()}
        out.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    run_cli(main)
