"""Judge-human alignment per aspect: ICC(A,1), Bland-Altman bias and limits, Pearson r, with intervals.

Follows the paper's appendix C: the human consensus score (mean over annotators) and the judge
score are two raters of the same stories. ICC(A,1) (two-way random effects, absolute agreement,
single rater) penalises a judge that ranks stories like humans but on a shifted scale, which
Pearson r alone would miss; Bland-Altman gives that shift (bias) and the spread of disagreement.
With 20-50 stories per aspect these estimates are uncertain, so each comes with a confidence
interval (95% by default, `--level`): ICC(A,1) McGraw & Wong's, Pearson r Fisher z's, the bias
and each limit of agreement a t interval (Bland & Altman 1999).

Usage (`python -m eval.alignment` is an alias):
    review-lab align --ratings ratings.csv [--out alignment.json] [--level 0.95]

The CSV has columns story_id, aspect, human, judge (one row per story and aspect). Beside the
JSON, `<name>_bland_altman.png` plots each aspect's differences with the bias and limits
(`eval/alignment_plot.py`), and `<name>.manifest.json` records how both were made (the ratings
file's hash, the level). The
JSON is {aspect: {"icc_a1", "bias", "loa_low", "loa_high", "pearson_r", "n", "icc_a1_ci",
"pearson_r_ci", "bias_ci", "loa_low_ci", "loa_high_ci", "ci_level"}}: each `*_ci` is the [low, high]
confidence interval of its statistic at level `ci_level`. A statistic or bound that is undefined for
the data is null: Pearson r and its interval when one rater gives every story the same score,
ICC(A,1) and its interval when every score is identical, Pearson r's interval with 3 stories or
fewer, and every statistic of an aspect with a single story (its `n` says so).
"""

from __future__ import annotations

import csv
import io
import json
import math
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from eval.alignment_plot import plot_bland_altman
from eval.icc import CI_LEVEL, NO_INTERVAL, check_level, icc_from_mean_squares, icc_interval, mean_squares
from generate.common.cli import run_cli
from generate.common.config import new_parser
from generate.common.errors import UsageError
from generate.common.files import make_dir
from generate.common.inputs import read_text
from generate.common.manifest import sha256_bytes, write_manifest
from generate.common.ranges import FRACTION, ranged

_COLUMNS = ("story_id", "aspect", "human", "judge")
# 97.5th percentile of the standard normal: 95% of normally distributed differences fall
# within bias ± 1.96 SD. The limits of agreement stay 95% limits whatever CI_LEVEL is.
_Z_975 = 1.96


@dataclass(frozen=True)
class Agreement:
    """Alignment statistics of one aspect; NaN marks a statistic or bound undefined for the data.

    Each `*_ci` is the (low, high) confidence interval of the statistic it names, at `ci_level`.
    They default to NaN so that code building an `Agreement` from point estimates alone still works.
    """

    icc_a1: float
    bias: float
    loa_low: float
    loa_high: float
    pearson_r: float
    n: int
    icc_a1_ci: tuple[float, float] = NO_INTERVAL
    pearson_r_ci: tuple[float, float] = NO_INTERVAL
    bias_ci: tuple[float, float] = NO_INTERVAL
    loa_low_ci: tuple[float, float] = NO_INTERVAL
    loa_high_ci: tuple[float, float] = NO_INTERVAL
    ci_level: float = CI_LEVEL


