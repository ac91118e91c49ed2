"""A recipe the rewards cannot use is refused in one `error:` line with exit status 2, before a
model loads or a story is written: weights that do not match the rewards, an option value out of
range, a reward that gives no value at all at the start-up check."""

from __future__ import annotations

import pytest

from generate.common.cli import run_cli
from generate.common.errors import UsageError
from tests.train.conftest import REPO
from train import grpo
from train import heldout as heldout_reward

LENGTH_ONLY = ["--config", str(REPO / "configs" / "grpo" / "smollm2_cpu.yaml"), "--reward_funcs", "length",
               "--reward_options", "{}", "--bf16", "false", "--dtype", "float32"]


class Reached(BaseException):
    """Raised where the trainer would be built: the recipe passed every check (run_cli lets it through)."""


def train_cli(argv, tmp_path, monkeypatch, capsys) -> str:
    """train/grpo.py's entry point on `argv`; its stderr, after checking it is one line with status 2."""
    def no_trainer(*args, **kwargs):
        raise Reached

    monkeypatch.setattr(grpo, "GRPOTrainer", no_trainer)
    parser = grpo.RecipeParser((grpo.ScriptArguments, grpo.GRPOConfig, grpo.ModelConfig))
    with pytest.raises(SystemExit) as exit_info:
        run_cli(lambda args: grpo.main(*grpo.parse(parser, args)), [*argv, "--output_dir", str(tmp_path / "run")])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2 and len(err) == 1, err
    return err[0]


def test_training_refuses_weights_that_do_not_match_the_rewards(tmp_path, monkeypatch, capsys):
    err = train_cli([*LENGTH_ONLY, "--reward_weights", "1.0", "2.0"], tmp_path, monkeypatch, capsys)
    assert err.startswith("error: reward_weights has 2 weight(s) for 1 reward(s)")


def test_training_refuses_a_length_target_out_of_range(tmp_path, monkeypatch, capsys):
    argv = [*LENGTH_ONLY, "--reward_weights", "1.0", "--reward_options", '{"length": {"target_words": 0}}']
    assert "option target_words must be >= 1, got 0" in train_cli(argv, tmp_path, monkeypatch, capsys)


@pytest.mark.parametrize(("funcs", "options", "message"), [
    (["judge"], '{"judge": {"timeout": -5}}', "error: reward 'judge': option timeout must be > 0, got -5"),
    (["judge"], '{"judge": {"timeout": NaN}}', "error: reward 'judge': option timeout must be a finite number"),
    (["judge"], '{"judge": {"mode": "vote"}}', "error: reward 'judge': option mode: 'vote' is not one of: sample"),
    (["novelty_cos"], '{"novelty_cos": {"max_chunks": 0}}', "error: reward 'novelty_cos': option max_chunks must be"),
    (["kl"], '{"kl": {"reference_dir": "no/such/dir"}}', "error: reward 'kl': option reference_dir: no such directory"),
    (["group_diversity"], '{"group_diversity": {"chunk_size": "300"}}',
     "error: reward 'group_diversity': option chunk_size must be a whole number, got '300'"),
    (["reward_model"], '{"reward_model": {"model_dir": "no/such/rm"}}',
     "error: reward 'reward_model': option model_dir: no reward model in no/such/rm"),
    (["principle_judge"], '{"principle_judge": {"mode": "sample", "orders": 2}}',
     "error: reward 'principle_judge': orders must be 1 in sample mode, got 2"),
    (["surprisal"], '{"surprisal": {"model": "gpt-9"}}', "error: reward 'surprisal': option model: unknown model"),
])
def test_training_refuses_a_reward_option_before_anything_is_written(funcs, options, message, tmp_path, monkeypatch,
                                                                      capsys):
    """The run's directory (its recorded settings) is not made: the recipe is refused whole first."""
    monkeypatch.chdir(tmp_path)
    argv = [*LENGTH_ONLY, "--reward_funcs", *funcs, "--reward_weights", "1.0", "--reward_options", options,
            "--allow_weak_signal", "true"]
    assert train_cli(argv, tmp_path, monkeypatch, capsys).startswith(message)
    assert not (tmp_path / "run").exists()


def test_training_refuses_a_weight_that_is_not_a_number(tmp_path, monkeypatch, capsys):
    err = train_cli([*LENGTH_ONLY, "--reward_weights", "nan"], tmp_path, monkeypatch, capsys)
    assert err == "error: reward_weights must be finite numbers, got nan for length"


def test_an_option_value_out_of_range_is_refused_when_the_reward_is_built():
    from rewards import RewardContext, build_rewards

    for bad in ({"tolerance": 1.5}, {"target_words": 0}, {"target_words": "300"}, {"tolerance": float("nan")}):
        with pytest.raises(UsageError, match="reward 'length'"):
            build_rewards(["length"], {"length": bad}, context=RewardContext())
    assert build_rewards(["length"], {"length": {"target_words": 30}}, context=RewardContext())


def test_the_start_up_check_refuses_a_reward_that_gives_no_value():
    """An encoder that cannot load makes every embedding reward None: filled with the group mean at
    every step, it would train nothing while the run seemed to go on."""
    def dead(prompts, completions, **columns):
        return [None] * len(completions)

    def half(prompts, completions, **columns):
        return [None, 1.0]

    with pytest.raises(UsageError, match="dead gave no value"):
        grpo.check_rewards([half, dead], None)
    grpo.check_rewards([half], None)  # one failed value is a failure, not a broken reward


