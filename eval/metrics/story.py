"""From story texts to rule-based metric values: the one path that evaluation and rewards share.

`review-lab eval` and the GRPO rewards (`rewards/`) both call `StoryMetrics`, so a story gets the
same `kl`, `novelty_cos` and `volume_gain` wherever it is scored: the same sanitising, the same
chunking (the reference corpus's own chunk size), the same encoder call, the same reference
objects. Every value that cannot be computed is None *with a reason* (`Measured.missing`), so a
degenerate story (empty, "* * *", emoji only) or a missing encoder never stops a run and never
turns into a silent 0 or a silent gap.

Expensive parts are done once: the reference side is factored when `StoryMetrics` is built, and
`encode` embeds the chunks of a whole batch of stories in one encoder call (callers may cache its
result: the rewards keep one per training step).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from eval.corpus.resolve import locate_reference, report_unavailable
from eval.embed import Embedder
from eval.metrics.homogenization import draft_to_final_similarity, mean_pairwise_similarity
from eval.metrics.kl import UnigramReference, unigram_kl
from eval.metrics.novelty_cos import CosineNovelty
from eval.metrics.volume_gain import DEFAULT_EPS, VolumeGain, too_few_chunks
from eval.reference import ReferenceCorpus, ReferenceUnavailable
from eval.text import sanitize, word_tokens

log = logging.getLogger(__name__)

REFERENCE_METRICS = ("kl", "novelty_cos", "volume_gain")
DEFAULT_CHUNK_SIZE = 250
# The definition of the rule-based metrics, in every fingerprint: numbers made under another
# version are not the same measurement, so a resumed evaluation and `compare` refuse to mix them.
# Bump on any change to what a metric computes from a story. 1: every evaluation before the field
# existed. 2: chunks cut by the encoder's tokenizer, not truncated by it (novelty_cos, volume_gain,
# homogenization, draft_to_final_similarity); volume_gain missing for a reference of <= d chunks.
METRICS_VERSION = 2

# Reasons a value is missing, shared by every caller so that summaries can count them.
EMPTY = "empty story"
NO_WORDS = "no words (only symbols, punctuation or emoji)"


@dataclass
class Measured:
    """One story's metric values; `missing[name]` says why `values[name]` is None."""

    values: dict[str, float | None] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)

    def set(self, name: str, value: float | None, reason: str | None = None) -> None:
        if value is not None and not np.isfinite(value):
            value, reason = None, f"not a finite number ({value})"
        self.values[name] = value
        if value is None:
            self.missing[name] = reason or "not computed"
        else:
            self.missing.pop(name, None)


@dataclass
class Chunks:
    """A story's chunk embeddings, (k, d) unit-norm rows, or why there are none."""

    vectors: np.ndarray | None
    reason: str | None = None

    @property
    def story_vector(self) -> np.ndarray | None:
        """One unit vector per story: the normalised mean of its chunk embeddings."""
        if self.vectors is None or not len(self.vectors):
            return None
        mean = self.vectors.mean(axis=0)
        norm = float(np.linalg.norm(mean))
        return mean / norm if norm > 0 else None


def encode_chunks(encoder: Embedder | None, texts: Sequence[str], chunk_size: int = DEFAULT_CHUNK_SIZE,
                  unavailable: str | None = None) -> list[Chunks]:
    """Embed every story's chunks (at most chunk_size words, each read whole by the encoder:
    `Embedder.chunk`, the reference corpus's chunker too) with one encoder call.

    An encoder that cannot be loaded makes every story's embeddings missing with that reason; an
    encoder that fails on the batch (e.g. out of memory on one huge story) is retried story by
    story, so only the stories it fails on are missing.
    """
    texts = [sanitize(t)[0] for t in texts]
    todo = [i for i, t in enumerate(texts) if t.strip()]
    out = [Chunks(None, None if t.strip() else EMPTY) for t in texts]
    if not todo:
        return out
    if encoder is None:
        return _without(out, todo, unavailable or "no encoder")
    try:
        pieces = dict(zip(todo, encoder.chunk([texts[i] for i in todo], chunk_size)))
        vectors = encoder.encode([c for i in todo for c in pieces[i]])
    except (ImportError, OSError) as exc:  # the encoder cannot be loaded at all
        reason = f"encoder {encoder.name} unavailable ({type(exc).__name__}: {_line(exc)})"
        log.warning("embedding metrics unavailable: %s", reason)
        return _without(out, todo, reason)
    except Exception as exc:  # noqa: BLE001 - one bad story must not stop a run: retry one by one
        log.warning("encoder failed on a batch of %d stories (%s); retrying them one by one", len(todo), exc)
        for i in todo:
            try:
                out[i] = Chunks(encoder.encode(encoder.chunk([texts[i]], chunk_size)[0]))
            except Exception as one:  # noqa: BLE001
                out[i] = Chunks(None, f"encoder failed ({type(one).__name__}: {_line(one)})")
        return out
    at = 0
    for i in todo:
        out[i] = Chunks(vectors[at:at + len(pieces[i])])
        at += len(pieces[i])
    return out


def _without(out: list[Chunks], todo: list[int], reason: str) -> list[Chunks]:
    for i in todo:
        out[i] = Chunks(None, reason)
    return out


