"""Compare evaluated runs with a baseline: paired gains with CIs and p-values, inference cost, verdict.

Each --run is NAME=DIR, DIR a run directory (stories.jsonl + eval/scores.jsonl) or a scores.jsonl
itself; the run named `base` (else the first) is the baseline. Gains are paired by prompt, with a
paired bootstrap CI and a Wilcoxon signed-rank test (see `eval.compare` and `eval.stats`).
Writes comparison.json, comparison.md, gains.png and cost_vs_gain.png to --out and prints the
Markdown.

Usage:
    python scripts/compare.py --run base=runs/single --run review=runs/review \
        --run tuned=runs/tuned --out runs/compare [--metrics judge_average kl] [--boot 10000]
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from eval.compare import DEFAULT_METRICS, compare, load_run, parse_run_spec
from eval.compare_report import render_markdown, write_outputs
from generate.common.errors import UsageError
from generate.common.cli import run_cli


def main(argv: Sequence[str] | None = None) -> int:
    """Load the runs, compare them with the baseline, write the outputs and print the Markdown."""
    parser = argparse.ArgumentParser(prog="python scripts/compare.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", action="append", required=True, metavar="NAME=DIR",
                        help="a run to compare (repeat); the one named base, else the first, is the baseline")
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--metrics", nargs="+", default=list(DEFAULT_METRICS), help="default: %(default)s")
    parser.add_argument("--boot", type=int, default=10_000, help="bootstrap resamples (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed (default: %(default)s)")
    parser.add_argument("--alpha", type=float, default=0.05, help="significance level (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.boot < 1:
        raise UsageError("--boot must be at least 1")
    if not 0 < args.alpha < 1:
        raise UsageError("--alpha must be between 0 and 1")

    runs = [load_run(*parse_run_spec(spec)) for spec in args.run]
    comparison = compare(runs, metrics=args.metrics, n_boot=args.boot, seed=args.seed, alpha=args.alpha)
    write_outputs(comparison, args.out)
    print(render_markdown(comparison))
    return 0


if __name__ == "__main__":
    run_cli(main)
