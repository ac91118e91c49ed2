"""The verdict: one sentence group per headline metric, computed from the comparison's numbers,
plus the labels the report shares with it."""

from __future__ import annotations

import math
from typing import Any

from eval.metrics.catalog import JUDGE_AVERAGE


def label(comparison: dict[str, Any], metric: str) -> str:
    """Display name of a metric in a comparison."""
    spec = comparison["metrics"].get(metric)
    return spec["label"] if spec else metric


def lower_is_better(comparison: dict[str, Any], metric: str) -> bool:
    spec = comparison["metrics"].get(metric)
    return bool(spec) and not spec["higher_is_better"]


def headline(comparison: dict[str, Any]) -> list[str]:
    """The metrics a verdict speaks about: the judge average and the rule metrics (not each aspect)."""
    return [m for m in comparison["config"]["metrics"]
            if m == JUDGE_AVERAGE or comparison["metrics"].get(m, {}).get("group") != "judge"]


def signed(x: float | None) -> str:
    """A signed number for tables and the verdict; n/a when undefined."""
    return "n/a" if x is None else f"{x:+.3g}"


def _judgement(lower: bool, gain: dict[str, Any]) -> str:
    if gain["gain"] is None:
        return "not available (no prompt has a value in both runs)"
    if not gain["significant"]:
        return "no significant difference"
    better = (gain["gain"] > 0) != lower
    return "significantly better" if better else "significantly worse"


def level_label(alpha: float) -> str:
    """The confidence level of a test at `alpha`, e.g. 95%."""
    return f"{100 * (1 - alpha):g}%"


def _cost_phrase(cost: dict[str, Any] | None) -> str:
    ratio = cost["x_base"]["total_tokens"] if cost else None
    return "at unknown cost" if ratio is None else f"at {ratio:.1f}x base tokens"


def correction_label(comparison: dict[str, Any]) -> str:
    """The name of the comparison's multiplicity correction, e.g. Holm."""
    return comparison["correction"]["label"]


def power_line(comparison: dict[str, Any]) -> str | None:
    """A sentence when the sample is too small for any significance call, else None: without it
    "no significant difference" reads as evidence of no difference."""
    power = comparison["power"]
    if power["possible"] or not power["tests"]:
        return None
    floor = "no p-value at all" if power["min_p"] is None else f"no p below {power['min_p']:.2g}"
    needed = power["prompts_needed"]
    return (f"**No difference can be significant in this comparison**: on {power['max_pairs']} prompts the "
            f"Wilcoxon test gives {floor}, and {correction_label(comparison)} over {power['tests']} tests "
            f"needs p < {power['needed_p']:.2g} for a first call. "
            + (f"At least {needed} prompts would be needed" if needed else "Far more prompts would be needed")
            + " (fewer tests, with --metrics, lower the bar).")


def _p_phrase(comparison: dict[str, Any], gain: dict[str, Any]) -> str:
    if gain["p_value"] is None:
        return "p = n/a"
    if comparison["config"]["correction"] == "none":
        return f"p = {gain['p_value']:.2g}"
    return f"p = {gain['p_value']:.2g}, {correction_label(comparison)} {gain['p_adjusted']:.2g}"


def verdict(comparison: dict[str, Any]) -> list[str]:
    """One sentence group per headline metric (judge average, then rule metrics), from the numbers,
    after a line saying so when the sample cannot make any significance call.

    Runs are ranked by point gain in the metric's good direction; significance is each run's
    own test against the baseline (the runs are not tested against each other), its p-value
    adjusted over every test of the comparison.
    """
    base = comparison["config"]["base"]
    level = level_label(comparison["config"]["alpha"])
    lines = [line] if (line := power_line(comparison)) else []
    for metric in headline(comparison):
        gains = comparison["gains"][metric]
        lower = lower_is_better(comparison, metric)
        name = label(comparison, metric)
        direction = "lower is better" if lower else "higher is better"
        if metric in comparison.get("excluded", {}):
            lines.append(f"**{name}** ({direction}): not compared, {comparison['excluded'][metric]}.")
            continue
        if all(g["gain"] is None for g in gains.values()):
            lines.append(f"**{name}** ({direction}): not comparable, no prompt has a value in both `{base}` "
                         "and another run (homogenization, for one, needs several stories per prompt).")
            continue
        sign = -1 if lower else 1
        ranked = sorted(gains, key=lambda n: -math.inf if gains[n]["gain"] is None else sign * gains[n]["gain"],
                        reverse=True)
        status = {run: _judgement(lower, gains[run]) for run in ranked}
        better = [f"`{n}`" for n in ranked if status[n] == "significantly better"]
        worse = [f"`{n}`" for n in ranked if status[n] == "significantly worse"]
        top = gains[ranked[0]]["gain"]
        # "largest gain" names a run only when it moved the metric the good way: a least-bad loss is no gain.
        lead = [] if top is None else [f"largest gain: `{ranked[0]}`" if sign * top > 0
                                       else f"no run gains over `{base}`"]
        lead.append(f"significantly better than `{base}`: {', '.join(better)}" if better
                    else f"no run is significantly better than `{base}`")
        if worse:
            lead.append(f"significantly worse: {', '.join(worse)}")
        parts = []
        for run in ranked:
            g = gains[run]
            numbers = "" if g["gain"] is None else (
                f" {signed(g['gain'])} ({level} CI {signed(g['ci_low'])} to {signed(g['ci_high'])}, "
                f"{_p_phrase(comparison, g)}, {g['n_pairs']} prompts),"
            )
            parts.append(f"`{run}`:{numbers} {status[run]}, {_cost_phrase(comparison['cost'][run])}.")
        lines.append(f"**{name}** ({direction}): {'; '.join(lead)}. {' '.join(parts)}")
    return lines