def _pair(human: Sequence[float], judge: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    h = np.asarray(human, dtype=np.float64)
    s = np.asarray(judge, dtype=np.float64)
    if h.ndim != 1 or h.shape != s.shape:
        raise ValueError(f"human and judge must be 1-d of equal length, got {h.shape} and {s.shape}")
    if h.size < 2:
        raise ValueError(f"need at least 2 stories, got {h.size}")
    return h, s


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
    return icc_from_mean_squares(mean_squares(np.column_stack(_pair(human, judge))))


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


def bland_altman_intervals(
    human: Sequence[float], judge: Sequence[float], level: float = CI_LEVEL
) -> tuple[tuple[float, float], tuple[float, float], tuple[float, float]]:
    """Confidence intervals of the Bland-Altman bias and of each 95% limit of agreement.

    The bias is a mean of n differences: bias ± t s / sqrt(n), t the (1 + level) / 2 quantile of
    Student's t with n - 1 df. Each limit (bias ± 1.96 s) has standard error approximately
    sqrt(3 s^2 / n) (Bland & Altman 1999, "Measuring agreement in method comparison studies",
    Stat Methods Med Res 8:135-160; first in their 1986 Lancet paper): limit ± t sqrt(3 s^2 / n).
    s = 0 (every difference equal) gives zero-width intervals.

    Returns:
        (bias_ci, loa_low_ci, loa_high_ci), each (low, high).
    """
    from scipy import stats

    level = check_level(level)
    bias, loa_low, loa_high = bland_altman(human, judge)
    h, s = _pair(human, judge)
    n = h.size
    sd = float((s - h).std(ddof=1))
    t = float(stats.t.ppf(1 - (1 - level) / 2, n - 1))
    bias_half = t * sd / math.sqrt(n)
    loa_half = t * math.sqrt(3 * sd**2 / n)
    return (
        (bias - bias_half, bias + bias_half),
        (loa_low - loa_half, loa_low + loa_half),
        (loa_high - loa_half, loa_high + loa_half),
    )


def _pearson(human: Sequence[float], judge: Sequence[float]):
    """scipy's Pearson result, quiet on a constant rater (r is NaN there, which is the answer)."""
    from scipy import stats

    h, s = _pair(human, judge)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", stats.ConstantInputWarning)
        return stats.pearsonr(h, s)


def pearson_r(human: Sequence[float], judge: Sequence[float]) -> float:
    """Pearson correlation of judge and human scores; NaN if either is constant."""
    return float(_pearson(human, judge).statistic)


def pearson_interval(
    human: Sequence[float], judge: Sequence[float], level: float = CI_LEVEL
) -> tuple[float, float]:
    """Confidence interval of Pearson r by Fisher's z (scipy's `confidence_interval`).

    Fisher z has standard error 1 / sqrt(n - 3), undefined for n <= 3, where scipy reports the
    whole range [-1, 1] instead; that is no interval, so it is NaN here, as it is when r is.
    """
    level = check_level(level)
    result = _pearson(human, judge)
    if math.isnan(result.statistic) or len(human) <= 3:
        return NO_INTERVAL
    ci = result.confidence_interval(confidence_level=level)
    return (float(ci.low), float(ci.high))


def agreement(human: Sequence[float], judge: Sequence[float], level: float = CI_LEVEL) -> Agreement:
    """All alignment statistics of one aspect, with their confidence intervals at `level`."""
    level = check_level(level)
    bias, low, high = bland_altman(human, judge)
    bias_ci, low_ci, high_ci = bland_altman_intervals(human, judge, level)
    ms = mean_squares(np.column_stack(_pair(human, judge)))
    return Agreement(
        icc_a1=icc_from_mean_squares(ms), bias=bias, loa_low=low, loa_high=high,
        pearson_r=pearson_r(human, judge), n=len(human),
        icc_a1_ci=icc_interval(ms, level), pearson_r_ci=pearson_interval(human, judge, level),
        bias_ci=bias_ci, loa_low_ci=low_ci, loa_high_ci=high_ci, ci_level=level,
    )


def read_ratings(path: str | Path) -> dict[str, tuple[list[float], list[float]]]:
    """Read a ratings CSV into {aspect: (human scores, judge scores)}, aspects in file order.

    An aspect with a single story is kept: its statistics are undefined (`agreement`), not an error.

    Raises:
        UsageError: Missing file or columns, a non-numeric or non-finite score, a repeated
            (story_id, aspect), or no row at all.
    """
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"ratings file not found: {path}")
    with io.StringIO(read_text(path, "ratings file"), newline="") as fh:
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
            human.append(parse_score(row["human"], path, line, "human"))
            judge.append(parse_score(row["judge"], path, line, "judge"))
    if not by_aspect:
        raise UsageError(f"{path}: no ratings")
    return by_aspect


def parse_score(value: str | None, path: str | Path, line: int, column: str) -> float:
    """A score cell of a ratings CSV as a finite number (`review-lab align`, `review-lab view --human`).

    Raises:
        UsageError: an empty, non-numeric or non-finite cell, naming the file, line and column.
    """
    try:
        score = float(value or "")
    except ValueError:
        raise UsageError(f"{path}:{line}: {column} score {value!r} is not a number") from None
    if not math.isfinite(score):
        raise UsageError(f"{path}:{line}: {column} score {value!r} is not a finite number")
    return score


