"""`review-lab sweep`: ablation sweeps like the paper's Figures 2-5. Vary one setting at a time
(rounds, agents, top_p, temperature), generate and evaluate at each value, and plot every metric
against it.

    review-lab sweep --framework review --grid rounds=1,2,3 --grid temperature=0.5,0.9,1.2 \
        --limit 4 --max-new-tokens 200 --out runs/sweep
    review-lab sweep --config my_sweep.yaml               # YAML + command-line overrides

One factor at a time (the others stay at their defaults), as in the paper. Each point is its own
resumable run directory (`<out>/<setting>=<value>/`), so an interrupted sweep continues; a value
equal to the default shares one directory (`<out>/default/`) across axes instead of being generated
again. Each point also records its inference cost per prompt (calls, tokens), because what a
setting gains is only half the answer. Writes sweep.json, sweep.md (mean ± std over stories) and
one PNG per swept setting (means with standard-error bars, tokens per prompt in the last panel).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from eval.compare import inference_cost
from eval.corpus.resolve import reference_dir_option
from eval.metrics.catalog import JUDGE, Catalog
from eval.plotting import pyplot
from eval.report import CELL_NOTE, cell, mark_missing, mean_and_se, read_summary
from eval.rubric import MODES
from eval.run import EvalConfig, Evaluator
from generate.backends import ModelOptions, check_spec
from generate.backends.options import batch_size_option
from generate.common.config import parse_config
from generate.common.errors import UsageError
from generate.common.jsonl import read_jsonl
from generate.common.manifest import write_manifest
from generate.common.ranges import AT_LEAST_1, OneOf, check_options, checked, in_range
from generate.datasets import check_dataset
from generate.frameworks import FRAMEWORKS
from generate.runner import RunConfig, Runner, raise_failures, run_collecting

log = logging.getLogger("sweep")
SWEEPABLE = {"rounds": int, "agents": int, "top_p": float, "temperature": float}
EXAMPLE = "review-lab sweep --framework review --grid rounds=1,2,3 --grid agents=2,3 --limit 4 --out runs/sweep"


@dataclass
class SweepConfig(ModelOptions):
    batch_size: int = batch_size_option(8)
    grid: list[str] = field(default_factory=list, metadata={"help": "NAME=v1,v2,... (one per swept setting)"})
    framework: str = field(default="review", metadata=checked(OneOf(FRAMEWORKS)))
    dataset: str = field(default="default", metadata=checked(check_dataset))
    limit: int | None = field(default=None, metadata=in_range(
        AT_LEAST_1, help="N prompts, taken across aspects in turn"))
    max_new_tokens: int = field(default=400, metadata=in_range(AT_LEAST_1))
    judge: str | None = field(default=None, metadata=checked(check_spec, help="judge spec (default: the writer)"))
    judge_mode: str = field(default="logprob", metadata=checked(OneOf(MODES)))
    reference_dir: str | None = reference_dir_option()
    reference_max_chunks: int | None = field(default=None, metadata=in_range(AT_LEAST_1))
    seed: int = 0
    out: str = "runs/sweep"

    def __post_init__(self) -> None:
        if not self.grid:
            raise UsageError("nothing to sweep: give --grid NAME=v1,v2,...")


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


def plot_axis(name: str, points: list[dict], catalog: Catalog, path: Path) -> None:
    plt = pyplot()
    xs = [p["value"] for p in points]
    judge = [m for m in catalog.metrics if m.group == JUDGE]
    panels = [("LLM judge (0-5)", judge), *((m.label, [m]) for m in catalog.metrics if m.group != JUDGE)]
    fig, axes = plt.subplots(1, len(panels) + 1, figsize=(3.0 * (len(panels) + 1), 3.0))
    for ax, (title, metrics) in zip(axes, panels):
        for m in metrics:
            means, errs = zip(*(mean_and_se(p["summary"].get(m.key)) for p in points))
            ax.errorbar(xs, means, yerr=errs, marker="o", capsize=3, label=m.label)
            mark_missing(ax, xs, means)
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


def point_runs(cfg: SweepConfig, grid: dict[str, list], out: Path) -> dict[str, list[tuple[object, RunConfig]]]:
    """Every grid point's run config, built (so checked) before the sweep writes or loads anything:
    a point its framework refuses (`--grid agents=1` for review) or out of its option's range
    (`rounds=0`) stops the sweep with one line, not after the manifest, the model and earlier axes."""
    runs: dict[str, list[tuple[object, RunConfig]]] = {}
    for name, values in grid.items():
        runs[name] = []
        for value in values:
            try:
                run = RunConfig(framework=cfg.framework, model=cfg.model, dataset=cfg.dataset, limit=cfg.limit,
                                max_new_tokens=cfg.max_new_tokens, seed=cfg.seed,
                                out=str(point_dir(out, name, value)), **cfg.connection(), **{name: value})
                check_options(run)  # ranges are otherwise checked only for a config built from a command line
            except UsageError as exc:
                raise UsageError(f"--grid {name}={value}: {exc}") from None
            runs[name].append((value, run))
    return runs


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_config(SweepConfig, argv, prog="review-lab sweep", description=__doc__.split("\n\n")[0],
                       example=EXAMPLE)
    out = Path(cfg.out)
    runs = point_runs(cfg, parse_grid(cfg.grid), out)
    write_manifest(out, kind="sweep", config=asdict(cfg), seed=cfg.seed)
    model = cfg.load(cfg.model)
    results: dict[str, list[dict]] = {}
    catalog = None
    failed: dict[str, dict[str, str]] = {}
    for name, points in runs.items():
        results[name] = []
        for value, run in points:
            point = Path(run.out)
            stories = run_collecting(Runner(run, model=model), failed)
            ecfg = EvalConfig(stories=[str(stories)], out=str(point / "eval"), judge=cfg.judge or cfg.model,
                              judge_mode=cfg.judge_mode, reference_dir=cfg.reference_dir,
                              reference_max_chunks=cfg.reference_max_chunks, seed=cfg.seed, **cfg.connection())
            Evaluator(ecfg, models={cfg.model: model}).run()
            catalog, by_framework = read_summary(point / "eval" / "summary.json")
            records = list(read_jsonl(stories))
            cost = inference_cost(records, {r["prompt_id"] for r in records})
            results[name].append({"value": value, "run": str(point), "summary": by_framework[cfg.framework],
                                  "cost": cost})
        plot_axis(name, results[name], catalog, out / f"sweep_{name}.png")
    (out / "sweep.json").write_text(json.dumps({"metrics": catalog.to_json(), "axes": results}, indent=2) + "\n")
    (out / "sweep.md").write_text(render(results, cfg.framework, catalog))
    log.info("sweep written to %s", out)
    raise_failures(failed)
    return 0


def render(results: dict[str, list[dict]], framework: str, catalog: Catalog) -> str:
    lines = [f"# Ablation sweep: {framework}", "",
             f"{CELL_NOTE} Cost: mean per prompt over all of the framework's calls. Plots: means with "
             "standard-error bars.", ""]
    for name, points in results.items():
        head = [name, *(m.label for m in catalog.metrics), "Calls/prompt", "Tokens/prompt"]
        lines += [f"## {name}", "", "| " + " | ".join(head) + " |", "|---:|" + "---:|" * (len(head) - 1)]
        for p in points:
            cells = [cell(p["summary"].get(m.key), m.digits) for m in catalog.metrics]
            cost = p["cost"]
            cells += [f"{cost['calls']:.1f}", f"{cost['total_tokens']:,.0f}"] if cost else ["n/a", "n/a"]
            lines.append(f"| {p['value']} | " + " | ".join(cells) + " |")
        lines += ["", f"![{name}](sweep_{name}.png)", ""]
    return "\n".join(lines)
