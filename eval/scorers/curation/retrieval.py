"""The Retrieval agent: a vector index of trusted passages, queried by prompt, cached on disk.

Two sources of high-quality examples (paper 3.1.1): `--exemplars`, a JSONL of `{prompt, response}`
pairs a user trusts, and the classic reference corpus, whose ~250-word chunks are exactly the
evaluation's (`eval.reference.ReferenceCorpus`): their embeddings come from that corpus's own
cache, so the corpus is embedded once for evaluation, rewards and curation alike. Exemplar
embeddings are cached the same way, under a key covering the file's bytes and the encoder (its
name and identity, as the corpus cache), and written atomically. The query is the candidate's
writing task (one query per prompt, so every candidate of a prompt is judged against the same
examples, which keeps within-prompt pairs fair).
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from eval.embed import Embedder
from eval.reference import ReferenceCorpus, ReferenceUnavailable
from generate.common.errors import UsageError
from generate.common.jsonl import read_jsonl
from generate.common.paths import cache_root

log = logging.getLogger(__name__)

_CACHE_VERSION = 1


@dataclass(frozen=True)
class Example:
    id: str  # "exemplar:<line>" or "<work file>#<chunk>"
    source: str  # how the prompt names it: "trusted answer to: <task>" or the work's file name
    text: str


@dataclass(frozen=True, eq=False)
class RetrievalIndex:
    examples: list[Example]
    vectors: np.ndarray  # (n, dim), unit rows
    fingerprint: dict

    @classmethod
    def build(cls, embedder: Embedder, exemplars: str | Path | None = None, reference_dir: str | Path | None = None,
              *, max_chunks: int | None = None, seed: int = 0, chunk_size: int = 250,
              cache_dir: str | Path | None = None) -> RetrievalIndex:
        """The index over both sources (either may be absent, not both).

        Raises:
            UsageError: no source, an unreadable exemplar file or corpus.
        """
        parts: list[tuple[list[Example], np.ndarray]] = []
        fingerprint: dict = {"embedder": embedder.name, "embedder_id": embedder.identity}
        if exemplars:
            examples, vectors, digest = _exemplars(Path(exemplars), embedder, cache_dir)
            parts.append((examples, vectors))
            fingerprint["exemplars"] = {"sha256": digest, "n": len(examples)}
        if reference_dir:
            try:
                corpus = ReferenceCorpus.load(reference_dir, embedder, chunk_size=chunk_size, max_chunks=max_chunks,
                                              seed=seed, cache_dir=cache_dir)
            except ReferenceUnavailable as exc:
                raise UsageError(f"retrieval corpus: {exc}") from None
            if corpus.embeddings is None:
                raise UsageError(f"retrieval corpus: {corpus.embedding_error}")
            parts.append((_corpus_examples(corpus, embedder), corpus.embeddings))
            fingerprint["reference"] = corpus.fingerprint()
        if not parts:
            raise UsageError("retrieval needs --exemplars or --reference-dir (or SCIFI_REFERENCE_DIR); "
                             "pass --k 0 to curate without examples")
        examples = [e for group, _ in parts for e in group]
        return cls(examples, np.concatenate([v for _, v in parts]).astype(np.float32), fingerprint)

    def nearest(self, queries: list[str], embedder: Embedder, k: int) -> list[list[Example]]:
        """The k examples most cosine-similar to each query, best first (one encoder call)."""
        if k <= 0 or not queries:
            return [[] for _ in queries]
        sims = embedder.encode(queries) @ self.vectors.T
        order = np.argsort(-sims, axis=1, kind="stable")[:, :k]
        return [[self.examples[j] for j in row] for row in order]


def _exemplars(path: Path, embedder: Embedder, cache_dir: str | Path | None) -> tuple[list[Example], np.ndarray, str]:
    if not path.is_file():
        raise UsageError(f"exemplars file not found: {path}")
    data = path.read_bytes()
    examples = []
    for n, row in enumerate(read_jsonl(path), 1):
        text = row.get("response") if isinstance(row, dict) else None
        if not isinstance(text, str) or not text.strip():
            raise UsageError(f"{path}:{n}: an exemplar needs a non-empty 'response' (and optionally a 'prompt')")
        prompt = str(row.get("prompt") or "").strip()
        examples.append(Example(f"exemplar:{n}", f"a trusted answer to: {prompt}" if prompt else "a trusted answer",
                                text.strip()))
    if not examples:
        raise UsageError(f"{path}: holds no exemplars")
    digest = hashlib.sha256(data).hexdigest()
    # Keyed by what the encoder is (`Embedder.identity`: package versions or weights' hash), as the
    # corpus cache is: another model under the same name must not hand back these vectors.
    key = hashlib.sha256(f"v{_CACHE_VERSION}|{embedder.name}|{embedder.identity}|{digest}".encode()).hexdigest()[:24]
    entry = Path(cache_dir or cache_root()) / "retrieval" / key
    if (entry / "embeddings.npy").is_file():
        log.info("retrieval: using cached exemplar embeddings %s", entry)
        return examples, np.load(entry / "embeddings.npy"), digest
    # Embedded as task + passage: the query is a task, and the passage says what it answers.
    vectors = embedder.encode([f"{e.source}\n{e.text}" for e in examples], show_progress=len(examples) > 100)
    _save(entry, vectors, {"embedder": embedder.name, "ids": [e.id for e in examples]})
    return examples, vectors, digest


def _corpus_examples(corpus: ReferenceCorpus, embedder: Embedder) -> list[Example]:
    """The texts behind a corpus's embedded chunk ids, cut again by the corpus's own chunker
    (`ReferenceCorpus.chunk_texts`: its cache keeps embeddings and ids, not texts). Cut by words
    alone they would not be the passages the encoder embedded: it cuts by its own tokens."""
    texts = corpus.chunk_texts(embedder)
    missing = [cid for cid in corpus.chunk_ids if cid not in texts]
    if missing:
        raise UsageError(f"retrieval corpus: chunk {missing[0]} no longer matches {corpus.directory}")
    return [Example(cid, f"from {cid.rpartition('#')[0].removesuffix('.txt')}", texts[cid]) for cid in corpus.chunk_ids]


def _save(entry: Path, vectors: np.ndarray, meta: dict) -> None:
    """Write a cache entry atomically: a crash leaves no entry or a complete one."""
    entry.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=entry.parent, prefix=".tmp-"))
    np.save(staging / "embeddings.npy", np.asarray(vectors, dtype=np.float32))
    (staging / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
    try:
        staging.rename(entry)
    except OSError:  # another process cached the same key first
        shutil.rmtree(staging, ignore_errors=True)
