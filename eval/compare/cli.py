"""`review-lab compare`: evaluated runs against a baseline, with paired gains, CIs and p-values,
inference cost and a verdict.

Each --run is NAME=DIR, DIR a run directory (stories.jsonl + eval/scores.jsonl) or a scores.jsonl
itself; the run named `base` (else the first) is the baseline. Prompts are paired by their text
(not their id), with a paired bootstrap CI and a Wilcoxon signed-rank test whose p-values are
adjusted over all the comparison's tests (Holm by default; see `eval.compare`, `eval.stats` and
`eval.multiplicity`). Runs that differ in dataset, judge, surprisal scorer, reference corpus or metrics version are
refused (exit 2, one line naming the field) unless `--allow-mismatch FIELD` says so. Writes
comparison.json, comparison.md, gains.png, cost_vs_gain.png and manifest.json (with the sha256 of
every scores.jsonl and stories.jsonl read) to --out and prints the Markdown.

    review-lab compare --run base=runs/single --run review=runs/review \
        --run tuned=runs/tuned --out runs/compare [--metrics judge_average kl] [--boot 10000]
    review-lab compare --config compare.yaml             # YAML + command-line overrides
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from eval.compare.checks import MISMATCH_FIELDS
from eval.compare.gains import compare
from eval.compare.report import render_markdown, write_outputs
from eval.compare.runs import load_run, parse_run_spec
from eval.multiplicity import CORRECTIONS
from generate.common.config import parse_config
from generate.common.errors import UsageError
from generate.common.manifest import write_manifest
from generate.common.ranges import AT_LEAST_1, FRACTION, OneOf, check_options, checked, in_range

EXAMPLE = "review-lab compare --run base=runs/benchmark/single --run review=runs/benchmark/review --out runs/compare"


@dataclass
class CompareConfig:
    run: list[str] = field(default_factory=list,
                           metadata={"help": "NAME=DIR (repeat); base, else the first, is the baseline"})
    out: str = ""
    metrics: list[str] = field(default_factory=list, metadata={"help": "default: judge average, aspects, rule metrics"})
    boot: int = field(default=10_000, metadata=in_range(AT_LEAST_1, help="bootstrap resamples"))
    seed: int = field(default=0, metadata={"help": "bootstrap seed"})
    alpha: float = field(default=0.05, metadata=in_range(FRACTION, help="significance level"))
    correction: str = field(default="holm", metadata=checked(
        OneOf(CORRECTIONS), help="how the p-values of all the tests are adjusted together: holm "
                                 "(family-wise error), bh (false discovery rate)"))
    allow_mismatch: list[str] = field(default_factory=list,
                                      metadata={"help": f"fields the runs may differ in: {', '.join(MISMATCH_FIELDS)}"})

    def __post_init__(self) -> None:
        if not self.run:
            raise UsageError("no runs given (--run base=DIR --run other=DIR)")
        if not self.out:
            raise UsageError("--out is required")
        check_options(self)


def main(argv: Sequence[str] | None = None) -> int:
    """Load the runs, compare them with the baseline, write the outputs and print the Markdown."""
    cfg = parse_config(CompareConfig, argv, prog="review-lab compare", description=__doc__.split("\n\n")[0],
                       example=EXAMPLE)
    runs = [load_run(*parse_run_spec(spec)) for spec in cfg.run]
    comparison = compare(runs, metrics=cfg.metrics or None, n_boot=cfg.boot, seed=cfg.seed, alpha=cfg.alpha,
                         allow_mismatch=cfg.allow_mismatch, correction=cfg.correction)
    write_outputs(comparison, cfg.out)
    write_manifest(cfg.out, kind="comparison", config=asdict(cfg), seed=cfg.seed,
                   extra={"provenance": comparison["provenance"], "mismatches": comparison["mismatches"],
                          "inputs": {run.name: run.inputs for run in runs}})
    print(render_markdown(comparison))
    return 0
