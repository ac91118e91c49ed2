"""Reference-corpus novelty rewards: the paper's three judge-free metrics, as training rewards.

Each reward is the evaluation's own computation (`eval.metrics.story.StoryMetrics.measure`) on
the completions, so a reward value equals the number `review-lab eval` reports for that story.
Reference options (`reference_dir`, `embedder`, `max_chunks`) pick the corpus; rewards with equal
options share one loaded corpus and, within a step, one encoder pass (both held by the
`RewardContext`). Options `reference_dir`, `embedder`, `max_chunks` and `seed` (the seeded
reference sample's seed, as the evaluation's `--seed`; the context's manifest record names it)
must match the evaluation's for a reward value to be the evaluation's number.

A completion whose value cannot exist (empty, or no words, e.g. emoji only) is worth 0.0, the floor
of all three metrics (`rewards.text.floored`, the rule every reward with such a floor follows): a
text without words adds nothing new. It is not None, which GRPO's trainer
would fill with the group mean (`rewards.groups`: that is for *failed* calls, which carry no
information; an empty story does). The evaluation reports the same story's metric as null with its
reason, since there it describes the story rather than paying for it.
"""

from __future__ import annotations

from eval.embed import DEFAULT_EMBEDDER, check_embedder
from generate.common.ranges import AT_LEAST_1, POSITIVE, UNBOUNDED, checked, existing_dir, in_range
from rewards.context import RewardContext
from rewards.registry import reward
from rewards.text import CANNOT_EXIST, NO_TEXT, completion_texts, floored

__all__ = ["CANNOT_EXIST", "NO_TEXT", "kl", "novelty_cos", "volume_gain"]


# What each option admits (`rewards.registry`); `max_chunks` None: the whole corpus.
REFERENCE = {"reference_dir": checked(existing_dir), "embedder": checked(check_embedder),
             "max_chunks": in_range(AT_LEAST_1), "seed": in_range(UNBOUNDED)}


def _measure(context: RewardContext, completions, metric: str, reference_dir: str | None, embedder: str,
             max_chunks: int | None, alpha: float = 1.0, seed: int = 0) -> list[float | None]:
    metrics = context.story_metrics(reference_dir, embedder, max_chunks, kl_alpha=alpha, seed=seed,
                                    volume=metric == "volume_gain")
    texts = completion_texts(completions)
    chunks = None if metric == "kl" else context.chunks(texts, embedder, metrics.chunk_size)
    measured = metrics.measure(texts, chunks, metrics=(metric,))
    # A value that cannot exist is worth the floor; one that failed (an encoder error) stays None,
    # which the trainer fills with the group mean.
    return [floored(m.values[metric], m.missing.get(metric)) for m in measured]


@reward("kl", novelty=True, options={**REFERENCE, "alpha": in_range(POSITIVE)})
def kl(prompts, completions, *, context: RewardContext, reference_dir: str | None = None,
       embedder: str = DEFAULT_EMBEDDER, max_chunks: int | None = None, alpha: float = 1.0,
       seed: int = 0, **columns) -> list[float]:
    """Lexical divergence KL(p_story || q_reference) in nats (`eval.metrics.unigram_kl`)."""
    return _measure(context, completions, "kl", reference_dir, embedder, max_chunks, alpha, seed)


@reward("novelty_cos", novelty=True, options=REFERENCE)
def novelty_cos(prompts, completions, *, context: RewardContext, reference_dir: str | None = None,
                embedder: str = DEFAULT_EMBEDDER, max_chunks: int | None = None, seed: int = 0,
                **columns) -> list[float]:
    """Semantic novelty, 1 - max cosine to the nearest reference chunk (`eval.metrics.CosineNovelty`)."""
    return _measure(context, completions, "novelty_cos", reference_dir, embedder, max_chunks, seed=seed)


@reward("volume_gain", novelty=True, options=REFERENCE)
def volume_gain(prompts, completions, *, context: RewardContext, reference_dir: str | None = None,
                embedder: str = DEFAULT_EMBEDDER, max_chunks: int | None = None, seed: int = 0,
                **columns) -> list[float]:
    """Embedding volume gain over the reference in nats (`eval.metrics.VolumeGain`, exact and
    O(d^2 k) per story)."""
    return _measure(context, completions, "volume_gain", reference_dir, embedder, max_chunks, seed=seed)
