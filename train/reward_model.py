"""Train a Bradley-Terry reward model on curated preference pairs (arXiv 2508.21476, 3.3, 4.4, A.1).

trl's `RewardTrainer` puts a one-output head on the base model (`AutoModelForSequenceClassification`,
num_labels=1) and minimises -log sigma(r(x, chosen) - r(x, rejected)) over the pairs that
`review-lab curate` wrote (`preferences.jsonl`: the writer's chat request, chosen and
rejected stories). LoRA r=16, lr 2e-4, cosine schedule, warmup 0.1: the paper's settings (A.1);
the head is trained in full (peft's SEQ_CLS task saves it with the adapter).

Pairs are split by prompt (stratified by aspect, `train/split.py`): no prompt has pairs on both
sides, so the held-out pairwise accuracy measures preferences on prompts the model never saw; at
least 2 prompts are held out (fewer than 3 prompts is refused), and the accuracy comes with a 95%
interval by bootstrap over the held-out prompts (`rewards.signal_check`), which GRPO reads before
it trains on the model. That accuracy is computed after training with the `reward_model`
reward's own scorer on the saved model, so it is the number the reward will reproduce. Outputs in `output_dir`: the adapter,
`merged/` (the model the reward loads), `split.json`, `metrics.json` (held-out accuracy, mean
margin, the decision threshold, pair counts, training seconds), `trainer_state.json`, `manifest.json`.

An interrupted run resumes (`train.resume`): run again with the same command, it continues from
the newest complete `checkpoint-N` in `output_dir` (the recipe saves one every few steps), or the
one `--resume_from_checkpoint` names, with the weights, optimizer, scheduler, RNG and data position
it had, so it ends as the uninterrupted run would. Only with the settings it was trained with:
`run_settings.json` records the recipe (but how long, where and how visibly it trains) and the
preference files' contents; a checkpoint made with other settings is refused (exit 2). `review-lab
story` / `signals` re-run the step into the same directory when its inputs are unchanged, so an
interrupted pipeline resumes its reward model rather than training it again from scratch.

    review-lab reward-model --config configs/rm/smollm2_cpu.yaml
    review-lab reward-model --config configs/rm/smollm2_cpu.yaml \
        --preferences runs/curation/preferences.jsonl --output_dir runs/rm/mine

(`review-lab reward-model ARGS` is `accelerate launch train/reward_model.py ARGS`.)
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import torch
from accelerate import PartialState
from datasets import Dataset
from trl import ModelConfig, RewardConfig, RewardTrainer, get_peft_config

from eval.scorers.reward_model import MERGED_DIR, RewardModelScorer
from generate.common.cli import run_cli
from generate.common.errors import UsageError
from generate.common.jsonl import read_jsonl
from generate.common.manifest import sha256_bytes, sha256_text, write_manifest
from generate.common.ranges import HELD_OUT, Range, check_options
from generate.datasets import Task
from rewards.signal_check import MIN_HELDOUT_GROUPS, group_bootstrap
from train.model import base_identity, init_kwargs, resolve_model_path
from train.recipe_parser import RecipeParser
from train.resume import check_resumable, resume_point, settings_of
from train.split import Split, split_tasks

log = logging.getLogger("train.reward_model")
COLUMNS = ("prompt", "chosen", "rejected")


@dataclass
class RMScriptArguments:
    """Which preference pairs to train on and how to hold prompts out."""

    RANGES: ClassVar[dict[str, Range]] = {"eval_fraction": HELD_OUT}  # trl's parser reads this class
    preferences: list[str] = field(default_factory=lambda: ["runs/curation/preferences.jsonl"],
                                   metadata={"help": "preferences.jsonl files written by review-lab curate"})
    eval_fraction: float = field(default=0.25, metadata={"help": "share of prompts held out (by aspect)"})
    split_seed: int = field(default=0, metadata={"help": "seed of the by-prompt split"})
    save_merged: bool = field(default=True, metadata={"help": "save the merged model in <output_dir>/merged"})

    def __post_init__(self) -> None:
        check_options(self)  # trl's parser builds this class, not `build_config`


def load_pairs(paths: list[str]) -> list[dict]:
    pairs = []
    for path in paths:
        if not Path(path).is_file():
            raise UsageError(f"preferences file not found: {path} (write one with review-lab curate)")
        for n, pair in enumerate(read_jsonl(path), 1):
            check_pair(pair, f"{path}: pair {n}")
            pairs.append(pair)
    if not pairs:
        raise UsageError(f"no preference pairs in {', '.join(paths)}: the curation found no good/bad pair of "
                         "responses to one prompt; curate more candidates per prompt")
    return pairs


def check_pair(pair: dict, where: str) -> None:
    """A preference pair as `review-lab curate` writes it: a prompt, and a chosen and a rejected
    conversation whose last message has text `content`."""
    if pair.get("prompt") is None:
        raise UsageError(f"{where}: no 'prompt' (a preferences.jsonl of review-lab curate?)")
    for side in ("chosen", "rejected"):
        turns = pair.get(side)
        if not (isinstance(turns, list) and turns and isinstance(turns[-1], dict)
                and isinstance(turns[-1].get("content"), str)):
            raise UsageError(f"{where}: '{side}' must be a list of messages ending in one with text 'content'")


def prompt_key(pair: dict) -> str:
    """A pair's prompt identity: the curated `prompt_sha256`, else a hash of the prompt itself."""
    return pair.get("prompt_sha256") or sha256_text(json.dumps(pair["prompt"], sort_keys=True))


