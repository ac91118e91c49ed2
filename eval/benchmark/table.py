"""The benchmark table: each framework's evaluation summary (paper's Table 1 layout) joined with its
inference cost, relative to the single agent.

Each framework is a run directory `<out>/<framework>/` with its own evaluation in `eval/`, so any
two of them compare directly (`review-lab compare --run base=<out>/single --run review=<out>/review`).
The paper claims LLM Review costs about 9x the single agent; the cost columns let a reader check
that claim on their own model and see what each framework's gains cost. Every row is computed over
the same prompts, those of the invocation that every framework finished (`coverage`): a table whose
rows covered different prompts would compare them by which prompts each run happens to hold.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path
from typing import Any

from eval.benchmark.coverage import RunRecords, common_prompts, coverage_lines, left_out, unlike, unlike_lines
from eval.compare import COST_FIELDS, cut_off_share, inference_cost
from eval.metrics.catalog import Catalog
from eval.report import CELL_NOTE, missing_lines, table

COST_LABELS = {"calls": "Calls", "prompt_tokens": "Prompt tok.", "completion_tokens": "Compl. tok.",
               "seconds": "Seconds"}


def benchmark_table(run_dir: Path, frameworks: list[str],
                    prompts: Collection[str] | None = None) -> tuple[Catalog | None, dict[str, Any], dict[str, Any]]:
    """(catalog, {framework: {"metrics": summary cells | None, "cost": per-prompt cost with `x_single`,
    "cut_off": share of final stories cut off at the token cap (None: not recorded), "seconds"}},
    coverage). Every cell is over the same prompts (`coverage.common_prompts` among `prompts`, the
    invocation's; None: any), and `coverage` says which and what each framework has outside them."""
    runs = {fw: RunRecords.read(run_dir / fw) for fw in frameworks}
    common = common_prompts(runs, prompts)
    catalog = next((r.catalog for r in runs.values() if r.catalog is not None), None)
    costs = {fw: inference_cost(r.stories, common) if common else None for fw, r in runs.items()}
    base = costs.get("single")
    out = {}
    for fw, run in runs.items():
        cost = costs[fw]
        if cost is not None:
            cost = {**cost, "x_single": {f: (cost[f] / base[f] if base and base[f] else None) for f in COST_FIELDS}}
        spent = inference_cost(run.stories, run.generated()) if run.stories else None  # the time it took, all of it
        out[fw] = {"metrics": run.summary(fw, common), "cost": cost, "cut_off": cut_off_share(run.stories, common),
                   "seconds": _seconds(run_dir / fw, spent)}
    coverage = {"prompts": sorted(common), "left_out": left_out(runs, common, prompts),
                "mismatches": unlike({fw: run_dir / fw for fw in frameworks})}
    return catalog, out, coverage


def _seconds(run: Path, cost: dict | None) -> dict[str, float]:
    """Where a framework's time went: generation (the prompts' wall seconds, summed) and its
    evaluation's parts (judge, surprisal, metrics; from the evaluation's manifest, whose `seconds`
    add up every invocation of a resumed evaluation, not only the last one)."""
    out = {"generation": cost["seconds"] * cost["n_prompts"]} if cost else {}
    manifest = run / "eval" / "manifest.json"
    if manifest.is_file():
        out.update(json.loads(manifest.read_text(encoding="utf-8")).get("seconds") or {})
    return out


def time_lines(rows: dict[str, Any]) -> list[str]:
    """A markdown table of where each framework's time went, in minutes."""
    parts = list(dict.fromkeys(p for row in rows.values() for p in row["seconds"]))
    if not parts:
        return []
    lines = ["| Framework | " + " | ".join(f"{p} (min)" for p in parts) + " | total (min) |",
             "|---" * (len(parts) + 2) + "|"]
    for fw, row in rows.items():
        sec = row["seconds"]
        cells = [f"{sec[p] / 60:.1f}" if p in sec else "n/a" for p in parts]
        lines.append(f"| {fw} | " + " | ".join(cells) + f" | {sum(sec.values()) / 60:.1f} |")
    total = sum(sum(row["seconds"].values()) for row in rows.values())
    return ["Where the time went:", "", *lines, "", f"Total: {total / 3600:.2f} h.", ""]


def render(catalog: Catalog | None, rows: dict[str, Any], title: str, coverage: dict[str, Any]) -> str:
    catalog = catalog or Catalog.from_aspects({})
    extra_head = [*(f"{COST_LABELS[c]}/prompt" for c in COST_LABELS), "Tokens × single", "Calls × single", "Cut off"]
    extra = {}
    for fw, row in rows.items():
        cost = row["cost"]
        cells = [f"{cost[c]:,.1f}" if cost else "n/a" for c in COST_LABELS]
        for c in ("total_tokens", "calls"):
            ratio = cost["x_single"][c] if cost else None
            cells.append(f"{ratio:.1f}x" if ratio is not None else "n/a")
        cut = row.get("cut_off")
        extra[fw] = [*cells, "n/a" if cut is None else f"{100 * cut:.0f}%"]
    cells = {fw: row["metrics"] or {} for fw, row in rows.items()}
    lines = [f"# {title}", "", *unlike_lines(coverage["mismatches"], "framework"),
             *table(cells, catalog, extra=extra, extra_head=extra_head), "",
             f"{CELL_NOTE} Cost: mean per prompt over all of a framework's calls (every agent, teacher included); "
             "seconds are wall time on this machine, amortized over the prompts batched together. Cut off: the "
             "share of final stories that hit the token cap (n/a: the run did not record it).", ""]
    lines += coverage_lines(set(coverage["prompts"]), coverage["left_out"], noun="framework")
    lines += time_lines(rows)
    absent = missing_lines(cells, catalog)
    if absent:
        lines += ["Missing values:", "", *absent, ""]
    return "\n".join(lines)


def write_benchmark(run_dir: Path, frameworks: list[str], title: str,
                    prompts: Collection[str] | None = None) -> dict[str, Any]:
    """Write benchmark.json and benchmark.md over the prompts of `prompts` every framework finished."""
    catalog, rows, coverage = benchmark_table(run_dir, frameworks, prompts)
    payload = {"metrics": catalog.to_json() if catalog else [], "frameworks": rows, "coverage": coverage}
    (run_dir / "benchmark.json").write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    (run_dir / "benchmark.md").write_text(render(catalog, rows, title, coverage), encoding="utf-8")
    return rows
