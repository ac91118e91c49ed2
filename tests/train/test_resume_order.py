"""A GRPO run resumed from a checkpoint sees the prompts in the order the uninterrupted run sees
them, in every epoch (`train.trainer.EpochRepeatSampler`): resuming must not change the data."""

from __future__ import annotations

from pathlib import Path

import pytest


def orders(sampler, epochs: int) -> list[list[int]]:
    out = []
    for epoch in range(epochs):
        sampler.set_epoch(epoch)
        out.append(list(sampler))
    return out


def test_a_fresh_sampler_told_the_epoch_draws_that_epochs_order():
    from trl.trainer.utils import RepeatSampler

    from train.trainer import EpochRepeatSampler

    data = list(range(7))
    trl_sampler = RepeatSampler(data, mini_repeat_count=2, batch_size=1, seed=3)
    uninterrupted = [list(trl_sampler) for _ in range(4)]  # trl's own order, epoch after epoch
    assert orders(EpochRepeatSampler(data, mini_repeat_count=2, batch_size=1, seed=3), 4) == uninterrupted
    for epoch in range(4):  # a resumed run builds a new sampler and starts at a later epoch
        fresh = EpochRepeatSampler(data, mini_repeat_count=2, batch_size=1, seed=3)
        fresh.set_epoch(epoch)
        assert list(fresh) == uninterrupted[epoch]
    unset = EpochRepeatSampler(data, mini_repeat_count=2, batch_size=1, seed=3)
    assert [list(unset) for _ in range(4)] == uninterrupted  # nobody sets the epoch: still trl's order


def run(out: Path, max_steps: int, resume: str | None = None) -> list[str]:
    """GRPO steps of the bundled writer on 3 prompts (one a step, so 3 steps an epoch), a LoRA
    checkpoint every 3 steps; the prompt id of each step."""
    from peft import LoraConfig
    from trl import GRPOConfig

    from generate.datasets import load_dataset
    from train.data import prompt_dataset
    from train.model import resolve_model_path
    from train.trainer import GRPOTrainer

    seen: list[str] = []

    def record(prompts, completions, prompt_id, **columns):
        seen.append(prompt_id[0])
        return [0.0 for _ in completions]

    args = GRPOConfig(output_dir=str(out), use_cpu=True, bf16=False, max_steps=max_steps, per_device_train_batch_size=2,
                      num_generations=2, max_completion_length=1, logging_steps=1, report_to="none",
                      save_strategy="steps", save_steps=3, gradient_checkpointing=False, seed=3)
    trainer = GRPOTrainer(model=resolve_model_path("smollm2-135m-instruct"), reward_funcs=[record], args=args,
                          train_dataset=prompt_dataset(load_dataset("default")[:3]),
                          peft_config=LoraConfig(r=2, target_modules=["q_proj"], task_type="CAUSAL_LM"))
    trainer.train(resume_from_checkpoint=resume)
    return seen


@pytest.mark.slow
@pytest.mark.train
def test_a_run_resumed_at_an_epoch_boundary_trains_on_the_uninterrupted_order(tmp_path):
    full = run(tmp_path / "full", 5)
    first = run(tmp_path / "part", 3)
    resumed = run(tmp_path / "part", 5, resume=str(tmp_path / "part" / "checkpoint-3"))
    assert first == full[:3]
    assert full[3:] != full[:2]  # with this seed epoch 1's order differs from epoch 0's: the test can tell
    assert resumed == full[3:]
