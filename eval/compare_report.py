"""A comparison (`eval.compare.compare`) as files: comparison.json, comparison.md and two plots.

The numbers and the verdict are computed in `eval.compare`; this module only lays them out, so
that the statistics can be tested without rendering and the rendering changed without touching
them.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path
from typing import Any

import numpy as np

from eval.compare import headline, label, level_label, lower_is_better, signed
from eval.metrics.catalog import JUDGE, JUDGE_AVERAGE
from eval.plotting import pyplot

log = logging.getLogger(__name__)


def _cell(x: float | None, fmt: str = ".3g") -> str:
    return "—" if x is None else format(x, fmt)


def _dropped_phrase(dropped: dict[str, list[str]]) -> str:
    return "; ".join(f"`{n}` {len(ids)}" + (f" ({', '.join(ids)})" if ids else "") for n, ids in dropped.items())


def render_markdown(comparison: dict[str, Any]) -> str:
    """The comparison as Markdown: provenance, verdict, then score, gain and cost tables."""
    cfg, prompts = comparison["config"], comparison["prompts"]
    base, level = cfg["base"], level_label(cfg["alpha"])
    names = list(cfg["runs"])
    lines = [
        f"# Comparison with `{base}`", "",
        f"Prompts compared: {prompts['n_common']}, those present in every run. "
        f"Dropped per run: {_dropped_phrase(prompts['dropped'])}.", "",
        f"Gain = run − `{base}`, paired by prompt (each run's stories are averaged per prompt first). "
        f"{level} CI: paired percentile bootstrap over prompts ({cfg['n_boot']} resamples, seed {cfg['seed']}); "
        f"p: two-sided Wilcoxon signed-rank; significant: the CI excludes 0 and p < {cfg['alpha']:g}. "
        "A prompt without a value for a metric in either run is left out of that metric only (column 'missing').",
        *_mismatch_lines(comparison),
        "", "## Verdict", "", *(f"- {line}" for line in comparison["verdict"]), "",
        "## Scores (mean ± std over stories, se = standard error of the mean, n)", "",
        "| metric | " + " | ".join(f"`{n}`" for n in names) + " |", "|---" * (len(names) + 1) + "|",
    ]
    for metric, by_run in comparison["describe"].items():
        cells = [f"{_cell(s['mean'])} ± {_cell(s['std'])} (se {_cell(s['se'])}, n {s['n']})" if s["n"] else "—"
                 for s in by_run.values()]
        lines.append(f"| {label(comparison, metric)} | " + " | ".join(cells) + " |")
    lines += [
        "", f"## Gain over `{base}` (paired by prompt)", "",
        f"| metric | run | gain | {level} CI | p | prompts | missing | significant | gain per extra base tokens |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for metric, by_run in comparison["gains"].items():
        for name, g in by_run.items():
            ci = "—" if g["gain"] is None else f"[{signed(g['ci_low'])}, {signed(g['ci_high'])}]"
            lines.append(
                f"| {label(comparison, metric)} | `{name}` | {signed(g['gain']) if g['gain'] is not None else '—'} | {ci} "
                f"| {_cell(g['p_value'], '.2g')} | {g['n_pairs']} | {len(g['missing'])} "
                f"| {'yes' if g['significant'] else 'no'} | {_cell(g['gain_per_extra_base_tokens'])} |"
            )
    lines += [
        "", "## Inference cost per prompt", "",
        "Means over the compared prompts; `prompt_usage` and `seconds` cover all of a prompt's agents and are "
        "counted once per prompt.", "",
        "| run | prompts | calls | prompt tokens | completion tokens | total tokens | seconds "
        "| calls × base | tokens × base | seconds × base |", "|---" * 10 + "|",
    ]
    for name, c in comparison["cost"].items():
        if c is None:
            lines.append(f"| `{name}` | unknown (no usable stories.jsonl) |" + " |" * 8)
            continue
        ratios = " | ".join(_cell(c["x_base"][f], ".2f") for f in ("calls", "total_tokens", "seconds"))
        lines.append(f"| `{name}` | {c['n_prompts']} | {c['calls']:.3g} | {c['prompt_tokens']:,.0f} "
                     f"| {c['completion_tokens']:,.0f} | {c['total_tokens']:,.0f} | {c['seconds']:.3g} | {ratios} |")
    lines += [
        "", f"Gain per extra base tokens = gain / (total tokens per prompt of the run / those of `{base}` − 1): "
        f"the gain bought by each additional `{base}`-run's worth of tokens (with a single-agent baseline, per "
        f"extra single-agent-equivalent). Not defined (—) when the run uses no more tokens than `{base}`.", "",
        "## Plots", "", "![Gain over base](gains.png)", "", "![Cost vs gain](cost_vs_gain.png)", "",
    ]
    return "\n".join(lines)


def _mismatch_lines(comparison: dict[str, Any]) -> list[str]:
    """What the runs differ in although they were compared (`--allow-mismatch`), said up front."""
    lines = []
    for key, values in comparison.get("mismatches", {}).items():
        shown = "; ".join(f"`{run}`: {json.dumps(v, sort_keys=True)[:160]}" for run, v in values.items())
        lines.append(f"**Not like for like: the runs differ in {key}** (allowed by --allow-mismatch {key}): {shown}.")
    for metric, why in comparison.get("excluded", {}).items():
        lines.append(f"{label(comparison, metric)} is not compared: {why}.")
    return ["", *lines] if lines else []


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
    for metric, marker in zip(rule, "os^Dv"):
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


def write_outputs(comparison: dict[str, Any], out: str | Path) -> dict[str, Path]:
    """Write comparison.json, comparison.md, gains.png and cost_vs_gain.png into `out`.

    Returns:
        {kind: path} of the written files.
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "comparison.json", "markdown": out / "comparison.md",
             "gains_plot": out / "gains.png", "cost_plot": out / "cost_vs_gain.png"}
    paths["json"].write_text(json.dumps(comparison, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    paths["markdown"].write_text(render_markdown(comparison), encoding="utf-8")
    plot_gains(comparison, paths["gains_plot"])
    plot_cost_vs_gain(comparison, paths["cost_plot"])
    log.info("wrote %s", ", ".join(str(p) for p in paths.values()))
    return paths
