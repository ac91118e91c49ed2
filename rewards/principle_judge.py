"""The `principle_judge` reward: the adversarially optimised Detector (arXiv 2508.21476, 3.2-3.3)
as a GRPO reward, R_D(p, r) = f_D(p, r).

The Detector judges each completion against a principles file (`principles`: the result of
`python -m rewards.principles optimize`, any of its `iteration-NN.yaml`, or by default our
unoptimised starting set) with the requests and verdict reading of `rewards.principles.detector`,
so the reward judges exactly as the optimisation measured it. Set `mode` and `orders` to what the
optimisation used (its `principles.yaml` records them under `detector`).

- `mode: sample`: the paper's binary reward, 0 or 1 (one sampled reply per completion).
- `mode: logprob` (default, and the only usable one for the embedded 135M model): P(good), one
  prefilled greedy pass per completion and label order (`orders: 1` for exactly one pass; the
  default 2 asks both orders to cancel a small model's digit bias).

Like the rubric judge reward (`rewards.judge`), it is async and sends every completion of a step
to the model as ONE batched call under a `timeout`; a call that fails or times out gives None for
every completion (a judge failure is no evidence about a story, and our trainer turns None into a
zero advantage), a single request the backend refuses (e.g. longer than its context) gives None
for its completion, and an empty completion gets 0 without a call. The task shown to the Detector
is the dataset's `task_prompt` column when there is one, else the last user message of the prompt.
Loaded detectors are cached on the trainer's `RewardContext`, never in module state.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from generate.backends import Model, backend_options, load_model
from rewards.context import RewardContext
from rewards.principles.detector import Detector, default_orders
from rewards.principles.texts import load_state, load_templates
from rewards.registry import reward
from rewards.text import completion_texts

log = logging.getLogger(__name__)

def task_text(prompt: Any) -> str:
    """The writing task of one prompt: a plain string, or the last user message of a chat."""
    if isinstance(prompt, str):
        return prompt
    users = [m.get("content", "") for m in prompt or [] if isinstance(m, dict) and m.get("role") == "user"]
    return str(users[-1]) if users else ""


def detector_for(context: RewardContext, principles: str | None, model: str, mode: str, orders: int | None,
                 templates: str | None, batch_size: int, base_url: str | None, concurrency: int, retries: int,
                 seed: int) -> tuple[Detector, Model]:
    """One (Detector, model) per configuration and context: loading a local model takes seconds."""
    key = ("principle_judge", principles, model, mode, orders, templates, batch_size, base_url, concurrency, retries,
           seed)

    def build() -> tuple[Detector, Model]:
        state = load_state(principles, need_strategy=False)
        options = backend_options(model, batch_size=batch_size, base_url=base_url, concurrency=concurrency)
        log.info("loading principle judge %s (%s mode, %d principles from %s)", model, mode, len(state.principles),
                 principles or "the starting set")
        judge_model = load_model(model, retries=retries, **options)
        detector = Detector(state.principles, load_templates(templates), mode, orders or default_orders(mode),
                            bool(judge_model.backend.supports_prefill), seed)
        return detector, judge_model

    return context.resource(key, build)


@reward("principle_judge")
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
    detector, judge_model = detector_for(context, principles, model, mode, orders, templates, batch_size, base_url,
                                         concurrency, retries, seed)
    tasks = columns.get("task_prompt") or [task_text(p) for p in prompts]
    asks = [detector.requests(task, text) for task, text in zip(tasks, completion_texts(completions), strict=True)]
    flat = [r for rs in asks for r in rs]
    try:
        outs = await asyncio.wait_for(judge_model.agenerate(flat), timeout) if flat else []
    except TimeoutError:
        log.warning("principle_judge: no answer within %.0fs for %d completions; their reward is None", timeout,
                    len(asks))
        return [0.0 if not rs else None for rs in asks]
    except Exception as exc:  # noqa: BLE001 - a judge failure must never stop training
        log.warning("principle_judge: call failed (%s: %s); reward is None for this batch", type(exc).__name__, exc)
        return [0.0 if not rs else None for rs in asks]
    values, start = [], 0
    for rs in asks:
        values.append(detector.verdict(outs[start:start + len(rs)]))
        start += len(rs)
    return values