def split_pairs(pairs: list[dict], fraction: float, seed: int, source: str) -> tuple[list[dict], list[dict], Split]:
    """Train and held-out pairs, split by prompt and stratified by aspect. At least
    `MIN_HELDOUT_GROUPS` (2) prompts are held out, so the held-out accuracy has an interval.

    Raises:
        UsageError: fewer than 3 prompts (2 held out and 1 to train on)."""
    tasks = {prompt_key(p): Task(prompt_key(p), p.get("aspect") or "", prompt_key(p)) for p in pairs}
    if len(tasks) < MIN_HELDOUT_GROUPS + 1:
        raise UsageError(f"the pairs answer {len(tasks)} prompt(s); a reward model needs at least "
                         f"{MIN_HELDOUT_GROUPS + 1} ({MIN_HELDOUT_GROUPS} held out for its accuracy's interval, "
                         "1 to train on): curate candidates for more prompts")
    if math.floor(fraction * len(tasks) + 0.5) < MIN_HELDOUT_GROUPS:  # as train/split.py rounds
        log.info("eval_fraction %.2f of %d prompts holds out fewer than %d: holding out %d", fraction, len(tasks),
                 MIN_HELDOUT_GROUPS, MIN_HELDOUT_GROUPS)
        fraction = MIN_HELDOUT_GROUPS / len(tasks)
    split = split_tasks(list(tasks.values()), fraction, seed, source)
    held = set(split.eval)
    return [p for p in pairs if prompt_key(p) not in held], [p for p in pairs if prompt_key(p) in held], split


def pairwise_accuracy(scorer: RewardModelScorer, pairs: list[dict], batch_size: int = 16, seed: int = 0) -> dict:
    """Share of pairs whose chosen story outscores the rejected one, the mean margin, and the
    accuracy's 95% interval by bootstrap over the held-out prompts (None with fewer than 2)."""
    prompts = [p["prompt"] for p in pairs]
    chosen = scorer.score(prompts, [p["chosen"][-1]["content"] for p in pairs], batch_size)
    rejected = scorer.score(prompts, [p["rejected"][-1]["content"] for p in pairs], batch_size)
    by_prompt: dict[str, list[float]] = {}
    for p, c, r in zip(pairs, chosen, rejected):
        if c is not None and r is not None:
            by_prompt.setdefault(prompt_key(p), []).append(c - r)
    margins = [m for ms in by_prompt.values() for m in ms]
    share = lambda groups: (sum(m > 0 for g in groups for m in g) / n  # noqa: E731
                            if (n := sum(map(len, groups))) else None)
    return {"n": len(margins), "prompts": len(by_prompt), "accuracy": share(list(by_prompt.values())),
            "ci95": group_bootstrap(list(by_prompt.values()), share, seed=seed),
            "mean_margin": sum(margins) / len(margins) if margins else None,
            "margins": {k: [round(m, 6) for m in ms] for k, ms in by_prompt.items()}}


def decision_threshold(scorer: RewardModelScorer, pairs: list[dict], batch_size: int = 16) -> float | None:
    """The score above which the reward model calls a story good: halfway between its mean score
    of the curators' chosen (good) and rejected (bad) stories of the training pairs. A
    Bradley-Terry score has no zero of its own; this is the boundary between the two classes the
    curation labelled, so the model's verdicts can be set beside another judge's (excellence rate,
    agreement)."""
    prompts = [p["prompt"] for p in pairs]
    chosen = [v for v in scorer.score(prompts, [p["chosen"][-1]["content"] for p in pairs], batch_size) if v is not None]
    rejected = [v for v in scorer.score(prompts, [p["rejected"][-1]["content"] for p in pairs], batch_size)
                if v is not None]
    if not chosen or not rejected:
        return None
    return (sum(chosen) / len(chosen) + sum(rejected) / len(rejected)) / 2


