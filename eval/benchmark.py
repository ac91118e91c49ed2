"""The benchmark table: the evaluation summary of every framework (paper's Table 1 layout)
joined with its inference cost, relative to the single agent.

The paper claims LLM Review costs about 9x the single agent; the cost columns let a reader check
that claim on their own model and see what each framework's gains cost.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from eval.compare import COST_FIELDS, inference_cost
from eval.report import LABELS, RULE_METRICS, cell
from generate.common.jsonl import read_jsonl

JUDGE = ("concepts", "logic", "characters", "world_building", "ethics")
COST_LABELS = {"calls": "Calls", "prompt_tokens": "Prompt tok.", "completion_tokens": "Compl. tok.",
               "seconds": "Seconds"}


def benchmark_table(run_dir: Path, frameworks: list[str], summary: dict[str, Any] | None) -> dict[str, Any]:
    """{framework: {"metrics": summary row | None, "cost": per-prompt cost with `x_single` ratios}}."""
    costs = {}
    for fw in frameworks:
        stories = list(read_jsonl(run_dir / fw / "stories.jsonl"))
        costs[fw] = inference_cost(stories, {s["prompt_id"] for s in stories})
    base = costs.get("single")
    table = {}
    for fw in frameworks:
        cost = costs[fw]
        if cost is not None:
            cost = {**cost, "x_single": {f: (cost[f] / base[f] if base and base[f] else None) for f in COST_FIELDS}}
        table[fw] = {"metrics": (summary or {}).get(fw), "cost": cost}
    return table


def render(table: dict[str, Any], title: str) -> str:
    metrics = [*JUDGE, *RULE_METRICS]
    head = ["Framework", *(LABELS[m] for m in metrics), *(f"{COST_LABELS[c]}/prompt" for c in COST_LABELS),
            "Tokens × single", "Calls × single"]
    lines = [f"# {title}", "", "| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for fw, row in table.items():
        cells = [fw]
        for m in metrics:
            cells.append(cell((row["metrics"] or {}).get(m), 2 if m in JUDGE else 3))
        cost = row["cost"]
        for c in COST_LABELS:
            cells.append(f"{cost[c]:,.1f}" if cost else "n/a")
        for c in ("total_tokens", "calls"):
            ratio = cost["x_single"][c] if cost else None
            cells.append(f"{ratio:.1f}x" if ratio is not None else "n/a")
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "Judge and rule-based cells: mean ± std over stories (homogenization: over prompts). Cost: mean per "
              "prompt over all of a framework's calls (every agent, teacher included); seconds are wall time on this "
              "machine, amortized over the prompts batched together.", ""]
    return "\n".join(lines)


def write_benchmark(run_dir: Path, frameworks: list[str], title: str) -> dict[str, Any]:
    summary_path = run_dir / "eval" / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else None
    table = benchmark_table(run_dir, frameworks, summary)
    (run_dir / "benchmark.json").write_text(json.dumps(table, indent=2) + "\n", encoding="utf-8")
    (run_dir / "benchmark.md").write_text(render(table, title), encoding="utf-8")
    return table
