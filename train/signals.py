"""The steps that prepare the second paper's two reward signals for `review-lab story`.

Each step is one of the project's own commands run as a subprocess (so each writes its manifest
and resumes on its own), skipped when its output is already complete:

1. candidates: the base writer as single agent on training prompts only, at three temperatures
   (the curator needs good and bad answers to the same prompt), unless candidate runs are given;
2. curation (`review-lab curate`) -> preferences.jsonl;
3. the Bradley-Terry reward model (`train/reward_model.py`);
4. weak labels from the classic corpus and the adversarial principle optimisation
   (`review-lab principles weak-labels / optimize`).

Candidate prompts are checked against the evaluation prompts by text: no preference pair, hence
no reward model, ever sees an evaluation prompt.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

from generate.common.errors import UsageError
from generate.common.jsonl import read_jsonl
from generate.common.paths import REPO_ROOT
from generate.datasets import Task
from generate.runner import RunConfig, Runner, run_collecting

log = logging.getLogger("end_to_end")
TEMPERATURES = (0.7, 1.0, 1.3)


def run(cmd: list[str], what: str) -> None:
    log.info("%s: %s", what, " ".join(cmd))
    if subprocess.run(cmd, cwd=REPO_ROOT, env=os.environ).returncode != 0:
        raise UsageError(f"{what} failed; see its log above")


def candidates(out: Path, given: list[str], train_tasks: list[Task], eval_tasks: list[Task], writer: str,
               max_new_tokens: int, seed: int, failed: dict) -> list[Path]:
    """Candidate stories for the curator: the given runs, else the base writer on training prompts."""
    if given:
        paths = [Path(p) for p in given]
    else:
        prompts = out / "train_prompts.jsonl"
        prompts.write_text("".join(json.dumps({"id": t.id, "aspect": t.aspect, "prompt": t.prompt}) + "\n"
                                   for t in train_tasks))
        paths = []
        for temperature in TEMPERATURES:
            cfg = RunConfig(framework="single", model=writer, dataset=str(prompts), temperature=temperature,
                            max_new_tokens=max_new_tokens, seed=seed, out=str(out / f"single_t{temperature}"))
            paths.append(run_collecting(Runner(cfg), failed))
    held = {t.prompt.strip().lower() for t in eval_tasks}
    for path in paths:
        leaked = {r["prompt_id"] for r in read_jsonl(path) if r["prompt"].strip().lower() in held}
        if leaked:
            raise UsageError(f"{path}: candidates answer evaluation prompts ({', '.join(sorted(leaked))}); "
                             "a reward model trained on them would have seen the test")
    return paths


def curate(out: Path, candidate_runs: list[Path], reference_dir: str | None) -> Path:
    """Always run: curation resumes (judged responses are skipped, journaled calls replayed), and a
    previous run that ended with failed responses must retry them, not hand on partial pairs."""
    cmd = [sys.executable, "-m", "rewards.curate", "--candidates", *map(str, candidate_runs), "--out", str(out)]
    if reference_dir:
        cmd += ["--reference-dir", reference_dir]
    run(cmd, "curation")
    return out / "preferences.jsonl"


def reward_model(out: Path, preferences: Path, config: str) -> Path:
    if not (out / "metrics.json").is_file():
        run([sys.executable, "-m", "accelerate.commands.launch", "--config_file", "configs/accelerate/cpu.yaml",
             "train/reward_model.py", "--config", config, "--preferences", str(preferences.resolve()),
             "--output_dir", str(out.resolve())], "reward model")
    return out


def principles(out: Path, reference_dir: str | None, iterations: int, writer: str) -> Path:
    labels, opt = out / "weak.jsonl", out / "opt"
    if not labels.is_file():
        cmd = [sys.executable, "-m", "rewards.principles", "weak-labels", "--out", str(labels), "--works", "25",
               "--per-work", "2", "--words", "80", "--model", writer, "--max-new-tokens", "192"]
        if reference_dir:
            cmd += ["--reference-dir", reference_dir]
        run(cmd, "weak labels")
    # Always run: the optimisation resumes (finished iterations kept, journaled calls replayed).
    run([sys.executable, "-m", "rewards.principles", "optimize", "--labelled", str(labels), "--model", writer,
         "--iterations", str(iterations), "--attacks", "6", "--checks", "24", "--max-diagnoses", "6",
         "--max-new-tokens", "192", "--out", str(opt)], "principle optimisation")
    return opt / "principles.yaml"
