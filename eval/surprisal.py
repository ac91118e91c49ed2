"""Surprisal: mean negative log-probability of a story's tokens under a scoring model.

The paper's intrinsic-diversity metric (its eq. 1): S = -1/L sum_j log p(x_j | x_<j), averaged
over the L story tokens so long and short stories compare. The story is teacher-forced as the
assistant reply to the single-agent writing prompt for its task (template `single_write`), so
every framework's stories are scored against the same context: what a plain writer was asked.
Multi-agent frameworks' own prompts (personas, feedback) would otherwise make the number depend
on each framework's context rather than on the story.

One function serves the evaluation and the GRPO reward (`surprisal(scorer, prompts, stories)`),
batched through `HFBackend.score`.
"""

from __future__ import annotations

import logging
import math
from typing import Protocol

from generate.common.errors import UsageError
from generate.prompts import PromptSet, load_prompts

log = logging.getLogger(__name__)

WRITER_TEMPLATE = "single_write"


class Scorer(Protocol):
    def score(self, pairs: list[tuple[list[dict[str, str]], str]], batch_size: int | None = None) -> list[list[float]]:
        ...


def as_scorer(model: object) -> Scorer:
    """The teacher-forcing scorer behind a `Model` or backend.

    Raises:
        UsageError: the backend cannot score given text (chat APIs only return logprobs of
            tokens they generate themselves).
    """
    backend = getattr(model, "backend", model)
    if not callable(getattr(backend, "score", None)):
        raise UsageError(f"surprisal needs a local hf model to score text; {type(backend).__name__} cannot")
    return backend


def surprisal(scorer: object, prompts: list[str], stories: list[str], *, prompt_set: PromptSet | None = None,
              template: str = WRITER_TEMPLATE, batch_size: int | None = None) -> list[float | None]:
    """Mean token surprisal (nats per token) of each story given its writing prompt.

    Args:
        scorer: an `HFBackend`, a `Model` wrapping one, or anything with the same `score` method.
        prompts: the task prompt of each story (the SciFi prompt text, not a rendered message).
        stories: the story texts, same length as `prompts`.
        prompt_set: templates to render the writer message with (default: `configs/prompts/`).
        template: the template name; the single-agent writing prompt by default.
        batch_size: sequences per forward pass (default: the scorer's batch size).

    Returns:
        One value per story; None for an empty story (no tokens to average).
    """
    if len(prompts) != len(stories):
        raise ValueError(f"{len(prompts)} prompts for {len(stories)} stories")
    backend = as_scorer(scorer)
    prompt_set = prompt_set or load_prompts()
    todo = [i for i, s in enumerate(stories) if s and s.strip()]
    pairs = [([{"role": "user", "content": prompt_set.render(template, prompt=prompts[i])}], stories[i]) for i in todo]
    logprobs = backend.score(pairs, batch_size=batch_size) if pairs else []
    out: list[float | None] = [None] * len(stories)
    for i, lp in zip(todo, logprobs):
        if lp:
            value = -math.fsum(lp) / len(lp)
            out[i] = value if math.isfinite(value) else None
    return out