class StoryMetrics:
    """The reference side of `kl`, `novelty_cos` and `volume_gain`, factored once.

    Args:
        reference: the reference corpus, or None (then `unavailable` says why).
        encoder: the sentence encoder of the semantic metrics (the corpus's own).
        kl_alpha: additive smoothing of the reference unigram distribution.
        unavailable: why there is no reference corpus.
    """

    def __init__(self, reference: ReferenceCorpus | None, encoder: Embedder | None, *, kl_alpha: float = 1.0,
                 unavailable: str | None = None):
        self.reference = reference
        self.encoder = encoder
        self.kl_alpha = kl_alpha
        self.chunk_size = reference.chunk_size if reference is not None else DEFAULT_CHUNK_SIZE
        self._no_reference = f"no reference corpus ({unavailable or 'not given'})"
        self._unigram = UnigramReference(reference.counts) if reference is not None else None
        embeddings = reference.embeddings if reference is not None else None
        self._cosine = CosineNovelty(embeddings) if embeddings is not None else None
        self._no_embeddings = (reference.embedding_error if reference is not None and embeddings is None
                               else self._no_reference)
        self._no_volume = too_few_chunks(*embeddings.shape) if embeddings is not None else None
        if self._no_volume:
            log.warning("volume_gain unavailable: %s", self._no_volume)
        self._volume = VolumeGain(embeddings) if embeddings is not None and not self._no_volume else None

    @classmethod
    def load(cls, directory: str | Path | None, encoder: Embedder, *, kl_alpha: float = 1.0,
             max_chunks: int | None = None, seed: int = 0) -> StoryMetrics:
        """Load the corpus in `directory` (else `$SCIFI_REFERENCE_DIR`, else the fetched copy); without
        one, every reference metric is missing with the reason and everything else still runs."""
        where = locate_reference(directory)
        try:
            if where.path is None:
                raise ReferenceUnavailable(where.missing)
            corpus = ReferenceCorpus.load(where.path, encoder, max_chunks=max_chunks, seed=seed)
        except ReferenceUnavailable as exc:
            report_unavailable(log, exc)
            return cls(None, encoder, kl_alpha=kl_alpha, unavailable=str(exc))
        return cls(corpus, encoder, kl_alpha=kl_alpha)

    def fingerprint(self) -> dict | None:
        """What identifies these metrics' reference side (None without a corpus), with the version
        of the metrics' definition and their constants."""
        if self.reference is None:
            return None
        return {**self.reference.fingerprint(), "kl_alpha": self.kl_alpha, "volume_eps": DEFAULT_EPS,
                "metrics_version": METRICS_VERSION}

    def encode(self, texts: Sequence[str]) -> list[Chunks]:
        """Chunk embeddings of each text, cut as the corpus's chunks (size and encoder), one encoder call."""
        return encode_chunks(self.encoder, texts, self.chunk_size)

    def measure(self, texts: Sequence[str], chunks: Sequence[Chunks] | None = None,
                metrics: Sequence[str] = REFERENCE_METRICS) -> list[Measured]:
        """`kl`, `novelty_cos` and `volume_gain` of each text, None with a reason where undefined.

        Args:
            texts: the stories.
            chunks: their `encode` result, when the caller already has it (shared per step).
            metrics: the subset to compute (`kl` alone needs no encoder call).
        """
        texts = [sanitize(t)[0] for t in texts]
        out = [Measured() for _ in texts]
        if "kl" in metrics:
            for text, m in zip(texts, out):
                m.set("kl", *self._kl(text))
        if not {"novelty_cos", "volume_gain"} & set(metrics):
            return out
        if chunks is None and self._cosine is not None:
            chunks = self.encode(texts)
        if self._cosine is None:
            for text, m in zip(texts, out):
                m.set("novelty_cos", None, self._no_embeddings if text.strip() else EMPTY)
                m.set("volume_gain", None, m.missing["novelty_cos"])
            return out
        have = [i for i, c in enumerate(chunks) if c.vectors is not None and len(c.vectors)]
        gains = self._volume.batch([chunks[i].vectors for i in have]) if have and self._volume else [None] * len(have)
        for i, gain in zip(have, gains):
            out[i].set("novelty_cos", self._cosine(chunks[i].vectors))
            out[i].set("volume_gain", None if gain is None else float(gain), self._no_volume)
        for i, c in enumerate(chunks):
            if c.vectors is None or not len(c.vectors):
                out[i].set("novelty_cos", None, c.reason or EMPTY)
                out[i].set("volume_gain", None, c.reason or EMPTY)
        return out

    def _kl(self, text: str) -> tuple[float | None, str | None]:
        if not text.strip():
            return None, EMPTY
        if self._unigram is None:
            return None, self._no_reference
        if not word_tokens(text):
            return None, NO_WORDS
        return unigram_kl(text, self._unigram, alpha=self.kl_alpha), None


def group_similarity(vectors: Sequence[np.ndarray | None]) -> tuple[float | None, str | None]:
    """Homogenization of one prompt group: mean pairwise cosine of its stories' vectors."""
    present = [v for v in vectors if v is not None]
    if len(present) < 2:
        reason = "one story per prompt" if len(vectors) < 2 else "fewer than 2 stories with embeddings"
        return None, reason
    return mean_pairwise_similarity(np.stack(present)), None


def draft_similarity(draft: Chunks | None, final: Chunks) -> tuple[float | None, str | None]:
    """Cosine between an agent's first draft and its final story."""
    if draft is None:
        return None, "no drafts (one writing round)"
    a, b = draft.story_vector, final.story_vector
    if a is None or b is None:
        return None, (draft.reason if a is None else final.reason) or EMPTY
    return float(draft_to_final_similarity(a[None], b[None])[0]), None


def _line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [""])[0][:200]
