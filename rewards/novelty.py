"""Reference-corpus novelty rewards: the paper's three judge-free metrics, as training rewards.

Each reward calls the evaluation metric (`eval.metrics`) on the same inputs the evaluation uses,
so a reward value equals the number the evaluation would report for that story. Reference
options (`reference_dir`, `embedder`, `max_chunks`) pick the corpus; rewards with equal options
share one loaded corpus and, within a step, one encoder pass over the completions.
"""

from __future__ import annotations

from eval.embed import DEFAULT_EMBEDDER
from eval.metrics import unigram_kl
from rewards.embedding import story_chunk_embeddings
from rewards.reference import reference_metrics
from rewards.registry import reward
from rewards.text import completion_texts


@reward("kl", novelty=True)
def kl(prompts, completions, *, reference_dir: str | None = None, embedder: str = DEFAULT_EMBEDDER,
       max_chunks: int | None = None, alpha: float = 1.0, **columns) -> list[float | None]:
    """Lexical divergence KL(p_story || q_reference) in nats (`eval.metrics.unigram_kl`);
    None for a completion without words."""
    ref = reference_metrics(reference_dir, embedder, max_chunks)
    out: list[float | None] = []
    for text in completion_texts(completions):
        try:
            out.append(unigram_kl(text, ref.unigram, alpha=alpha))
        except ValueError:  # no words: the distribution is undefined
            out.append(None)
    return out


@reward("novelty_cos", novelty=True)
def novelty_cos(prompts, completions, *, reference_dir: str | None = None, embedder: str = DEFAULT_EMBEDDER,
                max_chunks: int | None = None, **columns) -> list[float | None]:
    """Semantic novelty, 1 - max cosine to the nearest reference chunk (`eval.metrics.CosineNovelty`);
    None for an empty completion."""
    ref = reference_metrics(reference_dir, embedder, max_chunks)
    chunks = story_chunk_embeddings(completion_texts(completions), embedder, ref.corpus.chunk_size)
    return [ref.cosine(c) if len(c) else None for c in chunks]


@reward("volume_gain", novelty=True)
def volume_gain(prompts, completions, *, reference_dir: str | None = None, embedder: str = DEFAULT_EMBEDDER,
                max_chunks: int | None = None, **columns) -> list[float | None]:
    """Embedding volume gain over the reference in nats (`eval.metrics.VolumeGain`, exact and
    O(d^2 k) per story); None for an empty completion."""
    ref = reference_metrics(reference_dir, embedder, max_chunks)
    chunks = story_chunk_embeddings(completion_texts(completions), embedder, ref.corpus.chunk_size)
    gains = ref.volume.batch([c for c in chunks if len(c)])
    values = iter(gains.tolist())
    return [next(values) if len(c) else None for c in chunks]
