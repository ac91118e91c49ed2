"""The comparison's two plots: gains with CIs per metric, and gain against token cost."""

from __future__ import annotations

import itertools
import math
from pathlib import Path
from typing import Any

import numpy as np

from eval.compare.verdict import headline, label, lower_is_better
from eval.metrics.catalog import JUDGE, JUDGE_AVERAGE
from eval.plotting import pyplot

MARKERS = "os^Dv"  # one per novelty metric, cycled: a sixth metric reuses the first, never vanishes


def _base_sd(comparison: dict[str, Any], metric: str) -> float | None:
    sd = comparison["describe"][metric][comparison["config"]["base"]]["std"]
    return sd if sd else None


def _scaled(gain: dict[str, Any], scale: float | None) -> tuple[float, float, float]:
    """(gain, lower error, upper error) divided by `scale`; NaN where undefined, which plots as nothing."""
    if gain["gain"] is None or scale is None:
        return math.nan, math.nan, math.nan
    g, low, high = (gain[k] / scale for k in ("gain", "ci_low", "ci_high"))
    # A percentile CI can, for skewed differences, exclude the mean; error bars cannot be negative.
    return g, max(g - low, 0.0), max(high - g, 0.0)


def _tick(comparison: dict[str, Any], metric: str) -> str:
    name = label(comparison, metric)
    return f"{name} (lower better)" if lower_is_better(comparison, metric) else name


def _gain_bars(ax, comparison: dict[str, Any], metrics: list[str], runs: list[str], standardize: bool) -> None:
    if not metrics:
        ax.set_axis_off()
        return
    x = np.arange(len(metrics))
    width = 0.8 / len(runs)
    for i, run in enumerate(runs):
        rows = [_scaled(comparison["gains"][m][run], _base_sd(comparison, m) if standardize else 1.0)
                for m in metrics]
        heights, low, high = (list(col) for col in zip(*rows))
        ax.bar(x + (i - (len(runs) - 1) / 2) * width, heights, width, yerr=[low, high], capsize=3, label=run)
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xticks(x, [_tick(comparison, m) for m in metrics], rotation=30, ha="right")
    ax.legend()


def plot_gains(comparison: dict[str, Any], path: str | Path) -> None:
    """Grouped bars of each run's mean gain over the baseline, with CI error bars.

    Judge aspects share a 0-5 scale and are drawn as is. Novelty metrics live on unrelated scales
    (nats, cosine distances, log-volumes), so their gains are divided by the baseline's SD over
    stories to fit one panel. Metrics with no gain at all (e.g. homogenization against a
    single-agent baseline) are left out.
    """
    plt = pyplot()
    base, metrics = comparison["config"]["base"], comparison["config"]["metrics"]
    runs = [n for n in comparison["config"]["runs"] if n != base]
    metrics = [m for m in metrics if any(g["gain"] is not None for g in comparison["gains"][m].values())]
    judge = [m for m in metrics if comparison["metrics"].get(m, {}).get("group") == JUDGE]
    other = [m for m in metrics if m not in judge]
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5))
    _gain_bars(left, comparison, judge, runs, standardize=False)
    left.set(title="Judge aspects", ylabel=f"gain over {base} (0-5 scale)")
    _gain_bars(right, comparison, other, runs, standardize=True)
    right.set(title="Novelty metrics", ylabel=f"gain over {base} / {base} SD")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_cost_vs_gain(comparison: dict[str, Any], path: str | Path) -> None:
    """Gain over the baseline against token cost (multiple of the baseline's tokens per prompt).

    Left: the judge average (else the first metric) with CI bars, the baseline at (1, 0). Right:
    the novelty metrics in baseline SDs, one marker per metric. Runs of unknown cost are left out.
    """
    plt = pyplot()
    base, metrics = comparison["config"]["base"], comparison["config"]["metrics"]
    priced = [n for n, c in comparison["cost"].items() if n != base and c and c["x_base"]["total_tokens"] is not None]
    first = JUDGE_AVERAGE if JUDGE_AVERAGE in metrics else metrics[0]
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 5))
    left.plot([1], [0], "k*", markersize=12)
    left.annotate(base, (1, 0), textcoords="offset points", xytext=(6, -14))
    for name in priced:
        x = comparison["cost"][name]["x_base"]["total_tokens"]
        g, low, high = _scaled(comparison["gains"][first][name], 1.0)
        left.errorbar([x], [g], yerr=[[low], [high]], fmt="o", capsize=4)
        left.annotate(name, (x, g), textcoords="offset points", xytext=(6, 6))
    left.set(title=label(comparison, first), xlabel=f"total tokens per prompt (x {base})", ylabel=f"gain over {base}")
    rule = [m for m in headline(comparison) if m != JUDGE_AVERAGE]
    for metric, marker in zip(rule, itertools.cycle(MARKERS)):
        points = [(comparison["cost"][n]["x_base"]["total_tokens"],
                   _scaled(comparison["gains"][metric][n], _base_sd(comparison, metric))[0]) for n in priced]
        if points:
            xs, ys = zip(*points)
            right.plot(xs, ys, marker, linestyle="none", label=_tick(comparison, metric))
    right.set(title="Novelty metrics", xlabel=f"total tokens per prompt (x {base})",
              ylabel=f"gain over {base} / {base} SD")
    if right.has_data():
        right.legend()
    for ax in (left, right):
        ax.axhline(0, color="black", linewidth=0.8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
