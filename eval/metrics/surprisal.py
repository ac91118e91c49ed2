"""Surprisal: mean negative log-probability of a story's tokens under a scoring model.

The paper's intrinsic-diversity metric (its eq. 1): S = -1/L sum_j log p(x_j | x_<j), averaged
over the L story tokens so long and short stories compare. The story is teacher-forced as the
assistant reply to the single-agent writer request for its task (`PromptSet.writer_messages`),
so every framework's stories are scored against the same context: what a plain writer was asked.
Multi-agent frameworks' own prompts (personas, feedback) would otherwise make the number depend
on each framework's context rather than on the story.

Surprisal is defined under one model's distribution: values from different scorers do not
compare (the paper leaves it out when writers differ), which is why evaluations record their
scorer and comparisons refuse to mix them.

One function serves the evaluation and the GRPO reward, batched through `HFBackend.score`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from typing import Protocol

from eval.metrics.story import EMPTY, Measured
from eval.text import sanitize
from generate.common.errors import UsageError
from generate.prompts import PromptSet, load_prompts


class Scorer(Protocol):
    context_length: int | None

    def score(self, pairs: list[tuple[list[dict[str, str]], str]],
              batch_size: int | None = None) -> list[list[float] | None]:
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


def scorer_numerics(load: Callable[[str], object], scorer: str | None, writers: Collection[str]) -> dict | None:
    """The numerics (bf16 or float32) surprisal is computed in, which evaluations record and refuse
    to mix: the values of one model in both differ. `scorer`'s (--scorer), else {writer spec:
    numerics} of the writers that have any; a writer that cannot be loaded has none (its
    surprisal is missing, with the reason).

    Args:
        load: the `Model` of a spec (the evaluation's, which keeps each one loaded).
        scorer: the one scorer of every story, or None: each story's writer scores it.
        writers: the stories' writer specs.
    """
    if scorer:
        return load(scorer).backend.numerics() or None
    numerics = {}
    for spec in sorted(writers):
        try:
            numerics[spec] = load(spec).backend.numerics()
        except UsageError:
            continue
    return {spec: n for spec, n in numerics.items() if n} or None


def surprisal(scorer: object, prompts: list[str], stories: list[str], *, prompt_set: PromptSet | None = None,
              batch_size: int | None = None) -> list[Measured]:
    """Mean token surprisal (nats per token) of each story given its writing prompt.

    Args:
        scorer: an `HFBackend`, a `Model` wrapping one, or anything with the same `score` method.
        prompts: the task prompt of each story (the SciFi prompt text, not a rendered message).
        stories: the story texts, same length as `prompts`.
        prompt_set: templates to render the writer request with (default: `configs/prompts/`).
        batch_size: sequences per forward pass (default: the scorer's batch size).

    Returns:
        One `Measured` per story with `surprisal`; missing, with the reason, for an empty story
        or one that does not fit the scorer's context.
    """
    if len(prompts) != len(stories):
        raise ValueError(f"{len(prompts)} prompts for {len(stories)} stories")
    backend = as_scorer(scorer)
    prompt_set = prompt_set or load_prompts()
    texts = [sanitize(s)[0] for s in stories]
    out = [Measured() for _ in texts]
    todo = [i for i, s in enumerate(texts) if s.strip()]
    for i in set(range(len(texts))) - set(todo):
        out[i].set("surprisal", None, EMPTY)
    pairs = [(prompt_set.writer_messages(sanitize(prompts[i])[0]), texts[i]) for i in todo]
    logprobs = backend.score(pairs, batch_size=batch_size) if pairs else []
    limit = getattr(backend, "context_length", None)
    for i, lp in zip(todo, logprobs):
        if lp is None:
            out[i].set("surprisal", None, f"longer than the scorer's context ({limit} tokens)")
        elif not lp:
            out[i].set("surprisal", None, "no story tokens")
        else:
            out[i].set("surprisal", -math.fsum(lp) / len(lp))
    return out
