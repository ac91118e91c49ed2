"""Reports of an evaluation: `summary.json`, `judge_stats.json`, `summary.md` (laid out like the
paper's Table 1) and bar plots, all recomputed from `scores.jsonl` so that they always cover
every story scored so far, resumed runs included.

Columns come from the evaluation's metric catalog (judge aspects from its rubric, then the
rule-based metrics), which `summary.json` carries along, so the benchmark and sweep tables built
from it cannot drift from what was scored. Every summary cell counts its missing values by
reason: a metric that is n/a says why.
"""

from __future__ import annotations

import json
import logging
import math
from collections import Counter
from dataclasses import asdict
from pathlib import Path

from eval.metrics.catalog import Catalog, MetricSpec
from eval.plotting import pyplot
from eval.stats import summarize

log = logging.getLogger(__name__)

CELL_NOTE = ("Cells: mean ± standard deviation over stories (homogenization: over prompts), with the standard "
             "error of the mean (se, clustered by prompt: a prompt's stories are not independent); n/a: no value "
             "(summary.json says why).")


def summary_cell(values: list, missing: list[str], prompts: list[str]) -> dict:
    """mean, std, se (clustered by prompt) and n over the present values, and the missing ones
    counted by reason."""
    return {**asdict(summarize(values, prompts)), "missing": dict(Counter(missing))}


def summarize_frameworks(rows: list[dict], catalog: Catalog) -> dict[str, dict[str, dict]]:
    """{framework: {metric: summary cell}}; a per-prompt metric (homogenization) counts each
    prompt once, since every story of a prompt carries the same prompt-level value."""
    out: dict[str, dict[str, dict]] = {}
    for fw in _frameworks(rows):
        mine = [r for r in rows if r["framework"] == fw]
        out[fw] = {}
        for spec in catalog.metrics:
            units = list({r["prompt_id"]: r for r in mine}.values()) if spec.per_prompt else mine
            values = [r.get(spec.key) for r in units]
            reasons = [(r.get("missing") or {}).get(spec.key, "not recorded") for r in units if r.get(spec.key) is None]
            out[fw][spec.key] = summary_cell(values, reasons, [r["prompt_id"] for r in units])
    return out


def judge_stats(rows: list[dict], aspects: list[str]) -> dict[str, dict]:
    """Per framework: judge replies, parse failures (and their rate), backend failures, and
    aspect scores left missing."""
    out = {}
    for fw in _frameworks(rows):
        diags = [r["judge"] for r in rows if r["framework"] == fw and r.get("judge")]
        if not diags:
            continue
        requests = sum(d["requests"] for d in diags)
        failures = sum(d["parse_failures"] for d in diags)
        out[fw] = {"stories": len(diags), "requests": requests, "parse_failures": failures,
                   "parse_failure_rate": failures / requests if requests else None,
                   "backend_failures": sum(d["backend_failures"] for d in diags),
                   "missing_scores": sum(r.get(a) is None for r in rows if r["framework"] == fw and r.get("judge")
                                         for a in aspects)}
    return out


def cell(s: dict | None, digits: int) -> str:
    """'mean ± std (se x)' of a summary cell; n/a for a metric with no values."""
    if not s or s.get("mean") is None:
        return "n/a"
    if s.get("std") is None:
        return f"{s['mean']:.{digits}f}"
    se = f" (se {s['se']:.{digits}f})" if s.get("se") is not None else ""
    return f"{s['mean']:.{digits}f} ± {s['std']:.{digits}f}{se}"


def missing_lines(frameworks: dict[str, dict[str, dict]], catalog: Catalog) -> list[str]:
    """One line per framework and metric with missing values: how many and why."""
    lines = []
    for fw, row in frameworks.items():
        for spec in catalog.metrics:
            missing = (row.get(spec.key) or {}).get("missing") or {}
            if missing:
                why = "; ".join(f"{n} × {reason}" for reason, n in sorted(missing.items(), key=lambda kv: -kv[1]))
                lines.append(f"- {fw}, {spec.label}: {sum(missing.values())} missing ({why})")
    return lines


def table(frameworks: dict[str, dict[str, dict]], catalog: Catalog, first: str = "Framework",
          extra: dict[str, list[str]] | None = None, extra_head: list[str] | None = None) -> list[str]:
    """A Markdown table: one row per framework, one column per catalog metric (plus `extra`)."""
    head = [first, *(m.label for m in catalog.metrics), *(extra_head or [])]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for fw, row in frameworks.items():
        cells = [cell(row.get(m.key), m.digits) for m in catalog.metrics] + list((extra or {}).get(fw, []))
        lines.append(f"| {fw} | " + " | ".join(cells) + " |")
    return lines


