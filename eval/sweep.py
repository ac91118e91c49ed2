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

Every point is summarised over the same prompts, those of the invocation that every point finished
(`eval.benchmark.coverage`), and the tables say what each point has outside them. Like the
benchmark, the sweep goes on past a point with failed prompts or stories left to score, writes its
tables, and ends with one line naming what is left (exit 1): a re-run finishes them.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from eval.benchmark.coverage import RunRecords, common_prompts, coverage_lines, left_out, unlike, unlike_lines
from eval.benchmark.run import eval_config, run_and_evaluate
from eval.compare import inference_cost
from eval.corpus.resolve import reference_dir_option
from eval.metrics.catalog import JUDGE, Catalog
from eval.plotting import pyplot
from eval.report import CELL_NOTE, cell, mark_missing, mean_and_se
from eval.rubric import MODES
from generate.backends import ModelOptions, check_spec
from generate.backends.options import batch_size_option
from generate.common.config import parse_config
from generate.common.errors import UsageError
from generate.common.lock import output_lock
from generate.common.manifest import write_manifest
from generate.common.ranges import AT_LEAST_1, OneOf, check_options, checked, in_range
from generate.datasets import check_dataset
from generate.frameworks import FRAMEWORKS
from generate.runner import RunConfig, Runner, raise_failures

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
    """{setting: its values} of `--grid NAME=v1,v2,...` specs. A setting given twice, or a value
    given twice for one setting, is refused: the later spec would replace the earlier one's points
    (or repeat a row), and a point the user asked for would be missing from the tables unsaid."""
    grid: dict[str, list] = {}
    for spec in specs:
        name, _, values = spec.partition("=")
        if name not in SWEEPABLE or not values:
            raise UsageError(f"bad --grid {spec!r}; expected NAME=v1,v2,... with NAME in {', '.join(SWEEPABLE)}")
        if name in grid:
            raise UsageError(f"--grid {name} given twice; give all its values in one --grid {name}=v1,v2,...")
        try:
            grid[name] = [SWEEPABLE[name](v) for v in values.split(",")]
        except ValueError:
            raise UsageError(f"bad value in --grid {spec!r}") from None
        if len(set(grid[name])) < len(grid[name]):
            raise UsageError(f"--grid {spec!r} names a value twice")
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
    if judge:  # none when no point was evaluated
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
    with output_lock(out):  # one sweep per directory: its manifest and tables describe that one
        write_manifest(out, kind="sweep", config=asdict(cfg), seed=cfg.seed)
        model = cfg.load(cfg.model)
        failed: dict[str, dict[str, str]] = {}
        unscored: dict[str, str] = {}
        asked: list[str] = []
        for run in {run.out: run for points in runs.values() for _, run in points}.values():  # default: once
            runner = Runner(run, model=model)
            asked = asked or [t.id for t in runner.tasks]
            run_and_evaluate(runner, eval_config(cfg, runner.out), model, failed, unscored)
        catalog, results, coverage = sweep_results(cfg.framework, runs, asked)
        for name, points in results.items():
            plot_axis(name, points, catalog, out / f"sweep_{name}.png")
        payload = {"metrics": catalog.to_json(), "axes": results, "coverage": coverage}
        (out / "sweep.json").write_text(json.dumps(payload, indent=2) + "\n")
        (out / "sweep.md").write_text(render(results, cfg.framework, catalog, coverage))
    log.info("sweep written to %s", out)
    raise_failures(failed, unscored)
    return 0


def sweep_results(framework: str, runs: dict[str, list[tuple[object, RunConfig]]],
                  asked: list[str]) -> tuple[Catalog, dict[str, list[dict]], dict]:
    """(catalog, {axis: [{value, run, summary, cost}]}, coverage): every point's summary and cost
    over the same prompts, those asked that every point finished (`coverage.common_prompts`)."""
    records = {run.out: RunRecords.read(Path(run.out)) for points in runs.values() for _, run in points}
    common = common_prompts(records, asked)
    catalog = next((r.catalog for r in records.values() if r.catalog is not None), None) or Catalog.from_aspects({})
    results = {name: [{"value": value, "run": run.out, "summary": records[run.out].summary(framework, common) or {},
                       "cost": inference_cost(records[run.out].stories, common) if common else None}
                      for value, run in points] for name, points in runs.items()}
    left = left_out({Path(out).name: r for out, r in records.items()}, common, asked)
    unlike_points = unlike({Path(out).name: Path(out) for out in records})
    return catalog, results, {"prompts": sorted(common), "left_out": left, "mismatches": unlike_points}


def render(results: dict[str, list[dict]], framework: str, catalog: Catalog, coverage: dict) -> str:
    lines = [f"# Ablation sweep: {framework}", "", *unlike_lines(coverage["mismatches"], "point"),
             f"{CELL_NOTE} Cost: mean per prompt over all of the framework's calls. Plots: means with "
             "standard-error bars.", "", *coverage_lines(set(coverage["prompts"]), coverage["left_out"], "point")]
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
