"""Bad input to the training scripts is one `UsageError` (one `error:` line, exit 2), not a
traceback from trl's parser or argparse's page of usage."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from trl import GRPOConfig, ModelConfig, RewardConfig

from generate.common.errors import UsageError
from train.args import ScriptArguments
from train.recipe_parser import RecipeParser
from train.reward_model import RMScriptArguments

REPO = Path(__file__).resolve().parents[2]
RECIPE = str(REPO / "configs" / "grpo" / "smollm2_cpu.yaml")


@pytest.fixture
def grpo():
    return RecipeParser((ScriptArguments, GRPOConfig, ModelConfig))


def test_the_recipe_parses_as_trl_would(grpo, tmp_path):
    script, training, model = grpo.parse_args_and_config(["--config", RECIPE, "--output_dir", str(tmp_path)])
    assert script.reward_funcs and training.output_dir == str(tmp_path) and model.model_name_or_path


@pytest.mark.parametrize(("args", "message"), [
    (["--config", "nowhere.yaml"], "config file not found: nowhere.yaml"),
    (["--config"], "--config needs a recipe file"),
    (["--config", str(REPO / "README.md")], "README.md: not valid YAML"),
    (["--config", RECIPE, "--bogus", "1"],
     "Some specified arguments are not used by the HfArgumentParser: ['--bogus', '1']"),
    (["--config", RECIPE, "--max_steps", "abc"],
     "argument --max_steps/--max-steps: invalid int value: 'abc' (see --help)"),
    (["--config", RECIPE, "--reward_gate", "quality"], "--reward-gate: 'quality' is not one of: none, judge"),
])
def test_bad_input_is_one_usage_error(grpo, tmp_path, args, message):
    with pytest.raises(UsageError) as info:
        grpo.parse_args_and_config([*args, "--output_dir", str(tmp_path)] if len(args) > 1 else args)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_recipe_key_nobody_knows_is_one_usage_error(grpo, tmp_path):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(Path(RECIPE).read_text() + "not_a_field: 3\n")
    with pytest.raises(UsageError, match="not_a_field"):
        grpo.parse_args_and_config(["--config", str(recipe), "--output_dir", str(tmp_path)])


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refused value is bf16 without a GPU")
def test_a_value_trls_config_refuses_is_one_usage_error(tmp_path):
    """trl's configs raise ValueError from __post_init__ (here: bf16 asked for on a machine that
    cannot, without use_cpu)."""
    recipe = tmp_path / "rm.yaml"
    recipe.write_text("model_name_or_path: x\nbf16: true\n")
    parser = RecipeParser((RMScriptArguments, RewardConfig, ModelConfig))
    with pytest.raises(UsageError, match="bf16") as info:
        parser.parse_args_and_config(["--config", str(recipe), "--output_dir", str(tmp_path)])
    assert "\n" not in str(info.value)


# A recipe's values become argparse's defaults, converted only when they are text: these once ran
# as given (a list of steps, a NaN learning rate) or failed later with a traceback.
@pytest.mark.parametrize(("lines", "message"), [
    ("max_steps: [1, 2]\n", "max_steps must be a whole number, got [1, 2]"),
    ("max_steps: true\n", "max_steps must be a whole number, got True"),
    ("learning_rate: .nan\n", "learning_rate must be a finite number, got nan"),
    ("learning_rate: {a: 1}\n", "learning_rate must be a finite number"),
    ("reward_funcs: {length: 1}\n", "reward_funcs must be a list"),
    ("model_name_or_path: null\n", "no model to train"),
    ("1: 2\n", "is not an option name"),
])
def test_a_recipe_value_of_the_wrong_type_is_one_usage_error(grpo, tmp_path, lines, message):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(Path(RECIPE).read_text() + lines)
    with pytest.raises(UsageError) as info:
        grpo.parse_args_and_config(["--config", str(recipe), "--output_dir", str(tmp_path)])
    assert message in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_non_finite_number_on_the_command_line_is_one_usage_error(grpo, tmp_path, value):
    with pytest.raises(UsageError, match=f"--learning_rate must be a finite number, got {value}"):
        grpo.parse_args_and_config(["--config", RECIPE, f"--learning_rate={value}", "--output_dir", str(tmp_path)])


def test_a_recipe_keeps_its_valid_values(grpo, tmp_path):
    """A number given as text stays argparse's to convert; one reward name is the list of one."""
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(Path(RECIPE).read_text() + 'max_steps: "7"\nreward_funcs: length\nreward_weights: [2]\n')
    script, training, _ = grpo.parse_args_and_config(["--config", str(recipe), "--output_dir", str(tmp_path)])
    assert (training.max_steps, script.reward_funcs, training.reward_weights) == (7, ["length"], [2.0])
