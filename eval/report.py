"""Reports of an evaluation: `summary.json`, `judge_stats.json`, `summary.md` (laid out like the
paper's Table 1) and bar plots, all recomputed from `scores.jsonl` so that they always cover
every story scored so far, resumed runs included.
"""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

import numpy as np

from eval.plotting import pyplot

log = logging.getLogger(__name__)

RULE_METRICS = ("surprisal", "kl", "novelty_cos", "volume_gain", "homogenization")
# Column headers of the paper's Table 1 (plus our homogenization); unknown aspects use their key.
LABELS = {"concepts": "Concepts", "logic": "Logic", "characters": "Characters", "world_building": "World-Building",
          "ethics": "Ethics", "surprisal": "Surprisal", "kl": "KL Div.", "novelty_cos": "1-Cos Sim.",
          "volume_gain": "Volume Gain", "homogenization": "Homogenization"}


def stats(values: list) -> dict:
    """mean, sample std (ddof=1) and n over the present, finite values; None where undefined."""
    xs = [float(v) for v in values if v is not None and math.isfinite(v)]
    n = len(xs)
    return {"mean": float(np.mean(xs)) if n else None,
            "std": float(np.std(xs, ddof=1)) if n > 1 else None,
            "n": n}


def summarize(rows: list[dict], aspects: list[str]) -> dict[str, dict[str, dict]]:
    """{framework: {metric: {"mean", "std", "n"}}}; homogenization counts each prompt once,
    since every story of a prompt carries the same prompt-level value."""
    out: dict[str, dict[str, dict]] = {}
    for fw in _frameworks(rows):
        mine = [r for r in rows if r["framework"] == fw]
        per_prompt: dict[str, float | None] = {}
        for r in mine:
            if per_prompt.get(r["prompt_id"]) is None:
                per_prompt[r["prompt_id"]] = r.get("homogenization")
        out[fw] = {m: stats([r.get(m) for r in mine]) for m in (*aspects, *RULE_METRICS[:-1])}
        out[fw]["homogenization"] = stats(list(per_prompt.values()))
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


def markdown(summary: dict, judge: dict, aspects: list[str]) -> str:
    metrics = [*aspects, *RULE_METRICS]
    lines = ["| Framework | " + " | ".join(LABELS.get(m, m) for m in metrics) + " |",
             "|---|" + "---:|" * len(metrics)]
    for fw, row in summary.items():
        lines.append(f"| {fw} | " + " | ".join(cell(row[m], 2 if m in aspects else 3) for m in metrics) + " |")
    lines += ["", "Cells are mean ± std over stories (homogenization: over prompts); n/a: no value.", ""]
    lines += [f"- {fw}: n = {row[aspects[0]]['n'] if aspects else 0} judged, "
              f"{row['surprisal']['n']} with surprisal, {row['kl']['n']} with reference metrics"
              for fw, row in summary.items()]
    if judge:
        lines += ["", "Judge parse failures (replies without a valid score; sample mode re-asks them):", ""]
        for fw, j in judge.items():
            rate = "n/a" if j["parse_failure_rate"] is None else f"{100 * j['parse_failure_rate']:.1f}%"
            lines.append(f"- {fw}: {j['parse_failures']}/{j['requests']} replies ({rate}), "
                         f"{j['backend_failures']} lost to backend failures, {j['missing_scores']} scores missing")
    return "\n".join(lines) + "\n"


def plot(summary: dict, metrics: list[str], path: Path, title: str, ylim: tuple[float, float] | None = None) -> bool:
    """Bars per framework for each metric (one panel per metric: their scales differ)."""
    plt = pyplot()
    present = [m for m in metrics if any(row[m]["n"] for row in summary.values())]
    if not present:
        log.info("%s: no values to plot", path.name)
        return False
    frameworks = list(summary)
    fig, axes = plt.subplots(1, len(present), figsize=(2.6 * len(present) + 1, 3.4), squeeze=False)
    for ax, m in zip(axes[0], present):
        means = [summary[fw][m]["mean"] or 0.0 for fw in frameworks]
        errs = [summary[fw][m]["std"] or 0.0 for fw in frameworks]
        ax.bar(range(len(frameworks)), means, yerr=errs, capsize=3, color=[f"C{i}" for i in range(len(frameworks))])
        ax.set_xticks(range(len(frameworks)), frameworks, rotation=30, ha="right", fontsize=8)
        ax.set_title(LABELS.get(m, m), fontsize=9)
        if ylim:
            ax.set_ylim(*ylim)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def write_reports(out: Path, rows: list[dict], aspects: list[str], scale: tuple[int, int] = (0, 5)) -> dict:
    """Write summary.json, judge_stats.json, summary.md and the plots; return the summary."""
    summary = summarize(rows, aspects)
    judge = judge_stats(rows, aspects)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    (out / "judge_stats.json").write_text(json.dumps(judge, indent=2) + "\n", encoding="utf-8")
    (out / "summary.md").write_text(markdown(summary, judge, aspects), encoding="utf-8")
    plot(summary, aspects, out / "judge_scores.png", f"LLM judge ({scale[0]}-{scale[1]})", ylim=scale)
    plot(summary, list(RULE_METRICS), out / "rule_metrics.png", "Rule-based metrics")
    for fw, j in judge.items():
        if j["parse_failure_rate"]:
            log.info("%s: judge parse-failure rate %.1f%%", fw, 100 * j["parse_failure_rate"])
    log.info("reports written to %s", out)
    return summary


def _frameworks(rows: list[dict]) -> list[str]:
    return list(dict.fromkeys(r["framework"] for r in rows))


def cell(s: dict | None, digits: int) -> str:
    """'mean ± std' of a summary entry; n/a for a metric with no entry or no values."""
    if not s or s["mean"] is None:
        return "n/a"
    if s["std"] is None:
        return f"{s['mean']:.{digits}f}"
    return f"{s['mean']:.{digits}f} ± {s['std']:.{digits}f}"
