"""Benchmark the hf backend's paths on the same Review run: transformers' lockstep `generate()`
(`path="generate"`), our `fast` loop (a CPU's default) and the `static` one (CUDA's default: a
static cache, the step replayed as a CUDA graph), against the raw decode ceiling measured here.

    python scripts/bench_engines.py --prompts 6 --max-new-tokens 64 --batch-size 48
    python scripts/bench_engines.py --paths fast static --prompts 20 --max-new-tokens 200  # on a GPU

Each path runs LLM Review (3 agents, 3 rounds) on the same prompts and seeds, through the real
runner (phases, journal, cleaning) into a temporary directory. The ceiling is `generate()` on
`--batch-size` independent short prompts for `--ceiling-tokens` tokens each (every token counts,
no prompt reuse, no phases): the most a batched transformers engine gives on this machine.
Runner efficiency = a path's completion tokens per second / the ceiling's. The last lines give
each path's completion tokens per second over the first path's.
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from generate.backends import Model, load_backend
from generate.backends.hf import static
from generate.common import machine
from generate.common.cli import run_cli
from generate.common.config import parse_config
from generate.common.jsonl import read_jsonl
from generate.runner import RunConfig, Runner


@dataclass
class BenchConfig:
    model: str = "smollm2-135m-instruct"
    dataset: str = "default"
    prompts: int = 6
    max_new_tokens: int = 64
    batch_size: int = 48
    rounds: int = 3
    ceiling_tokens: int = 128
    paths: list[str] = field(default_factory=lambda: ["generate", "fast"])  # the hf backend's `path` option


def ceiling(backend, n: int, tokens: int) -> float:
    """Completion tokens per second of `generate()` on n independent short prompts."""
    tok, lm = backend.tokenizer, backend.lm
    texts = [tok.apply_chat_template([{"role": "user", "content": f"Write a short story about topic {i}."}],
                                     add_generation_prompt=True, tokenize=False) for i in range(n)]
    enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    torch.manual_seed(0)
    start = time.perf_counter()
    with torch.inference_mode():
        lm.generate(**enc, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=True, temperature=0.9, top_p=0.9,
                    pad_token_id=tok.pad_token_id)
    return n * tokens / (time.perf_counter() - start)


def decode_mode() -> str:
    """How the static path decoded: from CUDA graphs, or eagerly (and why)."""
    if not torch.cuda.is_available():
        return "eager (no CUDA)"
    failure = static.capture_failure()
    return f"eager, the capture failed: {failure}" if failure else "CUDA graphs"


def review_run(backend, cfg: BenchConfig, out: Path) -> dict:
    run = RunConfig(framework="review", model=cfg.model, dataset=cfg.dataset, limit=cfg.prompts, rounds=cfg.rounds,
                    max_new_tokens=cfg.max_new_tokens, batch_size=cfg.batch_size, out=str(out))
    start = time.perf_counter()
    path = Runner(run, model=Model(backend)).run()
    seconds = time.perf_counter() - start
    stories = list(read_jsonl(path))
    prompts = {s["prompt_id"]: s["prompt_usage"] for s in stories}
    completion = sum(u["completion_tokens"] for u in prompts.values())
    return {"seconds": seconds, "stories": len(stories), "calls": sum(u["calls"] for u in prompts.values()),
            "completion_tokens": completion, "prompt_tokens": sum(u["prompt_tokens"] for u in prompts.values()),
            "stories_per_min": 60 * len(stories) / seconds, "tokens_per_s": completion / seconds}


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_config(BenchConfig, argv, prog="python scripts/bench_engines.py", description=__doc__.split("\n")[0])
    logging.getLogger().setLevel(logging.WARNING)
    plain = load_backend(cfg.model, batch_size=cfg.batch_size, path="generate")  # the model as loaded
    m = machine.describe()
    gpu = f"; {torch.cuda.get_device_name()} (torch {torch.__version__})" if torch.cuda.is_available() else ""
    print(f"machine: {m['cpu']}, {m['cores']} cores, {', '.join(m['isa']) or 'no listed ISA'}{gpu}; "
          f"model in {plain.describe()['dtype']} (the numbers below hold for this kind of machine only)")
    ceiling(plain, 4, 4)  # warm-up
    top = ceiling(plain, cfg.batch_size, cfg.ceiling_tokens)
    print(f"raw ceiling: generate() on {cfg.batch_size} x {cfg.ceiling_tokens} tokens: {top:.1f} tokens/s")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for path in cfg.paths:
            # A path prepares its own model (`fast` may pack the linear weights): one backend each.
            backend = plain if path == "generate" else load_backend(cfg.model, batch_size=cfg.batch_size, path=path)
            r = results[path] = review_run(backend, cfg, Path(tmp) / path)
            print(f"{path}: review, {cfg.prompts} prompts, {r['calls']} calls, {r['completion_tokens']:,} completion "
                  f"+ {r['prompt_tokens']:,} prompt tokens: {r['seconds']:.1f} s, {r['stories_per_min']:.2f} stories/min, "
                  f"{r['tokens_per_s']:.1f} completion tokens/s, runner efficiency {r['tokens_per_s'] / top:.2f}")
            if path == "static":
                print(f"static decode: {decode_mode()}")
    first, *others = cfg.paths
    for path in others:  # completion tokens per second, as the GPU targets are stated
        ratio = results[path]["tokens_per_s"] / results[first]["tokens_per_s"]
        print(f"ratio {path}/{first} (completion tokens per second): {ratio:.2f}x")
    return 0


if __name__ == "__main__":
    run_cli(main)
