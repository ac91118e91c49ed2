"""Reference-corpus novelty rewards: the paper's three judge-free metrics, as training rewards.

Each reward is the evaluation's own computation (`eval.metrics.story.StoryMetrics.measure`) on
the completions, so a reward value equals the number `review-lab eval` reports for that story.
Reference options (`reference_dir`, `embedder`, `max_chunks`) pick the corpus; rewards with equal
options share one loaded corpus and, within a step, one encoder pass (both held by the
`RewardContext`). A completion without a value (empty, no words) gets None.
"""

from __future__ import annotations

from eval.embed import DEFAULT_EMBEDDER
from rewards.context import RewardContext
from rewards.registry import reward
from rewards.text import completion_texts


def _measure(context: RewardContext, completions, metric: str, reference_dir: str | None, embedder: str,
             max_chunks: int | None, alpha: float = 1.0) -> list[float | None]:
    metrics = context.story_metrics(reference_dir, embedder, max_chunks, kl_alpha=alpha)
    texts = completion_texts(completions)
    chunks = None if metric == "kl" else context.chunks(texts, embedder, metrics.chunk_size)
    return [m.values[metric] for m in metrics.measure(texts, chunks, metrics=(metric,))]


@reward("kl", novelty=True)
def kl(prompts, completions, *, context: RewardContext, reference_dir: str | None = None,
       embedder: str = DEFAULT_EMBEDDER, max_chunks: int | None = None, alpha: float = 1.0,
       **columns) -> list[float | None]:
    """Lexical divergence KL(p_story || q_reference) in nats (`eval.metrics.unigram_kl`)."""
    return _measure(context, completions, "kl", reference_dir, embedder, max_chunks, alpha)


@reward("novelty_cos", novelty=True)
def novelty_cos(prompts, completions, *, context: RewardContext, reference_dir: str | None = None,
                embedder: str = DEFAULT_EMBEDDER, max_chunks: int | None = None, **columns) -> list[float | None]:
    """Semantic novelty, 1 - max cosine to the nearest reference chunk (`eval.metrics.CosineNovelty`)."""
    return _measure(context, completions, "novelty_cos", reference_dir, embedder, max_chunks)


@reward("volume_gain", novelty=True)
def volume_gain(prompts, completions, *, context: RewardContext, reference_dir: str | None = None,
                embedder: str = DEFAULT_EMBEDDER, max_chunks: int | None = None, **columns) -> list[float | None]:
    """Embedding volume gain over the reference in nats (`eval.metrics.VolumeGain`, exact and
    O(d^2 k) per story)."""
    return _measure(context, completions, "volume_gain", reference_dir, embedder, max_chunks)
