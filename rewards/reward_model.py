"""The `reward_model` reward: a trained Bradley-Terry reward model's scalar score of each completion.

A thin wrapper over the evaluation's scorer (`eval.scorers.reward_model.RewardModelScorer`): each
completion is scored as the reward model was trained (the writer's request plus the completion,
chat template, right-padded), all completions of a step in batches of `batch_size` (one forward
pass for a GRPO step of up to `batch_size` completions). The raw score is a logit: its scale is
arbitrary and its differences within a prompt group are what GRPO uses, so weight it against the
other rewards after looking at its spread. A completion longer than `max_length` tokens gets None
(no advantage), never a truncated score. The loaded model is cached in the reward context, one per
(directory, device), shared by every reward of a trainer.
"""

from __future__ import annotations

from eval.scorers.reward_model import DTYPES, RewardModelScorer, check_device, resolve_rm_dir
from generate.common.ranges import AT_LEAST_1, OneOf, checked, in_range
from rewards.context import RewardContext
from rewards.registry import reward
from rewards.text import completion_text


def scorer_for(context: RewardContext, model_dir: str, device: str, dtype: str) -> RewardModelScorer:
    """The context's scorer for a model directory, loaded once per context (two trainers never
    share one and nothing lives at module level)."""
    key = ("reward_model", str(resolve_rm_dir(model_dir).resolve()), device, dtype)
    return context.resource(key, lambda: RewardModelScorer(model_dir, device, dtype))


# What each option admits (`rewards.registry`): `model_dir` must hold a reward model when the recipe
# is bound (`resolve_rm_dir`), not when the first batch is scored.
OPTIONS = {"model_dir": checked(resolve_rm_dir), "batch_size": in_range(AT_LEAST_1),
           "max_length": in_range(AT_LEAST_1), "device": checked(check_device), "dtype": checked(OneOf(DTYPES))}


@reward("reward_model", options=OPTIONS)
def reward_model(prompts, completions, *, context: RewardContext, model_dir: str = "runs/rm/smollm2_cpu",
                 batch_size: int = 16, max_length: int | None = None, device: str = "auto",
                 dtype: str = "float32", **columns) -> list[float | None]:
    """The reward model's score of each completion given its prompt (a logit; higher is better).

    Options: `model_dir` (a `train/reward_model.py` output directory or a checkpoint), `batch_size`
    (sequences per forward pass), `max_length` (longer sequences get None; default the model's
    context), `device` ("auto": CUDA when available), `dtype` ("float32", as trained on the CPU
    recipe; "bfloat16" is faster where the hardware has it, at slightly different scores).
    """
    scorer = scorer_for(context, model_dir, device, dtype)
    return scorer.score(list(prompts), [completion_text(c) for c in completions], batch_size, max_length)
