"""Fine-tune the writer with GRPO on a composite creativity reward.

GRPO (trl's `GRPOTrainer`, with failed reward values filled by their group's mean:
`train/trainer.py`) samples `num_generations` stories per prompt, scores each with the
recipe's rewards (`rewards/`: judge quality, reference novelty, sibling diversity, a length
penalty; weighted by `reward_weights`, optionally quality-gated) and moves the policy towards the
stories that beat their siblings. Prompts are the single-agent writer prompts of the training
part of a by-prompt, aspect-stratified split; the held-out prompts (`<output_dir>/split.json`)
are for `review-lab heldout`. A `reward_model` or `principle_judge` reward is refused unless its
held-out interval lies above chance (`rewards.signal_check`; `--allow_weak_signal true` trains on
it anyway and the manifest says so under `signals` / `weak_signal`). Outputs: the LoRA adapter
in `<output_dir>`, the merged
model in `<output_dir>/merged` (`review-lab generate --model hf:<output_dir>/merged`),
`trainer_state.json` (per-reward curves: `review-lab plot-rewards`) and `manifest.json`.

Launch (one recipe per experiment, any recipe field can be overridden on the command line):

    # this CPU, bundled SmolLM2-135M, embedded judge
    accelerate launch --config_file configs/accelerate/cpu.yaml train/grpo.py --config configs/grpo/smollm2_cpu.yaml
    # two CPU processes under DeepSpeed ZeRO-2 (tests do this with --max_steps 2)
    accelerate launch --config_file configs/accelerate/zero2.yaml --num_processes 2 train/grpo.py \
        --config configs/grpo/smollm2_cpu.yaml
    # one GPU, vLLM colocated, judge on an OpenAI-compatible server at JUDGE_BASE_URL
    accelerate launch --config_file configs/accelerate/ddp.yaml --num_processes 1 train/grpo.py \
        --config configs/grpo/llama32_1b.yaml

`accelerate launch train/grpo.py --config configs/grpo/smollm2_cpu.yaml` (accelerate's default
config) works too. A run that was killed resumes when the same command is run again: from the
newest complete checkpoint in `output_dir` (the recipes checkpoint every few steps), or from the
one `--resume_from_checkpoint <dir>` names, and only with the settings it was trained with
(`run_settings.json`; `max_steps` and other bookkeeping may change). The repository must be
importable: `make setup` installs it in editable mode, otherwise set PYTHONPATH to the repository
root.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import torch
from accelerate import PartialState
from trl import GRPOConfig, ModelConfig, get_peft_config

from eval.rubric import load_rubric
from generate.common.cli import run_cli
from generate.common.errors import UsageError
from generate.common.machine import cpu_supports_bf16
from generate.common.manifest import write_manifest
from generate.datasets import load_dataset
from generate.prompts import load_prompts
from rewards import RewardContext, build_rewards, check_recipe, get_reward
from rewards.composite import reward_weights, score_batch
from rewards.signal_check import check_signals
from train.args import ScriptArguments
from train.callbacks import RewardTimingCallback
from train.data import prompt_dataset
from train.model import export_merged, init_kwargs, resolve_model_path
from train.recipe_parser import RecipeParser
from train.resume import check_resumable, resume_point, settings_of
from train.split import split_tasks
from train.trainer import GRPOTrainer

log = logging.getLogger("train.grpo")


def check_rewards(funcs, weights) -> None:
    """Score two literal stories before training: loads the reference corpus, encoder and judge
    now (not inside step 1's timing) and fails fast on a broken reward configuration.

    Raises:
        UsageError: a reward gave neither story a value (an encoder that cannot load, a judge that
            cannot answer): every step would fill its values with the group mean, a reward that
            trains nothing while the run seems to go on."""
    stories = ["The comet's ice sang as the drill bit in; Mira heard her mother's voice in the hum.",
               "Rust bloomed on the orbital garden while the last gardener taught the drones to grieve."]
    prompt = [{"role": "user", "content": "Write a story about a comet."}]
    values, totals = score_batch(funcs, [prompt, prompt], stories, weights, prompt_id=["check", "check"],
                                 task_prompt=["Write a story about a comet."] * 2)
    log.info("reward check: %s -> totals %s", values, totals)
    dead = [name for name, column in values.items() if all(v is None for v in column)]
    if dead:
        raise UsageError(f"reward(s) {', '.join(dead)} gave no value for either story of the start-up check "
                         "(see the log above for why): training on them would train nothing")


def run_settings(script_args: ScriptArguments, training_args: GRPOConfig, model_args: ModelConfig) -> dict:
    """What a run is trained with: every recipe field but the bookkeeping ones (`train.resume.BOOKKEEPING`)."""
    return settings_of({k: v for k, v in vars(script_args).items() if k != "save_merged"}, training_args, model_args)


def main(script_args: ScriptArguments, training_args: GRPOConfig, model_args: ModelConfig) -> None:
    # The rewards, their options and weights are checked before anything is loaded or written.
    reward_weights(training_args.reward_weights, script_args.reward_funcs)
    check_recipe(script_args.reward_funcs, script_args.reward_options, script_args.reward_gate)
    # A run resumes only with its own settings (before the trainer adds its own to the arguments).
    checkpoint = resume_point(training_args)
    check_resumable(training_args.output_dir, run_settings(script_args, training_args, model_args), checkpoint,
                    record=PartialState().is_main_process)
    # 1. Prompts: train on the training part of a by-prompt split, saved for the evaluation.
    tasks = load_dataset(script_args.dataset)
    split = split_tasks(tasks, script_args.eval_fraction, script_args.split_seed, script_args.dataset)
    train_set = prompt_dataset(split.select(tasks, "train"))
    log.info("%d training prompts, %d held out", len(split.train), len(split.eval))

    # 2. Rewards: named callables in `reward_weights` order; trl logs each as rewards/<name>/mean.
    #    A learned signal must have proved itself on held-out data (or be allowed weak, on record).
    signals = check_signals(script_args.reward_funcs, script_args.reward_options, script_args.allow_weak_signal)
    context = RewardContext()
    reward_funcs = build_rewards(script_args.reward_funcs, script_args.reward_options, script_args.reward_gate,
                                 context)
    check_rewards(reward_funcs, training_args.reward_weights)
    novelty = {n for n in script_args.reward_funcs if get_reward(n).novelty}

    # 3. Policy: the writer (alias, hf: spec, hub id or directory), LoRA when use_peft is set.
    model_path = resolve_model_path(model_args.model_name_or_path)
    training_args.model_init_kwargs = init_kwargs(model_args, training_args)
    if not training_args.push_to_hub:  # the trainer pickles its args into every checkpoint
        training_args.hub_token = None
    trainer = GRPOTrainer(model=model_path, reward_funcs=reward_funcs, args=training_args, train_dataset=train_set,
                          peft_config=get_peft_config(model_args),
                          callbacks=[RewardTimingCallback(novelty, context.timer)])

    plugin = trainer.accelerator.state.deepspeed_plugin
    log.info("accelerator: %s, %d process(es)%s", trainer.accelerator.distributed_type,
             trainer.accelerator.num_processes, f", DeepSpeed ZeRO stage {plugin.zero_stage}" if plugin else "")
    if trainer.accelerator.is_main_process:  # now, so a crashed run still says which prompts it saw
        split.save(training_args.output_dir)

    # 4. Train, then save the adapter, the merged model, the curves and the manifest.
    trainer.train(resume_from_checkpoint=checkpoint)
    trainer.save_model(training_args.output_dir)
    log.info("model (LoRA adapter when use_peft) saved to %s", training_args.output_dir)
    if trainer.accelerator.is_main_process:
        trainer.state.save_to_json(str(Path(training_args.output_dir) / "trainer_state.json"))
        if script_args.save_merged:
            export_merged(training_args.output_dir, model_path, training_args.model_init_kwargs)
        write_manifest(training_args.output_dir, kind="grpo", seed=training_args.seed,
                       config={"script": vars(script_args), "model": vars(model_args),
                               "training": training_args.to_dict(), "resolved_model": model_path},
                       templates={**load_prompts().texts(), **load_rubric().texts()},
                       extra={"rewards": context.describe(), "signals": signals,
                              "weak_signal": any(not v["proven"] for v in signals.values())})
    trainer.accelerator.wait_for_everyone()
    log.info("done: %s", training_args.output_dir)


def cpu_precision(training_args: GRPOConfig, model_args: ModelConfig) -> list[str]:
    """Overrides that train in float32 where the config asks for bf16 on a CPU without native bf16.

    There bf16 is emulated: correct, but several times slower (docs/performance.md measures it on
    an AVX2-only CPU). The hf backend already infers in float32 on such a CPU
    (`pick_dtype`); training follows it, says so in the log, and the manifest records the effective
    settings. Returned as command-line overrides, so the arguments are parsed again whole (the
    trainer's mixed precision is derived from `bf16` when its arguments are built).
    """
    if not (training_args.use_cpu or not torch.cuda.is_available()) or cpu_supports_bf16():
        return []
    out = []
    if training_args.bf16:
        out += ["--bf16", "false"]
    if model_args.dtype == "bfloat16":
        out += ["--dtype", "float32"]
    return out


def parse(parser: RecipeParser, argv: list[str] | None):
    args = parser.parse_args_and_config(argv)
    overrides = cpu_precision(args[1], args[2])
    if overrides:
        log.warning("no native bf16 on this CPU (bf16 would be emulated, several times slower): training in "
                    "float32 (%s)", " ".join(overrides))
        args = parser.parse_args_and_config([*(argv if argv is not None else sys.argv[1:]), *overrides])
    return args


if __name__ == "__main__":
    parser = RecipeParser((ScriptArguments, GRPOConfig, ModelConfig))
    run_cli(lambda argv: main(*parse(parser, argv)))
