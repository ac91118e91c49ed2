"""The whole story in one command: does GRPO on the single agent match what LLM Review gets from
interaction, and at what cost?

    python scripts/end_to_end.py --out runs/story            # or: make story

1. Split the training prompts (by prompt, stratified by aspect; the same split the GRPO recipe
   uses). Every evaluation below uses one set of prompts that GRPO never sees: the held-out split
   (`--eval-dataset heldout`, 4 prompts of the bundled set), or prompts of another dataset such as
   SciFi-100, the paper's benchmark (`--eval-dataset scifi100 --eval-limit 8`: 8 prompts from 8
   aspects). Wilcoxon's test cannot reject at the 5% level with fewer than 6 prompts.
2. Baseline: the base writer as single agent and inside Review, on the evaluation prompts.
3. GRPO with the CPU recipe (`configs/grpo/smollm2_cpu.yaml`) on the training prompts.
4. The tuned writer, as single agent and inside Review, on the same evaluation prompts.
5. Evaluate all four runs with one judge and one surprisal scorer (the base writer, so that
   surprisal is comparable across writers), then compare them with the base single agent
   (`compare/`), and the tuned writer in Review with the base writer in Review (`compare_in_review/`).

Every step is resumable: re-running continues where an interrupted story stopped. `story.json`
records the arguments, the evaluation prompts and the wall time of each step, summed over the
invocations that finished.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from eval.compare import compare, load_run
from eval.compare_report import write_outputs
from eval.run import EvalConfig, Evaluator
from eval.view import write_view
from generate.backends import load_model
from generate.common.cli import run_cli
from generate.common.errors import UsageError
from generate.common.paths import REPO_ROOT
from generate.datasets import Task, load_dataset, spread_over_aspects
from generate.runner import RunConfig, Runner, raise_failures, run_collecting
from train.split import load_split, split_tasks

log = logging.getLogger("end_to_end")
BASE = "smollm2-135m-instruct"
RUNS = {"base": ("single", "base"), "review": ("review", "base"),
        "tuned": ("single", "tuned"), "tuned_review": ("review", "tuned")}


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="runs/story")
    parser.add_argument("--recipe", default="configs/grpo/smollm2_cpu.yaml")
    parser.add_argument("--max-steps", type=int, default=None, help="override the recipe's GRPO steps")
    parser.add_argument("--max-new-tokens", type=int, default=160)
    parser.add_argument("--eval-dataset", default="heldout",
                        help="evaluation prompts: 'heldout' (the training set's held-out split) or a dataset "
                             "disjoint from training, e.g. scifi100")
    parser.add_argument("--eval-limit", type=int, default=None, help="at most N evaluation prompts, across aspects")
    parser.add_argument("--reference-dir", default=None, help="classic SF .txt works (else $SCIFI_REFERENCE_DIR)")
    parser.add_argument("--reference-max-chunks", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args(argv)


def train(args: argparse.Namespace, out: Path) -> Path:
    merged = out / "grpo" / "merged"
    if (merged / "config.json").is_file():
        log.info("GRPO already done: %s", merged)
        return merged
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", "configs/accelerate/cpu.yaml",
           "train/grpo.py", "--config", args.recipe, "--output_dir", str((out / "grpo").resolve())]
    if args.max_steps:
        cmd += ["--max_steps", str(args.max_steps)]
    log.info("training: %s", " ".join(cmd))
    if subprocess.run(cmd, cwd=REPO_ROOT, env=os.environ).returncode != 0:
        raise UsageError("GRPO training failed; see its log above")
    return merged


def evaluation_prompts(spec: str, limit: int | None, train_tasks: list[Task], heldout: list[Task]) -> list[Task]:
    """The prompts every run is evaluated on; none of them may be a training prompt."""
    tasks = spread_over_aspects(heldout if spec == "heldout" else load_dataset(spec), limit)
    seen = {t.prompt.strip().lower() for t in train_tasks}
    leaked = [t.id for t in tasks if t.prompt.strip().lower() in seen]
    if leaked:
        raise UsageError(f"--eval-dataset {spec}: {len(leaked)} prompt(s) are also training prompts, e.g. {leaked[0]}")
    if not tasks:
        raise UsageError(f"--eval-dataset {spec}: no prompts")
    return tasks


def write_prompts(tasks: list[Task], path: Path) -> None:
    """Write the evaluation prompts, refusing to mix them with another set's runs in the same --out."""
    text = "".join(json.dumps({"id": t.id, "aspect": t.aspect, "prompt": t.prompt}) + "\n" for t in tasks)
    if path.is_file() and path.read_text() != text:
        raise UsageError(f"{path.parent} was made with other evaluation prompts; use another --out")
    path.write_text(text)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    tasks = load_dataset("default")
    split = split_tasks(tasks, eval_fraction=0.2, seed=0, dataset="default")
    prompts = evaluation_prompts(args.eval_dataset, args.eval_limit, split.select(tasks, "train"),
                                 split.select(tasks, "eval"))
    prompts_file = out / "eval_prompts.jsonl"
    write_prompts(prompts, prompts_file)
    log.info("evaluating on %d prompts (%s) over %d aspects", len(prompts), args.eval_dataset,
             len({t.aspect for t in prompts}))

    failed: dict[str, dict[str, str]] = {}

    def generate(name: str, writer: str) -> None:
        framework, _ = RUNS[name]
        start = time.perf_counter()
        run_collecting(Runner(RunConfig(framework=framework, model=writer, dataset=str(prompts_file), seed=args.seed,
                                        max_new_tokens=args.max_new_tokens, out=str(out / name)),
                              model=load_model(writer)), failed)
        timings[f"generate {name}"] = time.perf_counter() - start

    for name in ("base", "review"):
        generate(name, BASE)
    start = time.perf_counter()
    merged = train(args, out)
    timings["grpo"] = time.perf_counter() - start
    if set(load_split(out / "grpo").train) - set(split.train):
        raise UsageError("the GRPO run trained on prompts outside our training split (a different recipe split?)")
    for name in ("tuned", "tuned_review"):
        generate(name, f"hf:{merged.resolve()}")

    base_model = load_model(BASE)
    for name in RUNS:
        start = time.perf_counter()
        cfg = EvalConfig(stories=[str(out / name / "stories.jsonl")], out=str(out / name / "eval"), judge=BASE,
                         scorer=BASE, reference_dir=args.reference_dir, reference_max_chunks=args.reference_max_chunks,
                         seed=args.seed)
        Evaluator(cfg, models={BASE: base_model}).run()
        timings[f"evaluate {name}"] = time.perf_counter() - start
    runs = {name: load_run(name, out / name) for name in RUNS}
    write_outputs(compare(list(runs.values()), seed=args.seed), out / "compare")
    # Inside Review, against the base writer in Review: does tuning still help there? (Homogenization,
    # undefined for one story per prompt, is comparable only here.)
    write_outputs(compare([runs["review"], runs["tuned_review"]], seed=args.seed),
                  out / "compare_in_review")
    write_view([f"{name}={out / name}" for name in RUNS], out / "view.html", compare_dir=out / "compare")
    path = out / "story.json"
    previous = json.loads(path.read_text())["seconds"] if path.is_file() else {}  # a resumed story adds up
    seconds = {k: previous.get(k, 0.0) + timings.get(k, 0.0) for k in {**previous, **timings}}
    story = {"args": vars(args), "eval_prompts": [t.id for t in prompts], "seconds": seconds}
    path.write_text(json.dumps(story, indent=2) + "\n")
    log.info("report: %s (%.0f s this invocation)", out / "compare" / "comparison.md", sum(timings.values()))
    raise_failures(failed)
    return 0


if __name__ == "__main__":
    run_cli(main)
