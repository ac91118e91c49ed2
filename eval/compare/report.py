"""A comparison as files: comparison.json, comparison.md and the two plots (`eval.compare.plots`).

The numbers and the verdict are computed in `eval.compare.gains` and `eval.compare.verdict`; this
module only lays them out, so that the statistics can be tested without rendering and the
rendering changed without touching them.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from eval.compare.plots import plot_cost_vs_gain, plot_gains
from eval.compare.verdict import correction_label, label, level_label, signed
from generate.common.files import make_dir

log = logging.getLogger("eval.compare")


def _cell(x: float | None, fmt: str = ".3g") -> str:
    return "—" if x is None else format(x, fmt)


def _score_cell(s: dict[str, Any]) -> str:
    """'mean ± std (se, n, missing)' of a run's scores; missing only when some lack a value."""
    missing = f"missing {s['n_missing']}" if s.get("n_missing") else ""
    if not s["n"]:
        return f"— ({missing})" if missing else "—"
    tail = f", {missing}" if missing else ""
    return f"{_cell(s['mean'])} ± {_cell(s['std'])} (se {_cell(s['se'])}, n {s['n']}{tail})"


def _share(x: float | None) -> str:
    """A share as a percentage; n/a where the runs did not record it."""
    return "n/a" if x is None else f"{100 * x:.0f}%"


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
        f"p: two-sided Wilcoxon signed-rank; {_adjusted_phrase(comparison)}; significant: the CI excludes 0 "
        f"and the adjusted p < {cfg['alpha']:g}. "
        "A prompt without a value for a metric in either run is left out of that metric only (column 'missing').",
        *_mismatch_lines(comparison),
        "", "## Verdict", "", *(f"- {line}" for line in comparison["verdict"]), "",
        "## Scores (mean ± std over stories, se = standard error of the mean clustered by prompt, n; "
        "homogenization: over prompts; missing: without a value, e.g. a judge average lacking an aspect)", "",
        "| metric | " + " | ".join(f"`{n}`" for n in names) + " |", "|---" * (len(names) + 1) + "|",
    ]
    for metric, by_run in comparison["describe"].items():
        cells = [_score_cell(s) for s in by_run.values()]
        lines.append(f"| {label(comparison, metric)} | " + " | ".join(cells) + " |")
    lines += [
        "", f"## Gain over `{base}` (paired by prompt)", "",
        f"| metric | run | gain | {level} CI | p | p ({correction_label(comparison)}) | prompts | missing "
        "| significant | gain per extra base tokens |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for metric, by_run in comparison["gains"].items():
        for name, g in by_run.items():
            ci = "—" if g["gain"] is None else f"[{signed(g['ci_low'])}, {signed(g['ci_high'])}]"
            gain = signed(g["gain"]) if g["gain"] is not None else "—"
            lines.append(
                f"| {label(comparison, metric)} | `{name}` | {gain} | {ci} | {_cell(g['p_value'], '.2g')} "
                f"| {_cell(g['p_adjusted'], '.2g')} | {g['n_pairs']} | {len(g['missing'])} "
                f"| {'yes' if g['significant'] else 'no'} | {_cell(g['gain_per_extra_base_tokens'])} |"
            )
    lines += _cost_lines(comparison)
    lines += [
        "", f"Gain per extra base tokens = gain / (total tokens per prompt of the run / those of `{base}` − 1): "
        f"the gain bought by each additional `{base}`-run's worth of tokens (with a single-agent baseline, per "
        f"extra single-agent-equivalent). Not defined (—) when the run uses no more tokens than `{base}`.", "",
        "## Plots", "", "![Gain over base](gains.png)", "", "![Cost vs gain](cost_vs_gain.png)", "",
    ]
    return "\n".join(lines)


def _cost_lines(comparison: dict[str, Any]) -> list[str]:
    """The cost table: per run, mean cost per compared prompt, multiples of the baseline's, cut-off share."""
    lines = [
        "", "## Inference cost per prompt", "",
        "Means over the compared prompts; `prompt_usage` and `seconds` cover all of a prompt's agents and are "
        "counted once per prompt. Cut off: the share of final stories that hit the token cap (n/a: not "
        "recorded by the run).", "",
        "| run | prompts | calls | prompt tokens | completion tokens | total tokens | seconds "
        "| calls × base | tokens × base | seconds × base | cut off |", "|---" * 11 + "|",
    ]
    for name, c in comparison["cost"].items():
        cut = _share((comparison.get("cut_off") or {}).get(name))
        if c is None:
            lines.append(f"| `{name}` | unknown (no usable stories.jsonl) |" + " |" * 8 + f" {cut} |")
            continue
        ratios = " | ".join(_cell(c["x_base"][f], ".2f") for f in ("calls", "total_tokens", "seconds"))
        lines.append(f"| `{name}` | {c['n_prompts']} | {c['calls']:.3g} | {c['prompt_tokens']:,.0f} "
                     f"| {c['completion_tokens']:,.0f} | {c['total_tokens']:,.0f} | {c['seconds']:.3g} | {ratios} "
                     f"| {cut} |")
    return lines


def _adjusted_phrase(comparison: dict[str, Any]) -> str:
    """How the p-values were adjusted, and over which family."""
    correction, tests = comparison["correction"], comparison["power"]["tests"]
    if comparison["config"]["correction"] == "none":
        return f"p-values not adjusted for the {tests} tests of this comparison ({correction['promise']})"
    return (f"p ({correction['label']}): adjusted over the {tests} tests of this comparison "
            f"({correction['promise']}; the CIs are per test)")


def _mismatch_lines(comparison: dict[str, Any]) -> list[str]:
    """What the runs differ in although they were compared (`--allow-mismatch`), said up front."""
    lines = []
    for key, values in comparison.get("mismatches", {}).items():
        shown = "; ".join(f"`{run}`: {json.dumps(v, sort_keys=True)[:160]}" for run, v in values.items())
        lines.append(f"**Not like for like: the runs differ in {key}** (allowed by --allow-mismatch {key}): {shown}.")
    for metric, why in comparison.get("excluded", {}).items():
        lines.append(f"{label(comparison, metric)} is not compared: {why}.")
    return ["", *lines] if lines else []


def write_outputs(comparison: dict[str, Any], out: str | Path) -> dict[str, Path]:
    """Write comparison.json, comparison.md, gains.png and cost_vs_gain.png into `out`.

    Returns:
        {kind: path} of the written files.
    """
    out = Path(out)
    make_dir(out)
    paths = {"json": out / "comparison.json", "markdown": out / "comparison.md",
             "gains_plot": out / "gains.png", "cost_plot": out / "cost_vs_gain.png"}
    paths["json"].write_text(json.dumps(comparison, indent=2, allow_nan=False) + "\n", encoding="utf-8")
    paths["markdown"].write_text(render_markdown(comparison), encoding="utf-8")
    plot_gains(comparison, paths["gains_plot"])
    plot_cost_vs_gain(comparison, paths["cost_plot"])
    log.info("wrote %s", ", ".join(str(p) for p in paths.values()))
    return paths
