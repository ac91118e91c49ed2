"""The Bland-Altman plot of `review-lab align`: per aspect, judge - human against their mean.

The table gives the bias and the limits of agreement; the plot shows what they summarise, as Bland
and Altman ask of every agreement study: whether the judge's disagreement grows or shrinks along
the scale (a bias that depends on the score, which one bias cannot express), the stories outside
the limits, and how the scores sit on the rubric's grid. The bias (solid) and the limits (dashed)
are drawn with their confidence intervals shaded, from the same `Agreement` the table prints.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from eval.plotting import pyplot

if TYPE_CHECKING:
    from eval.alignment import Agreement

_COLUMNS = 3  # panels per row: five rubric aspects fit in two rows


def plot_bland_altman(ratings: dict[str, tuple[list[float], list[float]]], table: dict[str, Agreement],
                      path: str | Path) -> Path:
    """Write `figure(ratings, table)` to the PNG `path`."""
    fig = figure(ratings, table)
    path = Path(path)
    fig.savefig(path, dpi=120)
    pyplot().close(fig)
    return path


def figure(ratings: dict[str, tuple[list[float], list[float]]], table: dict[str, Agreement]):
    """One panel per aspect of `table` (scores from `ratings`, as `read_ratings` returns them); a
    statistic undefined for the data (NaN) is left out of its panel."""
    plt = pyplot()
    cols = min(len(table), _COLUMNS)
    rows = math.ceil(len(table) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.4 * cols, 3.6 * rows), squeeze=False, sharey=True)
    level = next(iter(table.values())).ci_level
    for ax, (aspect, a) in zip(axes.flat, table.items()):
        human, judge = (np.asarray(v, dtype=np.float64) for v in ratings[aspect])
        ax.scatter((human + judge) / 2, judge - human, s=14, alpha=0.6, color="tab:blue", zorder=3)
        ax.axhline(0.0, color="grey", linewidth=0.6)
        lines = ((a.bias, a.bias_ci, "-", "bias"), (a.loa_low, a.loa_low_ci, "--", "95% limits"),
                 (a.loa_high, a.loa_high_ci, "--", None))
        for value, (low, high), style, name in lines:
            if math.isnan(value):
                continue
            ax.axhline(value, color="tab:red", linestyle=style, linewidth=1.2, label=name)
            if not (math.isnan(low) or math.isnan(high)):
                ax.axhspan(low, high, color="tab:red", alpha=0.12, linewidth=0)
        ax.set_title(f"{aspect} (n = {a.n})")
        ax.set_xlabel("mean of judge and human")
    for ax in axes[:, 0]:
        ax.set_ylabel("judge - human")
    for ax in axes.flat[len(table):]:
        ax.set_axis_off()
    axes.flat[0].legend(loc="best", fontsize=8)
    fig.suptitle(f"Bland-Altman: bias and 95% limits of agreement, {level * 100:g}% confidence intervals shaded")
    fig.tight_layout()
    return fig