def alignment_table(
    ratings: dict[str, tuple[list[float], list[float]]], level: float = CI_LEVEL
) -> dict[str, Agreement]:
    """Alignment statistics per aspect, in the order of `ratings`, with intervals at `level`.

    An aspect with fewer than 2 stories has none defined: every statistic is NaN and its `n` says
    why, so one sparsely judged aspect leaves the others' statistics standing.
    """
    level = check_level(level)
    return {aspect: agreement(human, judge, level) if len(human) >= 2 else
            Agreement(math.nan, math.nan, math.nan, math.nan, math.nan, n=len(human), ci_level=level)
            for aspect, (human, judge) in ratings.items()}


def _json_value(value: float | int | tuple) -> float | int | list | None:
    """NaN (undefined) as JSON null; an interval as a [low, high] list."""
    if isinstance(value, tuple):
        return [_json_value(v) for v in value]
    return None if isinstance(value, float) and math.isnan(value) else value


def _estimate(value: float, interval: tuple[float, float], sign: str = "") -> str:
    """`0.41 [0.12, 0.64]`: two decimals, as many as intervals this wide support; n/a if undefined."""
    def num(x: float) -> str:
        return "n/a" if math.isnan(x) else f"{x:{sign}.2f}"

    if math.isnan(value):
        return "n/a"
    bounds = "n/a" if any(math.isnan(b) for b in interval) else f"{num(interval[0])}, {num(interval[1])}"
    return f"{num(value)} [{bounds}]"


def _format_table(table: dict[str, Agreement]) -> str:
    """Two blocks of about 80 columns, agreement (ICC, r) then Bland-Altman (bias, limits), since
    five estimates with intervals side by side would not fit a terminal."""
    level = next(iter(table.values())).ci_level if table else CI_LEVEL
    width = max(len("aspect"), *(len(a) for a in table))
    blocks = (
        (("ICC(A,1)", "Pearson r"), lambda a: (_estimate(a.icc_a1, a.icc_a1_ci),
                                               _estimate(a.pearson_r, a.pearson_r_ci))),
        (("bias", "LoA low", "LoA high"), lambda a: (_estimate(a.bias, a.bias_ci, "+"),
                                                     _estimate(a.loa_low, a.loa_low_ci, "+"),
                                                     _estimate(a.loa_high, a.loa_high_ci, "+"))),
    )
    lines = [f"{level * 100:g}% confidence intervals in brackets; bias and 95% limits of agreement (LoA) "
             "of judge - human"]
    for titles, cells in blocks:
        rows = [(aspect, str(a.n), *cells(a)) for aspect, a in table.items()]
        widths = [width, 4, *(max(len(t), *(len(r[i + 2]) for r in rows)) for i, t in enumerate(titles))]
        lines.append("")
        for row in [("aspect", "n", *titles), *rows]:
            padded = [f"{row[0]:<{widths[0]}}", f"{row[1]:>{widths[1]}}"]
            padded += [f"{c:<{w}}" for c, w in zip(row[2:], widths[2:], strict=True)]
            lines.append("  ".join(padded).rstrip())
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Print the per-aspect alignment table and optionally write it as JSON."""
    parser = new_parser("review-lab align", __doc__.split("\n\n")[0],
                        "review-lab align --ratings ratings.csv --out alignment.json")
    parser.add_argument("--ratings", required=True, help="CSV with columns story_id,aspect,human,judge")
    parser.add_argument("--out", help="write the table as JSON to this file, and the Bland-Altman plot beside it")
    parser.add_argument("--level", type=ranged(float, FRACTION), default=CI_LEVEL,
                        help=f"confidence level of the intervals ({FRACTION}; default {CI_LEVEL})")
    args = parser.parse_args(argv)

    ratings = read_ratings(args.ratings)
    table = alignment_table(ratings, args.level)
    print(_format_table(table))
    if args.out:
        out = Path(args.out)
        make_dir(out.parent)
        payload = {aspect: {k: _json_value(v) for k, v in asdict(a).items()} for aspect, a in table.items()}
        out.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        plot_bland_altman(ratings, table, out.with_name(f"{out.stem}_bland_altman.png"))
        # Beside the table, named after it: the folder may hold a rating export's own manifest.
        ratings = Path(args.ratings)
        write_manifest(out.parent, kind="alignment", config=vars(args), name=f"{out.stem}.manifest.json",
                       extra={"ratings_sha256": sha256_bytes(ratings.read_bytes())})
    return 0


if __name__ == "__main__":
    run_cli(main)
