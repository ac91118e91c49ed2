"""`review-lab benchmark`, the main job: every framework with one writer on one dataset, evaluated
as the paper does, in one table with inference cost (`benchmark.json`, `benchmark.md`).

    review-lab benchmark --model smollm2-135m-instruct --dataset default --limit 4 \
        --reference-dir ../shared/data/scifi-reference/texts --out runs/benchmark
    review-lab benchmark --config my_benchmark.yaml --limit 10      # YAML + overrides

Each framework is its own run directory (`<out>/<framework>/`, evaluated into its `eval/`), so
any two compare directly: `review-lab compare --run base=<out>/single --run review=<out>/review`.
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
from typing import Any

from eval.benchmark.table import write_benchmark
from eval.corpus.resolve import one_notice, reference_dir_option
from eval.rubric import MODES
from eval.run import EvalConfig, Evaluator
from eval.view import write_view
from generate.backends import Model, ModelOptions, check_spec
from generate.backends.options import batch_size_option
from generate.common import machine
from generate.common.config import parse_config
from generate.common.errors import PartialFailure, UsageError
from generate.common.jsonl import read_jsonl
from generate.common.lock import output_lock
from generate.common.manifest import write_manifest
from generate.common.ranges import AT_LEAST_1, OneOf, checked, in_range
from generate.datasets import check_dataset
from generate.frameworks import FRAMEWORKS
from generate.runner import RunConfig, Runner, raise_failures, run_collecting

log = logging.getLogger("benchmark")
ORDER = ["single", "teacher", "debate", "discussion", "review"]
EXAMPLE = "review-lab benchmark --limit 4 --max-new-tokens 200 --reference-max-chunks 2000 --out runs/benchmark"


@dataclass
class BenchmarkConfig(ModelOptions):
    """The writer (`--model`, its batching and connection), shared by every framework; the judge
    is the writer unless `--judge` names another model, reached with the same options."""

    batch_size: int = batch_size_option(48)
    dataset: str = field(default="default", metadata=checked(check_dataset))
    limit: int | None = field(default=None, metadata=in_range(
        AT_LEAST_1, help="N prompts, taken across aspects in turn"))
    out: str = "runs/benchmark"
    frameworks: list[str] = field(default_factory=lambda: list(ORDER), metadata=checked(OneOf(FRAMEWORKS)))
    max_new_tokens: int = field(default=400, metadata=in_range(AT_LEAST_1))
    seed: int = 0
    judge: str | None = field(default=None, metadata=checked(check_spec, help="judge model spec (default: the writer)"))
    judge_mode: str = field(default="logprob", metadata=checked(OneOf(MODES)))
    reference_dir: str | None = reference_dir_option()
    reference_max_chunks: int | None = field(default=None, metadata=in_range(AT_LEAST_1))
    no_eval: bool = field(default=False, metadata={"help": "generate only"})

    def __post_init__(self) -> None:
        if not self.frameworks or len(set(self.frameworks)) < len(self.frameworks):
            raise UsageError(f"--frameworks {' '.join(self.frameworks) or '(none)'}: name each framework once")


@one_notice()  # five evaluations, one "reference metrics unavailable" line
def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_config(BenchmarkConfig, argv, prog="review-lab benchmark", description=__doc__.split("\n\n")[0],
                       example=EXAMPLE)
    out = Path(cfg.out)
    with output_lock(out):  # one benchmark per directory: its manifest and table describe that one
        write_manifest(out, kind="benchmark", config=asdict(cfg), seed=cfg.seed)
        model = cfg.load(cfg.model)
        runners = [Runner(RunConfig(framework=name, model=cfg.model, dataset=cfg.dataset, limit=cfg.limit,
                                    seed=cfg.seed, max_new_tokens=cfg.max_new_tokens, out=str(out / name),
                                    **cfg.connection()), model=model) for name in cfg.frameworks]
        failed: dict[str, dict[str, str]] = {}
        unscored: dict[str, str] = {}
        started = time.perf_counter()
        for k, runner in enumerate(runners, 1):
            log.info("[%d/%d] %s (benchmark elapsed %s, peak resident memory so far %s GiB)", k, len(runners),
                     runner.cfg.framework, _clock(time.perf_counter() - started), machine.peak_rss_gb())
            run_and_evaluate(runner, None if cfg.no_eval else eval_config(cfg, runner.out), model, failed, unscored)
        log.info("all frameworks done in %s (peak resident memory %s GiB)", _clock(time.perf_counter() - started),
                 machine.peak_rss_gb())
        asked = [t.id for t in runners[0].tasks]
        write_benchmark(out, cfg.frameworks, f"Benchmark: {cfg.model} on {cfg.dataset}", asked)
        write_view([out / name for name in cfg.frameworks], out / "view.html",
                   title=f"Benchmark: {cfg.model} on {cfg.dataset}")
    log.info("table: %s", out / "benchmark.md")
    raise_failures(failed, unscored)
    return 0


def eval_config(cfg: Any, run: Path) -> EvalConfig:
    """The evaluation of one run of a composite command (a benchmark's framework, a sweep's point):
    its judge (default: the writer), reference corpus and model options are the command's."""
    return EvalConfig(stories=[str(run / "stories.jsonl")], out=str(run / "eval"), judge=cfg.judge or cfg.model,
                      judge_mode=cfg.judge_mode, seed=cfg.seed, reference_dir=cfg.reference_dir,
                      reference_max_chunks=cfg.reference_max_chunks, **cfg.connection())


def run_and_evaluate(runner: Runner, evaluation: EvalConfig | None, model: Model,
                     failed: dict[str, dict[str, str]], unscored: dict[str, str]) -> None:
    """Generate one run of a composite command and evaluate it (`evaluation` None: generate only).
    Prompts that failed go to `failed`, stories left to score to `unscored` (their directory -> the
    evaluation's last line), and the command goes on with its other runs and names them all at the
    end (`raise_failures`). A run left without stories (every prompt failed) is not evaluated: the
    evaluation would refuse an empty file with a usage error that hides why it is empty."""
    stories = run_collecting(runner, failed)
    if evaluation is None or next(read_jsonl(stories), None) is None:
        return
    try:
        Evaluator(evaluation, models={runner.cfg.model: model}).run()
    except PartialFailure as exc:  # stories left to score (transient judge failures): the next run
        unscored[evaluation.out] = str(exc)


def _clock(seconds: float) -> str:
    return time.strftime("%H:%M:%S", time.gmtime(seconds))
