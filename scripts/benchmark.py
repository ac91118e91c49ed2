"""The main job: every framework with one writer on one dataset, evaluated as the paper does,
in one table with inference cost (`benchmark.json`, `benchmark.md`).

    python scripts/benchmark.py --model smollm2-135m-instruct --dataset default --limit 4 \
        --reference-dir ../shared/data/scifi-reference/texts --out runs/benchmark

Resumable: generation and evaluation both skip finished work, so re-running the same command
continues an interrupted benchmark.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from pathlib import Path

from eval.benchmark import write_benchmark
from eval.run import EvalConfig, Evaluator
from generate.backends import load_model
from generate.common.cli import run_cli
from generate.frameworks import FRAMEWORKS
from generate.runner import RunConfig, Runner

log = logging.getLogger("benchmark")
ORDER = ["single", "teacher", "debate", "discussion", "review"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct", help="writer model spec")
    parser.add_argument("--dataset", default="default")
    parser.add_argument("--limit", type=int, default=None, help="N prompts, taken across aspects in turn")
    parser.add_argument("--out", default="runs/benchmark")
    parser.add_argument("--frameworks", nargs="+", default=ORDER, choices=sorted(FRAMEWORKS))
    parser.add_argument("--max-new-tokens", type=int, default=400)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--judge", default=None, help="judge model spec (default: the writer)")
    parser.add_argument("--judge-mode", default="logprob", choices=["logprob", "sample"])
    parser.add_argument("--reference-dir", default=None, help="classic SF .txt works (else $SCIFI_REFERENCE_DIR)")
    parser.add_argument("--reference-max-chunks", type=int, default=None)
    parser.add_argument("--no-eval", action="store_true", help="generate only")
    args = parser.parse_args(argv)
    out = Path(args.out)
    model = load_model(args.model, batch_size=args.batch_size)
    for name in args.frameworks:
        cfg = RunConfig(framework=name, model=args.model, dataset=args.dataset, limit=args.limit, seed=args.seed,
                        max_new_tokens=args.max_new_tokens, batch_size=args.batch_size, out=str(out / name))
        Runner(cfg, model=model).run()
    if not args.no_eval:
        ecfg = EvalConfig(stories=[str(out / fw / "stories.jsonl") for fw in args.frameworks], out=str(out / "eval"),
                          judge=args.judge or args.model, judge_mode=args.judge_mode, seed=args.seed,
                          reference_dir=args.reference_dir, reference_max_chunks=args.reference_max_chunks,
                          batch_size=args.batch_size)
        Evaluator(ecfg, models={args.model: model}).run()
    write_benchmark(out, args.frameworks, f"Benchmark: {args.model} on {args.dataset}")
    log.info("table: %s", out / "benchmark.md")
    return 0


if __name__ == "__main__":
    run_cli(main)
