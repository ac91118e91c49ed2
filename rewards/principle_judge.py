"""The `principle_judge` reward: the adversarially optimised Detector (arXiv 2508.21476, 3.2-3.3)
as a GRPO reward, R_D(p, r) = f_D(p, r).

A thin wrapper over the evaluation's scorer (`eval.scorers.principles.PrincipleScorer`): the
Detector judges each completion against a principles file (`principles`: the result of
`review-lab principles optimize`, any of its `iteration-NN.yaml`, or by default our
unoptimised starting set), so the reward judges exactly as the optimisation measured it and as
the evaluation's `principle_p` signal reports it. Set `mode` and `orders` to what the
optimisation used (its `principles.yaml` records them under `detector`).

- `mode: sample`: the paper's binary reward, 0 or 1 (one sampled reply per completion).
- `mode: logprob` (default, and the only usable one for the embedded 135M model): P(good), one
  prefilled greedy pass per completion and label order (`orders: 1` for exactly one pass; the
  default 2 asks both orders to cancel a small model's digit bias).

Like the rubric judge reward (`rewards.judge`), it is async and sends every completion of a step
to the model as ONE batched call under a `timeout`; a failed or timed-out call gives None (our
trainer turns None into a zero advantage) and an empty completion 0 (see the scorer). The task
shown to the Detector is the dataset's `task_prompt` column when there is one, else the last user
message of the prompt. Loaded scorers are cached on the trainer's `RewardContext`, never in
module state.
"""

from __future__ import annotations

from typing import Any

from eval.rubric import MODES
from eval.scorers.principles import PrincipleScorer
from eval.scorers.principles.texts import load_state, load_templates
from generate.backends.specs import check_spec
from generate.common.errors import UsageError
from generate.common.ranges import AT_LEAST_1, NON_NEGATIVE, POSITIVE, UNBOUNDED, OneOf, Range, checked, http_url, \
    in_range
from rewards.context import RewardContext
from rewards.registry import reward
from rewards.text import completion_texts


def task_text(prompt: Any) -> str:
    """The writing task of one prompt: a plain string, or the last user message of a chat."""
    if isinstance(prompt, str):
        return prompt
    users = [m.get("content", "") for m in prompt or [] if isinstance(m, dict) and m.get("role") == "user"]
    return str(users[-1]) if users else ""


def scorer_for(context: RewardContext, principles: str | None, model: str, mode: str, orders: int | None,
               templates: str | None, batch_size: int, base_url: str | None, concurrency: int, retries: int,
               seed: int) -> PrincipleScorer:
    """One scorer per configuration and context: loading a local model takes seconds."""
    key = ("principle_judge", principles, model, mode, orders, templates, batch_size, base_url, concurrency, retries,
           seed)
    return context.resource(key, lambda: PrincipleScorer.load(principles, model, mode, orders, templates, batch_size,
                                                              base_url, concurrency, retries, seed))


def check_principles(path: str) -> None:
    """A principles file the Detector can judge with (a strategy is not needed to judge)."""
    load_state(path, need_strategy=False)


def check_orders(*, mode: str, orders: int | None, **_) -> None:
    """Sample mode asks one label order (`eval.scorers.principles.detector`)."""
    if mode == "sample" and orders not in (None, 1):
        raise UsageError(f"orders must be 1 in sample mode, got {orders}")


# What each option admits (`rewards.registry`); the files are read when the recipe is bound.
OPTIONS = {"principles": checked(check_principles), "model": checked(check_spec), "mode": checked(OneOf(MODES)),
           "orders": in_range(Range(1, 2)), "templates": checked(load_templates), "timeout": in_range(POSITIVE),
           "batch_size": in_range(AT_LEAST_1), "base_url": checked(http_url), "concurrency": in_range(AT_LEAST_1),
           "retries": in_range(NON_NEGATIVE), "seed": in_range(UNBOUNDED)}


@reward("principle_judge", options=OPTIONS, check=check_orders)
async def principle_judge(prompts, completions, *, context: RewardContext, principles: str | None = None,
                          model: str = "smollm2-135m-instruct", mode: str = "logprob", orders: int | None = None,
                          templates: str | None = None, timeout: float = 120.0, batch_size: int = 16,
                          base_url: str | None = None, concurrency: int = 16, retries: int = 2, seed: int = 0,
                          **columns) -> list[float | None]:
    """P(good) (logprob mode) or 0/1 (sample mode) of each completion under the principles.

    Options: `principles` (a principles YAML), `model` (backend spec), `mode`, `orders` (label
    orders in logprob mode), `templates` (prompts YAML), `timeout` (seconds for the whole batched
    call), `batch_size` (hf), `base_url` and `concurrency` (OpenAI-compatible servers; the key
    comes from OPENAI_API_KEY), `retries` (per engine call), `seed` (sample mode's seeds).
    """
    scorer = scorer_for(context, principles, model, mode, orders, templates, batch_size, base_url, concurrency,
                        retries, seed)
    tasks = columns.get("task_prompt") or [task_text(p) for p in prompts]
    return await scorer.ascore(tasks, completion_texts(completions), timeout)
