"""Surprisal reward: mean token surprisal of the story under a fixed scoring model.

Off by default in every recipe: surprisal is the easiest metric to game (any unlikely token
sequence, gibberish included, scores high), so use it only quality-gated (`reward_gate: judge`)
and with a length penalty. The scorer is a fixed local model (default: the embedded SmolLM2), not
the policy, so the target does not move as the policy learns; it is the evaluation's
`eval.surprisal.surprisal` with the same single-agent writing prompt as context.
"""

from __future__ import annotations

from functools import lru_cache

from eval.surprisal import as_scorer
from eval.surprisal import surprisal as surprisal_metric
from generate.backends import load_backend
from generate.common.errors import UsageError
from rewards.registry import reward
from rewards.text import completion_texts


@lru_cache(maxsize=2)
def get_scorer(model: str, batch_size: int):
    """One scoring backend per model and process."""
    return as_scorer(load_backend(model, batch_size=batch_size))


@reward("surprisal", novelty=True)
def surprisal(prompts, completions, *, model: str = "smollm2-135m-instruct", batch_size: int = 8,
              **columns) -> list[float | None]:
    """Mean negative log-probability per story token (nats) under `model`; None for an empty story."""
    tasks = columns.get("task_prompt")
    if tasks is None:  # the rendered chat prompt is not the context the metric defines
        raise UsageError("surprisal needs the bare task of each prompt: a `task_prompt` dataset column")
    return surprisal_metric(get_scorer(model, batch_size), list(tasks), completion_texts(completions))
