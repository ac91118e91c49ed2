"""The reference corpus and its metric objects, loaded and factored once per process.

Loading the corpus (cached chunk embeddings + unigram counts) takes seconds and factoring it
(the volume-gain eigendecomposition, the KL's per-corpus sums) a little more; a reward is called
on every step, so both happen on first use and are then shared by every reference reward.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property, lru_cache

from eval.metrics import CosineNovelty, UnigramReference, VolumeGain
from eval.reference import ReferenceCorpus, load_reference
from generate.common.errors import UsageError
from rewards.embedding import get_embedder


@dataclass(eq=False)
class ReferenceMetrics:
    """Metric objects built from one reference corpus, each on first use."""

    corpus: ReferenceCorpus

    @cached_property
    def unigram(self) -> UnigramReference:
        return UnigramReference(self.corpus.counts)

    @cached_property
    def cosine(self) -> CosineNovelty:
        return CosineNovelty(self.corpus.embeddings)

    @cached_property
    def volume(self) -> VolumeGain:
        return VolumeGain(self.corpus.embeddings)


@lru_cache(maxsize=4)
def reference_metrics(directory: str | None, embedder: str, max_chunks: int | None = None,
                      seed: int = 0) -> ReferenceMetrics:
    """The reference metrics for a corpus (directory None: `$SCIFI_REFERENCE_DIR`).

    Raises:
        UsageError: The corpus is unavailable: a reference reward cannot run without it.
    """
    corpus = load_reference(directory, get_embedder(embedder), max_chunks=max_chunks, seed=seed)
    if corpus is None:
        raise UsageError("reference rewards (kl, novelty_cos, volume_gain) need the reference corpus: set "
                         "SCIFI_REFERENCE_DIR or the reward option reference_dir")
    return ReferenceMetrics(corpus)