def test_heldout_refuses_weights_that_do_not_match_the_rewards_before_writing(tmp_path, monkeypatch, capsys):
    from generate.datasets import load_dataset
    from train.split import split_tasks

    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("reward_funcs: [length]\nreward_weights: [1.0, 1.0]\n")
    split_tasks(load_dataset("default"), 0.2, 0, "default").save(tmp_path / "run")
    monkeypatch.setattr(heldout_reward, "write_stories", lambda *a: pytest.fail("wrote stories"))
    with pytest.raises(SystemExit) as exit_info:
        run_cli(heldout_reward.main, ["--config", str(recipe), "--split", str(tmp_path / "run"),
                                      "--model", "smollm2-135m-instruct"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2 and len(err) == 1 and "reward_weights has 2 weight(s)" in err[0], err


@pytest.mark.parametrize("setting", [{"top_k": 50}, {"repetition_penalty": 1.2}, {"min_p": 0.05},
                                     {"generation_kwargs": {"no_repeat_ngram_size": 3}}])
def test_heldout_refuses_a_sampling_setting_it_cannot_reproduce(setting):
    """Held-out stories are sampled with max_completion_length, temperature, top_p and seed; a run
    trained with another sampling setting would be scored on another policy's stories."""
    config = {"reward_funcs": ["length"], **setting}
    with pytest.raises(UsageError, match=f"training sampled with {next(iter(setting))}="):
        heldout_reward.recipe_settings(config)
    heldout_reward.recipe_settings({"reward_funcs": ["length"], "top_k": 0, "repetition_penalty": 1.0})


def test_heldout_reads_the_recorded_sampling_settings_of_the_run(tmp_path):
    from generate.common.manifest import write_manifest

    write_manifest(tmp_path, kind="grpo", config={"script": {}, "training": {"top_k": 40}})
    trained, _ = heldout_reward.trained_config(tmp_path, {"reward_funcs": ["length"]})
    with pytest.raises(UsageError, match="top_k=40"):
        heldout_reward.recipe_settings(trained)


@pytest.mark.parametrize("flag", ["--load_in_4bit", "--load_in_8bit"])
def test_training_refuses_a_quantized_base_it_would_not_load(flag, tmp_path, monkeypatch, capsys):
    """Nothing passes trl's quantization settings to the model load: the run would train the
    full-precision base while its recipe and manifest say 4- or 8-bit."""
    err = train_cli([*LENGTH_ONLY, "--reward_weights", "1.0", flag, "true"], tmp_path, monkeypatch, capsys)
    assert "quantized (QLoRA) training is not supported" in err


def test_heldout_refuses_one_sample_where_group_diversity_needs_siblings(tmp_path, monkeypatch, capsys):
    """One story per prompt has no sibling: group_diversity would be missing for every story and
    the total would silently be another composite than the training's."""
    from generate.datasets import load_dataset
    from train.split import split_tasks

    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("reward_funcs: [group_diversity, length]\n")
    split_tasks(load_dataset("default"), 0.2, 0, "default").save(tmp_path / "run")
    monkeypatch.setattr(heldout_reward, "write_stories", lambda *a: pytest.fail("wrote stories"))
    with pytest.raises(SystemExit) as exit_info:
        run_cli(heldout_reward.main, ["--config", str(recipe), "--split", str(tmp_path / "run"), "--samples", "1",
                                      "--model", "smollm2-135m-instruct"])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2 and len(err) == 1 and "--samples must be at least 2" in err[0], err


def test_a_run_resumes_only_with_the_settings_it_was_trained_with(tmp_path, monkeypatch, capsys):
    """A changed recipe re-run into the same output_dir would continue (at max_steps: not train) the
    old run while the manifest recorded the new settings as its own."""
    argv = [*LENGTH_ONLY, "--reward_weights", "1.0"]
    with pytest.raises(Reached):  # a fresh run: recorded, then trained
        train_cli(argv, tmp_path, monkeypatch, capsys)
    checkpoint = tmp_path / "run" / "checkpoint-5"
    checkpoint.mkdir()
    (checkpoint / "trainer_state.json").write_text("{}")
    for same in (argv, [*argv, "--max_steps", "80", "--logging_steps", "5"]):  # how long, how visibly: the same run
        with pytest.raises(Reached):
            train_cli(same, tmp_path, monkeypatch, capsys)
    err = train_cli([*argv, "--learning_rate", "1e-5"], tmp_path, monkeypatch, capsys)
    assert "holds a run trained with other settings (training.learning_rate)" in err
    err = train_cli([*argv, "--reward_options", '{"length": {"target_words": 50}}'], tmp_path, monkeypatch, capsys)
    assert "(script.reward_options)" in err


def test_the_processes_of_one_run_record_the_same_settings():
    """Every process checks a resume; what differs between them (its rank) is no setting."""
    parser = grpo.RecipeParser((grpo.ScriptArguments, grpo.GRPOConfig, grpo.ModelConfig))
    script, training, model = parser.parse_args_and_config([*LENGTH_ONLY, "--output_dir", "unused"])
    seen = []
    for rank in (0, 1):
        training.local_rank = rank
        seen.append(grpo.run_settings(script, training, model))
    assert seen[0] == seen[1]
