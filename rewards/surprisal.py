"""Surprisal reward: mean token surprisal of the story under a fixed scoring model.

Off by default in every recipe: surprisal is the easiest metric to game (any unlikely token
sequence, gibberish included, scores high), so use it only quality-gated (`reward_gate: judge`)
and with a length penalty. The scorer is a fixed local model (default: the embedded SmolLM2), not
the policy, so the target does not move as the policy learns; it is the evaluation's
`eval.metrics.surprisal.surprisal` with the same single-agent writer request as context.
"""

from __future__ import annotations

from eval.metrics.surprisal import surprisal as surprisal_metric
from generate.backends.specs import check_spec
from generate.common.errors import UsageError
from generate.common.ranges import AT_LEAST_1, checked, in_range
from rewards.context import RewardContext
from rewards.registry import reward
from rewards.text import completion_texts, floored


@reward("surprisal", novelty=True, options={"model": checked(check_spec), "batch_size": in_range(AT_LEAST_1)})
def surprisal(prompts, completions, *, context: RewardContext, model: str = "smollm2-135m-instruct",
              batch_size: int = 8, **columns) -> list[float | None]:
    """Mean negative log-probability per story token (nats) under `model`; 0.0, the floor, for an
    empty story (`rewards.text.floored`), None where scoring failed or the story exceeds the context."""
    tasks = columns.get("task_prompt")
    if tasks is None:  # the rendered chat prompt is not the context the metric defines
        raise UsageError("surprisal needs the bare task of each prompt: a `task_prompt` dataset column")
    values = surprisal_metric(context.scorer(model, batch_size), list(tasks), completion_texts(completions))
    return [floored(m.values["surprisal"], m.missing.get("surprisal")) for m in values]
