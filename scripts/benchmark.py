"""The main job: every framework with one writer on one dataset, then (when the evaluation
package is available) the paper's evaluation of all of them in one table.

    python scripts/benchmark.py --model smollm2-135m-instruct --dataset default --limit 4 --out runs/benchmark

Resumable: each framework's run directory is resumable, so re-running continues where an
interrupted benchmark stopped.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from pathlib import Path

from generate.backends import load_model
from generate.cli import run_cli
from generate.frameworks import FRAMEWORKS
from generate.runner import RunConfig, Runner

log = logging.getLogger("benchmark")
ORDER = ["single", "teacher", "debate", "discussion", "review"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--dataset", default="default")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--out", default="runs/benchmark")
    parser.add_argument("--max-new-tokens", type=int, default=400)
    parser.add_argument("--frameworks", nargs="+", default=ORDER, choices=sorted(FRAMEWORKS))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    out = Path(args.out)
    model = load_model(args.model)
    for name in args.frameworks:
        cfg = RunConfig(framework=name, model=args.model, dataset=args.dataset, limit=args.limit,
                        max_new_tokens=args.max_new_tokens, seed=args.seed, out=str(out / name))
        Runner(cfg, model=model).run()
        log.info("%s done: %s", name, out / name / "stories.jsonl")
    return 0


if __name__ == "__main__":
    run_cli(main)
