"""A reward's logged mean is over the values it gave, not over the group-mean fills that stand in
for its failures (`train/trainer.py`, `rewards.composite`, `review-lab heldout`): a fill is an
estimate that keeps a failed value out of the advantage, not an observation. The fill count is
reported beside it, and the total the advantages come from still uses the fills."""

from __future__ import annotations

import math

import pytest

from rewards.composite import combine, run_rewards, score_batch
from tests.train.conftest import chat
from train import heldout as heldout_reward

# Two prompt groups of two; the first group's second value failed: filled with 1.0, the mean over
# all four would be 2.5, and over what the reward gave 3.0.
GIVEN = [1.0, None, 3.0, 5.0]


def flaky(prompts, completions, **columns):
    return list(GIVEN)


def test_run_rewards_keeps_failures_and_combine_fills_and_counts_them():
    prompts = ["p"] * 4
    values = run_rewards([flaky], prompts, [chat("x")] * 4, prompt_id=["a", "a", "b", "b"])
    assert values == {"flaky": GIVEN}
    filled, counts, totals = combine(values, prompts, [2.0], prompt_id=["a", "a", "b", "b"])
    assert filled == {"flaky": [1.0, 1.0, 3.0, 5.0]} and counts == {"flaky": 1}
    assert totals == pytest.approx([2.0, 2.0, 6.0, 10.0])
    assert score_batch([flaky], prompts, [chat("x")] * 4, [2.0], prompt_id=["a", "a", "b", "b"]) == (filled, totals)


def test_heldout_reports_the_mean_of_given_values_with_the_fill_count():
    results = {"base": {"values": {"flaky": GIVEN}, "filled": {"flaky": 1}, "totals": [1.0, 1.0, 3.0, 5.0]},
               "grpo": {"values": {"flaky": [2.0] * 4}, "filled": {"flaky": 0}, "totals": [2.0] * 4}}
    lines = heldout_reward.table(results, n_prompts=2, samples=2).splitlines()
    assert lines[1].split()[1:5] == ["3.0000", "(1", "filled)", "2.5000"]  # the reward's mean, its fills, the total
    assert lines[2].split()[1:3] == ["2.0000", "2.0000"]  # nothing filled: nothing said


@pytest.mark.slow
@pytest.mark.train
def test_the_trainer_logs_each_rewards_mean_over_the_values_it_gave(tmp_path):
    """One real GRPO step of the bundled writer on two prompts x two generations."""
    from trl import GRPOConfig

    from generate.datasets import load_dataset
    from train.data import prompt_dataset
    from train.model import resolve_model_path
    from train.trainer import GRPOTrainer

    args = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, max_steps=1, per_device_train_batch_size=4,
                      num_generations=2, max_completion_length=4, logging_steps=1, report_to="none",
                      save_strategy="no", gradient_checkpointing=False)
    trainer = GRPOTrainer(model=resolve_model_path("smollm2-135m-instruct"), reward_funcs=[flaky], args=args,
                          train_dataset=prompt_dataset(load_dataset("default")[:2]))
    trainer.train()
    logged = trainer.state.log_history[0]
    assert logged["rewards/flaky/filled"] == 1
    assert logged["rewards/flaky/mean"] == pytest.approx(3.0)  # not 2.5, the mean with the fill
    assert logged["rewards/flaky/std"] == pytest.approx(2.0)  # of 1, 3, 5 (not 1.91 with a second 1)
    assert logged["reward"] == pytest.approx(2.5)  # the advantages' total: the fill stands in for the failure
    assert math.isfinite(logged["loss"])
