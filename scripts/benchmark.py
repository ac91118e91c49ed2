"""The main job: every framework with one writer on one dataset, evaluated as the paper does,
in one table with inference cost (`benchmark.json`, `benchmark.md`).

    python scripts/benchmark.py --model smollm2-135m-instruct --dataset default --limit 4 \
        --reference-dir ../shared/data/scifi-reference/texts --out runs/benchmark
    python scripts/benchmark.py --config my_benchmark.yaml --limit 10      # YAML + overrides

Each framework is its own run directory (`<out>/<framework>/`, evaluated into its `eval/`), so
any two compare directly: `python scripts/compare.py --run base=<out>/single --run review=<out>/review`.
The writer (and the judge, when it is the same model) is loaded once for all of them.

Resumable: generation and evaluation both skip finished work, so re-running the same command
continues an interrupted benchmark. Prompts that failed (a blank completion after every re-ask)
are reported at the end and the command exits 1; re-running retries them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from eval.benchmark import write_benchmark
from eval.run import EvalConfig, Evaluator
from eval.view import write_view
from generate.backends import backend_options, load_model
from generate.common import machine
from generate.common.cli import run_cli
from generate.common.config import parse_config
from generate.common.errors import UsageError
from generate.common.manifest import write_manifest
from generate.frameworks import FRAMEWORKS
from generate.runner import RunConfig, Runner, raise_failures, run_collecting

log = logging.getLogger("benchmark")
ORDER = ["single", "teacher", "debate", "discussion", "review"]


@dataclass
class BenchmarkConfig:
    model: str = field(default="smollm2-135m-instruct", metadata={"help": "writer model spec"})
    dataset: str = "default"
    limit: int | None = field(default=None, metadata={"help": "N prompts, taken across aspects in turn"})
    out: str = "runs/benchmark"
    frameworks: list[str] = field(default_factory=lambda: list(ORDER))
    max_new_tokens: int = 400
    batch_size: int = field(default=48, metadata={"help": "hf: sequences per forward pass"})
    seed: int = 0
    judge: str | None = field(default=None, metadata={"help": "judge model spec (default: the writer)"})
    judge_mode: str = field(default="logprob", metadata={"help": "logprob | sample"})
    reference_dir: str | None = field(default=None, metadata={"help": "classic SF .txt works (else $SCIFI_REFERENCE_DIR)"})
    reference_max_chunks: int | None = None
    no_eval: bool = field(default=False, metadata={"help": "generate only"})

    def __post_init__(self) -> None:
        unknown = [f for f in self.frameworks if f not in FRAMEWORKS]
        if unknown:
            raise UsageError(f"unknown framework(s) {', '.join(unknown)}; choose from {', '.join(sorted(FRAMEWORKS))}")


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_config(BenchmarkConfig, argv, prog="python scripts/benchmark.py", description=__doc__.split("\n")[0])
    out = Path(cfg.out)
    write_manifest(out, kind="benchmark", config=asdict(cfg), seed=cfg.seed)
    model = load_model(cfg.model, **backend_options(cfg.model, batch_size=cfg.batch_size))
    failed: dict[str, dict[str, str]] = {}
    started = time.perf_counter()
    for k, name in enumerate(cfg.frameworks, 1):
        log.info("[%d/%d] %s (benchmark elapsed %s, peak resident memory so far %s GiB)", k, len(cfg.frameworks), name,
                 _clock(time.perf_counter() - started), machine.peak_rss_gb())
        runner = Runner(RunConfig(framework=name, model=cfg.model, dataset=cfg.dataset, limit=cfg.limit,
                                  seed=cfg.seed, max_new_tokens=cfg.max_new_tokens, batch_size=cfg.batch_size,
                                  out=str(out / name)), model=model)
        stories = run_collecting(runner, failed)
        if not cfg.no_eval:
            ecfg = EvalConfig(stories=[str(stories)], out=str(out / name / "eval"), judge=cfg.judge or cfg.model,
                              judge_mode=cfg.judge_mode, seed=cfg.seed, reference_dir=cfg.reference_dir,
                              reference_max_chunks=cfg.reference_max_chunks, batch_size=cfg.batch_size)
            Evaluator(ecfg, models={cfg.model: model}).run()
    log.info("all frameworks done in %s (peak resident memory %s GiB)", _clock(time.perf_counter() - started),
             machine.peak_rss_gb())
    write_benchmark(out, cfg.frameworks, f"Benchmark: {cfg.model} on {cfg.dataset}")
    write_view([out / name for name in cfg.frameworks], out / "view.html",
               title=f"Benchmark: {cfg.model} on {cfg.dataset}")
    log.info("table: %s", out / "benchmark.md")
    raise_failures(failed)
    return 0


def _clock(seconds: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(seconds))


if __name__ == "__main__":
    run_cli(main)
