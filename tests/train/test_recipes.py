"""Every recipe parses into trl's dataclasses with the intended settings, and its rewards build.

The GPU recipes' vLLM path cannot run here (no GPU, no vLLM wheel for CPUs): these tests check
only that the recipes say what they should to trl. `--use_cpu true` is added for the GPU recipes
because transformers refuses bf16 without a GPU unless told the run is on a CPU.
"""

from __future__ import annotations

import pytest
import yaml
from trl import GRPOConfig, ModelConfig, TrlParser

from rewards import build_rewards
from tests.train.conftest import REPO
from train.args import ScriptArguments

GPU_RECIPES = {
    "llama32_1b": "meta-llama/Llama-3.2-1B-Instruct",
    "llama32_3b": "meta-llama/Llama-3.2-3B-Instruct",
    "qwen25_1p5b": "Qwen/Qwen2.5-1.5B-Instruct",
    "qwen25_3b": "Qwen/Qwen2.5-3B-Instruct",
}


def parse(recipe: str, *overrides: str):
    parser = TrlParser((ScriptArguments, GRPOConfig, ModelConfig))
    return parser.parse_args_and_config(["--config", str(REPO / "configs" / "grpo" / f"{recipe}.yaml"), *overrides])


def test_cpu_recipe_is_a_small_cpu_lora_run_with_the_embedded_judge():
    script, training, model = parse("smollm2_cpu")
    assert training.use_cpu and not training.use_vllm
    assert training.num_generations == 4 and training.max_completion_length <= 96
    assert training.logging_steps == 1 and training.report_to == []
    assert model.model_name_or_path == "smollm2-135m-instruct" and model.use_peft
    assert script.reward_options["judge"] == {"model": "smollm2-135m-instruct", "mode": "logprob", "timeout": 300}
    assert len(training.reward_weights) == len(script.reward_funcs)


def test_single_gpu_recipe_needs_nothing_but_the_core_install():
    """The bundled writer and embedded judge on one card, trl's transformers generation (no vLLM),
    one optimizer step of 16 prompts x 8 completions generated as one batch."""
    script, training, model = parse("smollm2_gpu", "--use_cpu", "true")
    assert not training.use_vllm and training.bf16 and model.dtype == "bfloat16" and model.use_peft
    assert model.model_name_or_path == "smollm2-135m-instruct" and script.dataset == "default"
    assert script.reward_options["judge"]["model"] == "smollm2-135m-instruct"
    assert not any(str(v.get("model", "")).startswith("openai:") for v in script.reward_options.values())
    assert {"novelty_cos", "kl"} <= set(script.reward_funcs)
    per_step = training.per_device_train_batch_size * training.gradient_accumulation_steps
    assert training.num_generations == 8 and per_step // training.num_generations == 16
    assert training.generation_batch_size == per_step and training.max_completion_length == 128
    assert len(training.reward_weights) == len(script.reward_funcs)


@pytest.mark.parametrize("recipe", sorted(GPU_RECIPES))
def test_gpu_recipes_use_colocated_vllm_and_igniting_settings(recipe):
    script, training, model = parse(recipe, "--use_cpu", "true")
    assert model.model_name_or_path == GPU_RECIPES[recipe]
    assert training.use_vllm and training.vllm_mode == "colocate"
    assert training.bf16 and model.dtype == "bfloat16"
    assert training.beta == 0.001 and training.num_generations >= 4 and training.max_completion_length == 512
    assert model.use_peft and 1e-6 <= training.learning_rate <= 1e-4
    assert script.dataset == "scifi100" and script.reward_gate == "judge"
    assert script.reward_options["judge"]["model"].startswith("openai:")
    assert training.generation_batch_size % training.num_generations == 0
    assert len(training.reward_weights) == len(script.reward_funcs)


@pytest.mark.parametrize("recipe", ["smollm2_cpu", "smollm2_gpu", *sorted(GPU_RECIPES)])
def test_recipe_rewards_build_with_their_options(recipe):
    config = yaml.safe_load((REPO / "configs" / "grpo" / f"{recipe}.yaml").read_text())
    funcs = build_rewards(config["reward_funcs"], config.get("reward_options"), config.get("reward_gate", "none"))
    assert len(funcs) == len(config["reward_weights"])


def test_command_line_overrides_win_over_the_recipe():
    options = '{"length": {"target_words": 9}}'
    script, training, _ = parse("smollm2_cpu", "--max_steps", "2", "--reward_options", options)
    assert training.max_steps == 2 and script.reward_options == {"length": {"target_words": 9}}


def test_unknown_recipe_keys_are_an_error(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("model_name_or_path: x\nuse_cpu: true\nreward_fucns: [length]\n")
    with pytest.raises(ValueError, match="reward_fucns"):
        TrlParser((ScriptArguments, GRPOConfig, ModelConfig)).parse_args_and_config(["--config", str(bad)])


@pytest.mark.parametrize(("name", "kind", "stage"), [
    ("cpu", "NO", None), ("ddp", "MULTI_GPU", None), ("zero2", "DEEPSPEED", 2), ("zero3", "DEEPSPEED", 3)])
def test_accelerate_configs(name, kind, stage):
    config = yaml.safe_load((REPO / "configs" / "accelerate" / f"{name}.yaml").read_text())
    assert config["distributed_type"] == kind
    assert config.get("deepspeed_config", {}).get("zero_stage") == stage


@pytest.mark.parametrize(("recipe", "signal", "option"), [
    ("smollm2_cpu_rm", "reward_model", "model_dir"), ("smollm2_cpu_principle", "principle_judge", "principles"),
    ("qwen25_3b_rm", "reward_model", "model_dir"), ("qwen25_3b_principle", "principle_judge", "principles")])
def test_signal_recipes_differ_from_their_base_only_in_the_reward(recipe, signal, option):
    """The three writers of a size are trained alike; only the reward signal changes, and a signal's
    writer trains on the signal alone (the paper's recipe; a length term only as a named variant)."""
    gpu = recipe.startswith("qwen")
    overrides = ("--use_cpu", "true") if gpu else ()
    script, training, model = parse(recipe, *overrides)
    base_script, base_training, base_model = parse("qwen25_3b" if gpu else "smollm2_cpu", *overrides)
    assert script.reward_funcs == [signal] and option in script.reward_options[signal]
    assert list(script.reward_options) == [signal] and training.reward_weights == [1.0]
    assert not script.allow_weak_signal  # a weak signal is refused unless asked for
    assert vars(model) == vars(base_model)
    same = {k: v for k, v in training.to_dict().items() if k not in ("output_dir", "reward_weights", "logging_dir",
                                                                      "run_name", "hub_model_id")}
    assert same == {k: v for k, v in base_training.to_dict().items() if k in same}