def markdown(frameworks: dict, judge: dict, catalog: Catalog) -> str:
    lines = table(frameworks, catalog)
    lines += ["", CELL_NOTE, ""]
    absent = missing_lines(frameworks, catalog)
    if absent:
        lines += ["Missing values:", "", *absent, ""]
    if judge:
        lines += ["Judge parse failures (replies without a valid score; sample mode re-asks them):", ""]
        for fw, j in judge.items():
            rate = "n/a" if j["parse_failure_rate"] is None else f"{100 * j['parse_failure_rate']:.1f}%"
            lines.append(f"- {fw}: {j['parse_failures']}/{j['requests']} replies ({rate}), "
                         f"{j['backend_failures']} lost to backend failures, {j['missing_scores']} scores missing")
    return "\n".join(lines) + "\n"


def plot(frameworks: dict, metrics: list[MetricSpec], path: Path, title: str,
         ylim: tuple[float, float] | None = None) -> bool:
    """Bars per framework for each metric (one panel per metric: their scales differ), with
    standard-error bars. A missing mean draws no bar but an "n/a" mark, and an undefined standard
    error no error bar: a 0 would read as a value (homogenization 0, "most diverse") or a certainty."""
    plt = pyplot()
    present = [m for m in metrics if any(row[m.key]["n"] for row in frameworks.values())]
    if not present:
        log.info("%s: no values to plot", path.name)
        return False
    names = list(frameworks)
    fig, axes = plt.subplots(1, len(present), figsize=(2.6 * len(present) + 1, 3.4), squeeze=False)
    for ax, m in zip(axes[0], present):
        means, errs = zip(*(mean_and_se(frameworks[fw][m.key]) for fw in names))
        ax.bar(range(len(names)), means, yerr=errs, capsize=3, color=[f"C{i}" for i in range(len(names))])
        mark_missing(ax, range(len(names)), means)
        ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=8)
        ax.set_title(m.label, fontsize=9)
        if ylim:
            ax.set_ylim(*ylim)
    fig.suptitle(f"{title} (bars: standard error)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def mean_and_se(stat: dict | None) -> tuple[float, float]:
    """(mean, standard error) of a summary cell for a plot; NaN where undefined, which matplotlib
    draws as nothing (never 0, which it would draw as a value)."""
    if not stat or stat.get("mean") is None:
        return math.nan, math.nan
    return stat["mean"], math.nan if stat.get("se") is None else stat["se"]


def mark_missing(ax, xs, means) -> None:
    """An "n/a" at the foot of each x whose mean is missing (NaN), so a gap reads as no value."""
    for x, mean in zip(xs, means):
        if math.isnan(mean):
            ax.text(x, 0.02, "n/a", transform=ax.get_xaxis_transform(), ha="center", va="bottom", fontsize=8)


def write_reports(out: Path, rows: list[dict], catalog: Catalog, scale: tuple[int, int] = (0, 5)) -> dict:
    """Write summary.json, judge_stats.json, summary.md and the plots; return the summary."""
    frameworks = summarize_frameworks(rows, catalog)
    judge = judge_stats(rows, catalog.aspects)
    summary = {"metrics": catalog.to_json(), "frameworks": frameworks}
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    (out / "judge_stats.json").write_text(json.dumps(judge, indent=2) + "\n", encoding="utf-8")
    (out / "summary.md").write_text(markdown(frameworks, judge, catalog), encoding="utf-8")
    judge_metrics = [m for m in catalog.metrics if m.key in catalog.aspects]
    rule = [m for m in catalog.metrics if m.key not in catalog.aspects]
    plot(frameworks, judge_metrics, out / "judge_scores.png", f"LLM judge ({scale[0]}-{scale[1]})", ylim=scale)
    plot(frameworks, rule, out / "rule_metrics.png", "Rule-based metrics")
    for fw, j in judge.items():
        if j["parse_failure_rate"]:
            log.info("%s: judge parse-failure rate %.1f%%", fw, 100 * j["parse_failure_rate"])
    log.info("reports written to %s", out)
    return summary


def read_summary(path: Path) -> tuple[Catalog, dict[str, dict[str, dict]]]:
    """An evaluation's summary.json as (catalog, {framework: {metric: cell}})."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return Catalog.from_json(data["metrics"]), data["frameworks"]


def _frameworks(rows: list[dict]) -> list[str]:
    return list(dict.fromkeys(r["framework"] for r in rows))
