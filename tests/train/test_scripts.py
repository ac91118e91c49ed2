"""`review-lab plot-rewards` and `review-lab heldout` (train/plot_rewards.py, train/heldout.py) on literal inputs."""

from __future__ import annotations

import json
from types import SimpleNamespace

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


@pytest.fixture
def heldout_run(tmp_path, monkeypatch):
    """A training run's directory (its split, no model) and a recipe rewarding 5-word stories;
    generation replaced by 3-word stories, so each test sees which length target scored them."""
    from generate.datasets import load_dataset
    from train.split import split_tasks

    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("reward_funcs: [length]\nreward_weights: [1.0]\nreward_options: {length: {target_words: 5}}\n")
    split_tasks(load_dataset("default"), 0.2, 0, "default").save(tmp_path / "run")
    monkeypatch.setattr(heldout_reward, "write_stories", lambda spec, tasks, samples, decoding:
                        ["Ice sang softly."] * (len(tasks) * samples))
    return recipe, tmp_path / "run"


def heldout_args(recipe, run, out):
    return ["--config", str(recipe), "--split", str(run), "--samples", "1", "--model", "smollm2-135m-instruct",
            "--out", str(out)]


def test_heldout_scores_with_the_options_the_training_run_recorded(heldout_run, tmp_path):
    """`review-lab story` trains with its own reward options (--reward_options): the held-out
    rewards are the training's, as its manifest records them, not the recipe file's."""
    from generate.common.manifest import write_manifest

    recipe, run = heldout_run
    write_manifest(run, kind="grpo", config={"script": {"reward_funcs": ["length"], "reward_gate": "none",
                                                        "reward_options": {"length": {"target_words": 3}}},
                                             "training": {"reward_weights": [2.0], "seed": 7}})
    assert heldout_reward.main(heldout_args(recipe, run, tmp_path / "out")) == 0
    report = json.loads((tmp_path / "out" / "heldout.json").read_text())
    assert report["results"]["smollm2-135m-instruct"]["values"]["length"] == [0.0] * 4  # 3 words: on target
    assert report["settings_from"] == str(run / "manifest.json")
    assert json.loads((tmp_path / "out" / "manifest.json").read_text())["seed"] == 7


def test_heldout_refuses_a_run_whose_training_options_it_cannot_know(heldout_run, tmp_path, capsys):
    """No manifest, and the run's step record says training had other reward options: one line, exit 2."""
    recipe, run = heldout_run
    (run / "step.json").write_text(json.dumps({"inputs": {"options": {"length": {"target_words": 3}}}}))
    with pytest.raises(SystemExit) as exit_info:
        run_cli(heldout_reward.main, heldout_args(recipe, run, tmp_path / "out"))
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no GRPO manifest.json" in err[0]
    (run / "step.json").write_text(json.dumps({"inputs": {"options": {"length": {"target_words": 5}}}}))
    assert heldout_reward.main(heldout_args(recipe, run, tmp_path / "out")) == 0  # the recipe's own: scored


def test_heldout_stories_are_cleaned_as_generation_cleans_them(monkeypatch):
    class Model:
        def generate(self, requests, desc=None):
            return [SimpleNamespace(text="Sure! Here's a story:\n\nTitle: Ice\n\nIce sang.\n\nI hope you enjoy it!")
                    for _ in requests]

        def close(self):
            pass

    monkeypatch.setattr(heldout_reward, "load_model", lambda spec, **options: Model())
    tasks = [SimpleNamespace(id="p", prompt="Write.")]
    decoding = {"max_completion_length": 8, "temperature": 1.0, "top_p": 1.0, "seed": 0}
    assert heldout_reward.write_stories("smollm2-135m-instruct", tasks, 2, decoding) == ["Ice sang."] * 2
