"""Ablation sweeps like the paper's Figures 2-5: vary one setting at a time (rounds, agents,
top_p, temperature), generate and evaluate at each value, and plot every metric against it.

    python scripts/sweep.py --framework review --grid rounds=1,2,3 --grid temperature=0.5,0.9,1.2 \
        --limit 4 --max-new-tokens 200 --out runs/sweep

One factor at a time (the others stay at their defaults), as in the paper. Each point is its own
resumable run directory (`<out>/<setting>=<value>/`), so an interrupted sweep continues; a value
equal to the default shares one directory (`<out>/default/`) across axes instead of being generated
again. Each point also records its inference cost per prompt (calls, tokens), because what a
setting gains is only half the answer. Writes sweep.json, sweep.md (mean ± std over stories) and
one PNG per swept setting (means with standard-error bars, tokens per prompt in the last panel).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path

from eval.compare import inference_cost
from eval.plotting import pyplot
from eval.report import LABELS, RULE_METRICS, cell
from eval.run import EvalConfig, Evaluator
from generate.backends import load_model
from generate.common.errors import UsageError
from generate.common.cli import run_cli
from generate.common.jsonl import read_jsonl
from generate.runner import RunConfig, Runner

log = logging.getLogger("sweep")
SWEEPABLE = {"rounds": int, "agents": int, "top_p": float, "temperature": float}
JUDGE = ("concepts", "logic", "characters", "world_building", "ethics")


def parse_grid(specs: list[str]) -> dict[str, list]:
    grid = {}
    for spec in specs:
        name, _, values = spec.partition("=")
        if name not in SWEEPABLE or not values:
            raise UsageError(f"bad --grid {spec!r}; expected NAME=v1,v2,... with NAME in {', '.join(SWEEPABLE)}")
        try:
            grid[name] = [SWEEPABLE[name](v) for v in values.split(",")]
        except ValueError:
            raise UsageError(f"bad value in --grid {spec!r}") from None
    return grid


def _se(stat: dict | None) -> tuple[float, float]:
    """(mean, standard error) of a summary cell; NaN where undefined, which plots as a gap."""
    if not stat or stat.get("mean") is None:
        return math.nan, math.nan
    n, sd = stat.get("n") or 0, stat.get("std")
    return stat["mean"], (sd / math.sqrt(n) if sd is not None and n > 1 else 0.0)


def plot_axis(name: str, points: list[dict], path: Path) -> None:
    plt = pyplot()
    xs = [p["value"] for p in points]
    panels = [("LLM judge (0-5)", JUDGE), *((LABELS[m], (m,)) for m in RULE_METRICS)]
    fig, axes = plt.subplots(1, len(panels) + 1, figsize=(3.0 * (len(panels) + 1), 3.0))
    for ax, (title, metrics) in zip(axes, panels):
        for m in metrics:
            means, errs = zip(*(_se(p["summary"].get(m)) for p in points))
            ax.errorbar(xs, means, yerr=errs, marker="o", capsize=3, label=LABELS[m])
        ax.set_title(title, fontsize=9)
    for ax in axes:
        ax.set_xlabel(name)
        ax.set_xticks(xs)
    axes[0].legend(fontsize=6)
    tokens = [p["cost"]["total_tokens"] if p["cost"] else math.nan for p in points]
    axes[-1].plot(xs, tokens, marker="o", color="black")
    axes[-1].set_title("Tokens per prompt", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def point_dir(out: Path, name: str, value) -> Path:
    """Where a point's run lives: the default configuration is shared by every axis."""
    default = {f.name: f.default for f in fields(RunConfig)}[name]
    return out / ("default" if value == default else f"{name}={value}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--grid", action="append", required=True, help="NAME=v1,v2,... (repeatable)")
    parser.add_argument("--framework", default="review")
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--dataset", default="default")
    parser.add_argument("--limit", type=int, default=None, help="N prompts, taken across aspects in turn")
    parser.add_argument("--max-new-tokens", type=int, default=400)
    parser.add_argument("--judge", default=None, help="judge spec (default: the writer)")
    parser.add_argument("--judge-mode", default="logprob", choices=["logprob", "sample"])
    parser.add_argument("--reference-dir", default=None)
    parser.add_argument("--reference-max-chunks", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="runs/sweep")
    args = parser.parse_args(argv)
    grid = parse_grid(args.grid)
    out = Path(args.out)
    model = load_model(args.model)
    results: dict[str, list[dict]] = {}
    for name, values in grid.items():
        results[name] = []
        for value in values:
            point = point_dir(out, name, value)
            cfg = RunConfig(framework=args.framework, model=args.model, dataset=args.dataset, limit=args.limit,
                            max_new_tokens=args.max_new_tokens, seed=args.seed, out=str(point), **{name: value})
            stories = Runner(cfg, model=model).run()
            ecfg = EvalConfig(stories=[str(stories)], out=str(point / "eval"), judge=args.judge or args.model,
                              judge_mode=args.judge_mode, reference_dir=args.reference_dir,
                              reference_max_chunks=args.reference_max_chunks, seed=args.seed)
            Evaluator(ecfg, models={args.model: model}).run()
            summary = json.loads((point / "eval" / "summary.json").read_text())[args.framework]
            records = list(read_jsonl(stories))
            cost = inference_cost(records, {r["prompt_id"] for r in records})
            results[name].append({"value": value, "run": str(point), "summary": summary, "cost": cost})
        plot_axis(name, results[name], out / f"sweep_{name}.png")
    (out / "sweep.json").write_text(json.dumps(results, indent=2) + "\n")
    (out / "sweep.md").write_text(render(results, args.framework))
    log.info("sweep written to %s", out)
    return 0


def render(results: dict[str, list[dict]], framework: str) -> str:
    metrics = [*JUDGE, *RULE_METRICS]
    lines = [f"# Ablation sweep: {framework}", "",
             "Cells: mean ± std over stories (homogenization: over prompts). Cost: mean per prompt over all of "
             "the framework's calls. Plots: means with standard-error bars.", ""]
    for name, points in results.items():
        head = [name, *(LABELS[m] for m in metrics), "Calls/prompt", "Tokens/prompt"]
        lines += [f"## {name}", "", "| " + " | ".join(head) + " |", "|---:|" + "---:|" * (len(head) - 1)]
        for p in points:
            cells = [cell(p["summary"].get(m), 2 if m in JUDGE else 3) for m in metrics]
            cost = p["cost"]
            cells += [f"{cost['calls']:.1f}", f"{cost['total_tokens']:,.0f}"] if cost else ["n/a", "n/a"]
            lines.append(f"| {p['value']} | " + " | ".join(cells) + " |")
        lines += ["", f"![{name}](sweep_{name}.png)", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    run_cli(main)
