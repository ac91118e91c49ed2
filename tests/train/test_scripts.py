"""`review-lab plot-rewards` and `review-lab heldout` (train/plot_rewards.py, train/heldout.py) on literal inputs."""

from __future__ import annotations

import json

import numpy as np
import pytest

from generate.common.cli import run_cli
from train import heldout as heldout_reward
from train import plot_rewards

HISTORY = [
    {"step": 1, "loss": 0.1, "reward": 0.5, "rewards/judge/mean": 0.6, "rewards/length/mean": -0.2},
    {"step": 2, "loss": 0.1, "reward": 0.7, "rewards/judge/mean": None, "rewards/length/mean": -0.1},
    {"step": 3, "loss": 0.1, "reward": 0.9, "rewards/judge/mean": 0.7, "rewards/length/mean": 0.0,
     "rewards/length/std": 0.3},
    {"step": 3, "train_runtime": 9.0},
]


def test_reward_series_takes_the_total_and_each_component():
    series = plot_rewards.reward_series(HISTORY)
    assert series["total"] == ([1, 2, 3], [0.5, 0.7, 0.9])
    assert series["judge"] == ([1, 3], [0.6, 0.7])  # the step without a judge value is skipped
    assert set(series) == {"total", "judge", "length"}


def test_moving_average_is_trailing():
    assert plot_rewards.moving_average([1, 2, 3, 4], 2).tolist() == [1.0, 1.5, 2.5, 3.5]


def test_plot_writes_a_png(tmp_path):
    (tmp_path / "trainer_state.json").write_text(json.dumps({"log_history": HISTORY}))
    with pytest.raises(SystemExit) as exit_info:
        run_cli(plot_rewards.main, [str(tmp_path)])
    assert exit_info.value.code == 0
    assert (tmp_path / "rewards.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_heldout_table_reports_paired_differences():
    results = {
        "base": {"values": {"length": [0.0, 0.0, 1.0, 1.0]}, "totals": [0.0, 0.0, 1.0, 1.0]},
        "grpo": {"values": {"length": [1.0, 1.0, 1.0, 2.0]}, "totals": [1.0, 1.0, 1.0, 2.0]},
    }
    text = heldout_reward.table(results, n_prompts=2, samples=2)
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["model", "length", "total"]
    assert lines[2].split()[-3:] == ["+0.7500", "+-", "0.2500"]  # prompt diffs 1.0 and 0.5


def test_a_prompt_whose_samples_all_failed_is_left_out_of_the_difference_and_counted():
    """A failed reward is missing, not 0, and one prompt without a total must not turn the other
    prompts' paired difference into NaN."""
    results = {
        "base": {"values": {"length": [0.0, 0.0, 1.0, 1.0, 2.0, 2.0]}, "totals": [0.0, 0.0, 1.0, 1.0, 2.0, 2.0]},
        "grpo": {"values": {"length": [1.0, 1.0, None, None, 2.0, 3.0]}, "totals": [1.0, 1.0, None, None, 2.0, 3.0]},
    }
    lines = heldout_reward.table(results, n_prompts=3, samples=2).splitlines()
    assert lines[2].endswith("+0.7500 +- 0.2500 (2 of 3 prompts)")  # prompt diffs 1.0 and 0.5
    assert lines[2].split()[2] == "1.7500"  # the total's mean over the answered samples


def test_recipe_settings_take_rewards_and_decoding_from_the_recipe():
    config = {"reward_funcs": ["length"], "reward_weights": [2.0], "max_completion_length": 40, "beta": 0.1}
    script, settings = heldout_reward.recipe_settings(config)
    assert script.reward_funcs == ["length"]
    assert settings["reward_weights"] == [2.0] and settings["max_completion_length"] == 40
    assert settings["temperature"] == 1.0  # GRPOConfig's default when the recipe leaves it out
    assert np.isfinite(settings["top_p"])


@pytest.mark.slow
def test_heldout_script_reads_its_options_file_and_writes_a_manifest(tmp_path):
    """The held-out table is traceable: options from YAML + flags, and a manifest beside it."""
    from generate.datasets import load_dataset
    from train.split import split_tasks

    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("reward_funcs: [length]\nreward_weights: [1.0]\nreward_options: {length: {target_words: 5}}\n"
                      "max_completion_length: 6\nseed: 3\n")
    split_tasks(load_dataset("default"), 0.2, 0, "default").save(tmp_path)
    options = tmp_path / "heldout.yaml"
    options.write_text(f"config: {recipe}\nsplit: {tmp_path}\nsamples: 3\n")
    out = tmp_path / "heldout"
    assert heldout_reward.main(["--options", str(options), "--samples", "1", "--model", "base=smollm2-135m-instruct",
                                "--out", str(out)]) == 0
    report = json.loads((out / "heldout.json").read_text())
    assert report["samples"] == 1 and len(report["results"]["base"]["stories"]) == 4
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["kind"] == "heldout_reward" and manifest["config"]["samples"] == 1
    assert manifest["recipe"]["reward_funcs"] == ["length"] and manifest["seed"] == 3