def export_merged(output_dir: str | Path, base_model: str, kwargs: dict | None = None) -> Path:
    """Merge the saved adapter (and trained head) into the base model; save it with its tokenizer
    in `output_dir/merged`, float32 (as train/model.py's writer export, for the same reason), the
    base reloaded with the training load's revision and trust_remote_code (`kwargs`: its
    `model_init_kwargs`, `train.model.base_identity`)."""
    from peft import PeftModel
    from transformers import AutoModelForSequenceClassification, AutoTokenizer
    from trl.trainer.reward_trainer import suppress_seqcls_warning

    output_dir, target = Path(output_dir), Path(output_dir) / MERGED_DIR
    tokenizer = AutoTokenizer.from_pretrained(str(output_dir))
    if (output_dir / "adapter_config.json").is_file():
        with suppress_seqcls_warning():  # the head comes from the adapter, not from the base checkpoint
            base = AutoModelForSequenceClassification.from_pretrained(base_model, num_labels=1, dtype=torch.float32,
                                                                      **base_identity(kwargs))
        model = PeftModel.from_pretrained(base, str(output_dir)).merge_and_unload()
    else:
        model = AutoModelForSequenceClassification.from_pretrained(str(output_dir), dtype=torch.float32)
    model.config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    return target


def run_settings(script_args: RMScriptArguments, training_args: RewardConfig, model_args: ModelConfig) -> dict:
    """What a run is trained with: every recipe field but the bookkeeping ones
    (`train.resume.BOOKKEEPING`, and `save_merged`), and the contents of its preference files (the
    same path may hold other pairs by the next run)."""
    script = {k: v for k, v in vars(script_args).items() if k != "save_merged"}
    script["preferences_sha256"] = {p: sha256_bytes(Path(p).read_bytes()) for p in script_args.preferences}
    return settings_of(script, training_args, model_args)


def main(script_args: RMScriptArguments, training_args: RewardConfig, model_args: ModelConfig) -> dict:
    # 1. Pairs, split by prompt: held-out prompts never reach training.
    pairs = load_pairs(script_args.preferences)
    train_pairs, eval_pairs, split = split_pairs(pairs, script_args.eval_fraction, script_args.split_seed,
                                                 ",".join(script_args.preferences))
    if not train_pairs:
        raise UsageError("the split leaves no training pair; lower eval_fraction or curate more prompts")
    log.info("%d pairs: %d train (%d prompts), %d held out (%d prompts)", len(pairs), len(train_pairs),
             len(split.train), len(eval_pairs), len(split.eval))
    # A run resumes from its newest checkpoint, only with its own settings (checked before loading).
    checkpoint = resume_point(training_args)
    check_resumable(training_args.output_dir, run_settings(script_args, training_args, model_args), checkpoint,
                    record=PartialState().is_main_process)

    # 2. trl's RewardTrainer on the base writer (alias, hf: spec or directory), LoRA when use_peft.
    model_path = resolve_model_path(model_args.model_name_or_path)
    training_args.model_init_kwargs = init_kwargs(model_args, training_args)
    dataset = Dataset.from_list([{k: p[k] for k in COLUMNS} for p in train_pairs])
    eval_set = Dataset.from_list([{k: p[k] for k in COLUMNS} for p in eval_pairs]) if eval_pairs else None
    trainer = RewardTrainer(model=model_path, args=training_args, train_dataset=dataset, eval_dataset=eval_set,
                            peft_config=get_peft_config(model_args))
    start = time.perf_counter()
    trainer.train(resume_from_checkpoint=checkpoint)
    seconds = time.perf_counter() - start
    trl_eval = trainer.evaluate() if eval_set is not None else {}
    trainer.save_model(training_args.output_dir)

    # 3. Merged model, held-out accuracy with the reward's scorer, curves, manifest.
    metrics: dict = {}
    if trainer.accelerator.is_main_process:
        out = Path(training_args.output_dir)
        split.save(out)
        trainer.state.save_to_json(str(out / "trainer_state.json"))
        if script_args.save_merged:
            merged = export_merged(out, model_path, training_args.model_init_kwargs)
            scorer = RewardModelScorer(merged, device="cpu" if training_args.use_cpu else "auto")
            heldout = pairwise_accuracy(scorer, eval_pairs, seed=script_args.split_seed)
            threshold = decision_threshold(scorer, train_pairs)
        else:
            heldout = threshold = None
        metrics = {"heldout": heldout, "threshold": threshold, "trl_eval": trl_eval, "train_seconds": round(seconds, 1),
                   "pairs": {"train": len(train_pairs), "heldout": len(eval_pairs)},
                   "prompts": {"train": len(split.train), "heldout": len(split.eval)},
                   "train_loss": next((h["train_loss"] for h in reversed(trainer.state.log_history)
                                       if "train_loss" in h), None)}
        (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n", encoding="utf-8")
        write_manifest(out, kind="reward_model", seed=training_args.seed,
                       config={"script": vars(script_args), "model": vars(model_args),
                               "training": training_args.to_dict(), "resolved_model": model_path},
                       extra={"preferences_sha256": {p: sha256_bytes(Path(p).read_bytes())
                                                     for p in script_args.preferences}, "metrics": metrics})
        log.info("held-out pairwise accuracy: %s; training took %.0fs; model in %s", heldout, seconds, out)
    trainer.accelerator.wait_for_everyone()
    return metrics


def cli(argv=None) -> None:
    main(*RecipeParser((RMScriptArguments, RewardConfig, ModelConfig)).parse_args_and_config(argv))


if __name__ == "__main__":
    run_cli(cli)
