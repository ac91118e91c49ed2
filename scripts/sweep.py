"""Ablation sweeps like the paper's Figures 2-5: vary one setting at a time (rounds, agents,
top_p, temperature), generate and evaluate at each value, and plot every metric against it.

    python scripts/sweep.py --framework review --grid rounds=1,2,3 --grid temperature=0.5,0.9,1.2 \
        --limit 4 --max-new-tokens 200 --out runs/sweep

One factor at a time (the others stay at their defaults), as in the paper. Each point is its own
resumable run directory (`<out>/<setting>=<value>/`), so an interrupted sweep continues.
Writes sweep.json, sweep.md and one PNG per swept setting.
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Sequence
from pathlib import Path

from eval.plotting import pyplot
from eval.report import LABELS, RULE_METRICS
from eval.run import EvalConfig, Evaluator
from generate.backends import load_model
from generate.cli import UsageError, run_cli
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


def plot_axis(name: str, points: list[dict], path: Path) -> None:
    plt = pyplot()
    xs = [p["value"] for p in points]
    panels = [("LLM judge (0-5)", JUDGE), *((LABELS[m], (m,)) for m in RULE_METRICS)]
    fig, axes = plt.subplots(1, len(panels), figsize=(3.0 * len(panels), 3.0))
    for ax, (title, metrics) in zip(axes, panels):
        for m in metrics:
            ys = [p["summary"].get(m, {}).get("mean") for p in points]
            ys = [float("nan") if y is None else y for y in ys]
            ax.plot(xs, ys, marker="o", label=LABELS[m])
        ax.set_title(title, fontsize=9)
        ax.set_xlabel(name)
    axes[0].legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--grid", action="append", required=True, help="NAME=v1,v2,... (repeatable)")
    parser.add_argument("--framework", default="review")
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--dataset", default="default")
    parser.add_argument("--limit", type=int, default=None)
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
            point = out / f"{name}={value}"
            cfg = RunConfig(framework=args.framework, model=args.model, dataset=args.dataset, limit=args.limit,
                            max_new_tokens=args.max_new_tokens, seed=args.seed, out=str(point), **{name: value})
            stories = Runner(cfg, model=model).run()
            ecfg = EvalConfig(stories=[str(stories)], out=str(point / "eval"), judge=args.judge or args.model,
                              judge_mode=args.judge_mode, reference_dir=args.reference_dir,
                              reference_max_chunks=args.reference_max_chunks, seed=args.seed)
            Evaluator(ecfg, models={args.model: model}).run()
            summary = json.loads((point / "eval" / "summary.json").read_text())[args.framework]
            results[name].append({"value": value, "summary": summary})
        plot_axis(name, results[name], out / f"sweep_{name}.png")
    (out / "sweep.json").write_text(json.dumps(results, indent=2) + "\n")
    (out / "sweep.md").write_text(render(results, args.framework))
    log.info("sweep written to %s", out)
    return 0


def render(results: dict[str, list[dict]], framework: str) -> str:
    metrics = [*JUDGE, *RULE_METRICS]
    lines = [f"# Ablation sweep: {framework}", ""]
    for name, points in results.items():
        lines += [f"## {name}", "", f"| {name} | " + " | ".join(LABELS[m] for m in metrics) + " |",
                  "|---:|" + "---:|" * len(metrics)]
        for p in points:
            cells = [_mean(p["summary"].get(m)) for m in metrics]
            lines.append(f"| {p['value']} | " + " | ".join(cells) + " |")
        lines += ["", f"![{name}](sweep_{name}.png)", ""]
    return "\n".join(lines)


def _mean(stat: dict | None) -> str:
    return "n/a" if not stat or stat.get("mean") is None else f"{stat['mean']:.3f}"


if __name__ == "__main__":
    run_cli(main)
