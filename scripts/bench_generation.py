"""Benchmark phase-synchronous batching against one call at a time.

Runs LLM Review on the same prompts with the embedded default writer twice: phase-batched
(every call of a phase, across prompts and agents, goes to the model together) and sequential
(one call at a time, as the authors' public code does). Prints stories per minute for both;
the last line is their ratio.

    python scripts/bench_generation.py --prompts 6 --max-new-tokens 64
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from pathlib import Path

from generate.backends import Model, load_backend, resolve_spec
from generate.backends.hf.backend import PATHS
from generate.runner import RunConfig, Runner


def run_once(backend, out: Path, args, batch: int, chunk: int) -> float:
    backend.batch_size = batch
    cfg = RunConfig(framework="review", model=args.model, dataset=args.dataset, limit=args.prompts, out=str(out),
                    max_new_tokens=args.max_new_tokens, rounds=args.rounds, chunk_prompts=chunk, batch_size=batch)
    start = time.perf_counter()
    path = Runner(cfg, model=Model(backend)).run()  # a failed prompt raises: a rate over fewer stories would lie
    minutes = (time.perf_counter() - start) / 60
    stories = len(path.read_text().splitlines())
    return stories / minutes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--dataset", default="default")
    parser.add_argument("--prompts", type=int, default=6)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--path", choices=PATHS, default="fast", help="the hf backend's path (hf models only)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    backend = load_backend(args.model, **({"path": args.path} if resolve_spec(args.model)[0] == "hf" else {}))
    with tempfile.TemporaryDirectory() as tmp:
        batched = run_once(backend, Path(tmp) / "batched", args, batch=args.batch_size, chunk=args.prompts)
        sequential = run_once(backend, Path(tmp) / "sequential", args, batch=1, chunk=1)
    print(f"review, {args.prompts} prompts, {args.rounds} rounds, max_new_tokens={args.max_new_tokens}")
    print(f"phase-batched (batch {args.batch_size}): {batched:.2f} stories/min")
    print(f"one call at a time:        {sequential:.2f} stories/min")
    print(f"speedup: {batched / sequential:.2f}x")


if __name__ == "__main__":
    main()
