"""The steps that prepare the second paper's two reward signals for `review-lab story`.

Each step is one of the project's own commands run as a subprocess (so each writes its manifest
and resumes on its own), in its own directory keyed by its inputs (`train/steps.py`): reused when
it finished with the same inputs, redone from scratch when they changed, so a stale output is
never handed on:

1. candidates: the base writer as single agent on training prompts only, at three temperatures
   (the curator needs good and bad answers to the same prompt), unless candidate runs are given;
2. curation (`review-lab curate`) -> preferences.jsonl (keyed by the candidates' contents);
3. the Bradley-Terry reward model (`train/reward_model.py`; keyed by its recipe and the pairs);
4. weak labels from the classic corpus and the adversarial principle optimisation
   (`review-lab principles weak-labels / optimize`; the optimisation keyed by the labels).

Candidate prompts are checked against the evaluation prompts by text (case and spacing aside): no
preference pair, hence no reward model, ever sees an evaluation prompt.

The commands run from the repository root, wherever the story was started: every path on their
command line is absolute (`train.story_config.absolute`, as the story's config makes its own).
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
from generate.common.manifest import sha256_text
from generate.common.paths import REPO_ROOT
from generate.datasets import Task
from generate.runner import RunConfig, Runner, run_collecting
from train.launch import accelerate_command
from train.split import plain_prompt
from train.story_config import absolute
from train.steps import Step, content_hash

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
        text = "".join(json.dumps({"id": t.id, "aspect": t.aspect, "prompt": t.prompt}) + "\n" for t in train_tasks)
        step = Step(out, "candidates", {"writer": writer, "prompts": sha256_text(text), "seed": seed,
                                        "max_new_tokens": max_new_tokens, "temperatures": TEMPERATURES})
        step.start()  # generation resumes: a finished run is kept, an interrupted one continues
        prompts = out / "train_prompts.jsonl"
        prompts.write_text(text)
        paths = []
        for temperature in TEMPERATURES:
            cfg = RunConfig(framework="single", model=writer, dataset=str(prompts), temperature=temperature,
                            max_new_tokens=max_new_tokens, seed=seed, out=str(out / f"single_t{temperature}"))
            paths.append(run_collecting(Runner(cfg), failed))
        step.finish()
    held = {plain_prompt(t.prompt) for t in eval_tasks}
    for path in paths:
        leaked = {r["prompt_id"] for r in read_jsonl(path) if plain_prompt(r["prompt"]) in held}
        if leaked:
            raise UsageError(f"{path}: candidates answer evaluation prompts ({', '.join(sorted(leaked))}); "
                             "a reward model trained on them would have seen the test")
    return paths


def curate(out: Path, candidate_runs: list[Path], reference_dir: str | None) -> Path:
    """Keyed by the candidates' contents; with the same ones it always runs: curation resumes
    (judged responses are skipped, journaled calls replayed), and a previous run that ended with
    failed responses must retry them, not hand on partial pairs."""
    step = Step(out, "curation", {"candidates": {str(p): content_hash(p) for p in candidate_runs},
                                  "reference_dir": reference_dir})
    step.start()
    cmd = [sys.executable, "-m", "rewards.curate", "--candidates", *map(absolute, candidate_runs),
           "--out", absolute(out)]
    if reference_dir:
        cmd += ["--reference-dir", absolute(reference_dir)]
    run(cmd, "curation")
    step.finish()
    return out / "preferences.jsonl"


def reward_model(out: Path, preferences: Path, config: str) -> Path:
    """Keyed by the recipe's and the pairs' contents: reused only when both are the ones it was trained on."""
    step = Step(out, "reward model", {"config": content_hash(REPO_ROOT / config),
                                      "preferences": content_hash(preferences)})
    if not step.done:
        step.start()
        launcher = ["--config_file", absolute(REPO_ROOT / "configs/accelerate/cpu.yaml")]
        run(accelerate_command("reward_model.py", launcher,
                               ["--config", absolute(REPO_ROOT / config), "--preferences", absolute(preferences),
                                "--output_dir", absolute(out)]), "reward model")
        step.finish()
    return out


WEAK_LABELS = {"--works": "25", "--per-work": "2", "--words": "80", "--max-new-tokens": "192"}
OPTIMISE = {"--attacks": "6", "--checks": "24", "--max-diagnoses": "6", "--max-new-tokens": "192"}


def principles(out: Path, reference_dir: str | None, iterations: int, writer: str, seed: int = 0) -> Path:
    """Weak labels (keyed by their recipe), then the optimisation (keyed by the labels' contents,
    its settings and `iterations`; with the same ones it always runs, since it resumes)."""
    weak = Step(out / "weak", "weak labels", {"options": WEAK_LABELS, "writer": writer, "seed": seed,
                                              "reference_dir": reference_dir})
    labels = weak.out / "weak.jsonl"
    if not weak.done:
        weak.start()
        cmd = [sys.executable, "-m", "rewards.principles", "weak-labels", "--out", absolute(labels), "--model", writer,
               "--seed", str(seed), *(x for kv in WEAK_LABELS.items() for x in kv)]
        if reference_dir:
            cmd += ["--reference-dir", absolute(reference_dir)]
        run(cmd, "weak labels")
        weak.finish()
    opt = Step(out / "opt", "principle optimisation", {"labels": content_hash(labels), "options": OPTIMISE,
                                                       "iterations": iterations, "writer": writer, "seed": seed})
    opt.start()
    run([sys.executable, "-m", "rewards.principles", "optimize", "--labelled", absolute(labels), "--model", writer,
         "--iterations", str(iterations), "--seed", str(seed), *(x for kv in OPTIMISE.items() for x in kv),
         "--out", absolute(opt.out)], "principle optimisation")
    opt.finish()
    return opt.out / "principles.yaml"
