"""The reference corpus of classic science fiction that the novelty metrics compare stories to.

The paper measures novelty against SFGram; we use a directory of public-domain Gutenberg works
(one `.txt` file per work). Loading strips Gutenberg boilerplate, chunks each work into pieces of
at most 250 words that the encoder reads whole (`Embedder.chunk`, the chunker of the stories too;
never across works), counts unigrams over the whole corpus and embeds the chunks. Embedding the
whole corpus is the slow part, so results are cached on disk under a key that covers everything
they depend on: file names and bytes, the encoder (its name and what it is: package version or
files' hash), chunk size and sampling. Which
directory is read follows `eval.corpus.resolve` (`--reference-dir`, `$SCIFI_REFERENCE_DIR`, the
copy fetched by `review-lab corpus fetch`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from eval.corpus.manifest import read_manifest, work_files
from eval.corpus.resolve import locate_reference, report_unavailable
from eval.embed import DEFAULT_EMBEDDER, Embedder
from eval.text import strip_gutenberg, word_tokens
from generate.common.errors import UsageError
from generate.common.paths import cache_root

log = logging.getLogger(__name__)

# Bump when text preparation changes, so caches made by older code are not reused.
# 2: chunks cut by the encoder's tokenizer (they were cut by words and the encoder truncated them).
_CACHE_VERSION = 2
_EMBEDDINGS = "embeddings.npy"
_META = "meta.json"
_COUNTS = "counts.json"
_WARNED: set[str] = set()  # directories already said to differ from the manifest's corpus


class ReferenceUnavailable(Exception):
    """The reference corpus cannot be loaded (no directory given, missing, or without text)."""


@dataclass(frozen=True, eq=False)
class ReferenceCorpus:
    """Chunk embeddings and unigram counts of a reference corpus.

    Attributes:
        directory: Where the `.txt` works were read from.
        embedder_name: Name of the encoder that produced `embeddings`.
        chunk_size: Target chunk length in words.
        chunk_ids: "<file name>#<chunk index within the work>" for each embedded chunk.
        counts: Word counts over the whole corpus (all chunks, even when embeddings are sampled).
        embeddings: (len(chunk_ids), dim) float32, unit-norm rows; None when the encoder could
            not be loaded (`embedding_error` says why). The unigram counts need no encoder, so
            KL is still available then.
        content_sha256: hash of the works' names and bytes: two evaluations used the same corpus
            exactly when their hashes (and embedder, chunk size, sample) agree.
        sample: "all", or "<max_chunks>:<seed>" when a seeded sample of chunks was embedded.
        embedding_error: why `embeddings` is None.
        embedder_id: what the encoder is (`eval.embed.encoder_identity`), beyond its name.
        token_limit: most word-pieces per chunk (the encoder's input less its special tokens);
            None where chunks were cut by words alone (an encoder without a tokenizer of ours).
    """

    directory: Path
    embedder_name: str
    chunk_size: int
    chunk_ids: list[str]
    counts: dict[str, int]
    embeddings: np.ndarray | None
    content_sha256: str = ""
    sample: str = "all"
    embedding_error: str | None = None
    embedder_id: str = ""
    token_limit: int | None = None

    def fingerprint(self) -> dict:
        """What identifies the reference side of the metrics, for manifests and comparisons."""
        return {"content_sha256": self.content_sha256, "embedder": self.embedder_name, "embedder_id": self.embedder_id,
                "chunk_size": self.chunk_size, "token_limit": self.token_limit, "sample": self.sample,
                "n_chunks": len(self.chunk_ids)}

    @classmethod
    def load(
        cls,
        directory: str | Path,
        embedder: Embedder | None = None,
        *,
        chunk_size: int = 250,
        max_chunks: int | None = None,
        seed: int = 0,
        cache_dir: str | Path | None = None,
        batch_size: int = 32,
    ) -> ReferenceCorpus:
        """Load a corpus from a directory of `.txt` works, embedding it unless cached.

        Args:
            directory: Directory holding one `.txt` file per work.
            embedder: Encoder for the chunks; defaults to all-MiniLM-L6-v2.
            chunk_size: Target chunk length in words.
            max_chunks: Embed only a seeded random sample of this many chunks (quick runs).
            seed: Seed of that sample.
            cache_dir: Cache root; defaults to `$SCIFI_CACHE_DIR` or `~/.cache/scifi-review`.
            batch_size: Encoder batch size.

        Returns:
            The loaded corpus.

        Raises:
            ReferenceUnavailable: The directory is missing or holds no text.
            ValueError: max_chunks < 1.
        """
        if max_chunks is not None and max_chunks < 1:
            raise ValueError(f"max_chunks must be positive, got {max_chunks}")
        directory = Path(directory)
        embedder = embedder or Embedder(DEFAULT_EMBEDDER)
        works = read_works(directory)
        _say_if_not_the_manifests(directory, works)
        identity = {"content_sha256": _content_hash(works), "embedder_id": embedder.identity,
                    "sample": "all" if max_chunks is None else f"{max_chunks}:{seed}"}
        key = _cache_key(works, embedder.name, identity["embedder_id"], chunk_size, max_chunks, seed)
        entry = Path(cache_dir or cache_root()) / "reference" / key
        if (entry / _META).is_file():
            log.info("reference corpus: using cached embeddings %s", entry)
            return cls._from_cache(directory, entry, identity)
        bodies, counts = _bodies(works, directory)
        try:  # the chunks are cut by the encoder's tokenizer: it may fail to load here already
            chunk_ids, chunks = _sampled(bodies, embedder, chunk_size, max_chunks, seed)
            log.info("reference corpus: embedding %d chunks of %d works with %s", len(chunks), len(works),
                     embedder.name)
            embeddings = embedder.encode(chunks, batch_size=batch_size, show_progress=True)
            limit = embedder.token_limit
        except (ImportError, OSError) as exc:  # the encoder's packages are missing or broken
            error = f"encoder {embedder.name} unavailable ({type(exc).__name__}: {_first_line(exc)})"
            log.warning("reference corpus: %s; only the unigram counts (KL) are available", error)
            return cls(directory, embedder.name, chunk_size, [], counts, None, **identity, embedding_error=error)
        meta = {"embedder": embedder.name, "chunk_size": chunk_size, "token_limit": limit, "chunk_ids": chunk_ids}
        try:  # the embeddings are made (up to 40 min of work): a cache that refuses them must not lose them
            _write_cache(entry, embeddings, meta, counts)
        except OSError as exc:
            log.warning("reference corpus: cannot cache the embeddings under %s (%s); they are used now and "
                        "computed again next time", entry.parent, exc.strerror or exc)
        return cls(directory, embedder.name, chunk_size, chunk_ids, counts, embeddings, **identity, token_limit=limit)

    @classmethod
    def _from_cache(cls, directory: Path, entry: Path, identity: dict) -> ReferenceCorpus:
        meta = json.loads((entry / _META).read_text(encoding="utf-8"))
        counts = json.loads((entry / _COUNTS).read_text(encoding="utf-8"))
        embeddings = np.load(entry / _EMBEDDINGS)
        return cls(directory, meta["embedder"], meta["chunk_size"], meta["chunk_ids"], counts, embeddings,
                   **identity, token_limit=meta.get("token_limit"))

    def chunk_texts(self, embedder: Embedder) -> dict[str, str]:
        """The text of each embedded chunk by id, cut again as `load` cut it (the cache keeps ids
        and embeddings, not texts); `embedder` must be the one the corpus was loaded with."""
        wanted = {cid.rpartition("#")[0] for cid in self.chunk_ids}
        names = sorted(wanted)
        bodies = [strip_gutenberg((self.directory / n).read_bytes().decode("utf-8", errors="replace")) for n in names]
        texts = {f"{n}#{i}": piece for n, pieces in zip(names, embedder.chunk(bodies, self.chunk_size))
                 for i, piece in enumerate(pieces)}
        return {cid: texts[cid] for cid in self.chunk_ids if cid in texts}


def load_reference(
    directory: str | Path | None = None, embedder: Embedder | None = None, **options
) -> ReferenceCorpus | None:
    """Load the reference corpus if one is configured, else explain why not.

    Callers report the reference-based metrics as unavailable when this returns None, so that an
    evaluation without the corpus still produces the judge and surprisal results.

    Args:
        directory: Corpus directory; defaults to `$SCIFI_REFERENCE_DIR`, else the fetched copy
            (`eval.corpus.resolve`).
        embedder: Encoder for the chunks; defaults to all-MiniLM-L6-v2.
        **options: Keyword options of `ReferenceCorpus.load` (chunk_size, max_chunks, seed,
            cache_dir, batch_size).

    Returns:
        The corpus, or None after logging "reference metrics unavailable: <reason>" (the reason
        says how to get the corpus when none was found).
    """
    where = locate_reference(directory)
    try:
        if where.path is None:
            raise ReferenceUnavailable(where.missing)
        return ReferenceCorpus.load(where.path, embedder, **options)
    except ReferenceUnavailable as exc:
        report_unavailable(log, exc)
        return None


def _cache_key(works: dict[str, bytes], embedder_name: str, embedder_id: str, chunk_size: int,
               max_chunks: int | None, seed: int) -> str:
    digest = hashlib.sha256()
    sampling = f"sample={max_chunks}:{seed}" if max_chunks is not None else "all"
    digest.update(f"v{_CACHE_VERSION}|{embedder_name}|{embedder_id}|{chunk_size}|{sampling}".encode())
    for name, data in works.items():
        digest.update(f"|{name}|{len(data)}|".encode())
        digest.update(data)
    return digest.hexdigest()[:24]


def _say_if_not_the_manifests(directory: Path, works: dict[str, bytes]) -> None:
    """Warn, once per directory, when a directory that copies the committed corpus is not all of it
    (a copy cut short, an edited work): its numbers are not the manifest corpus's numbers."""
    try:
        why = read_manifest().differences(works)
    except UsageError:  # no committed manifest to compare with: nothing to say
        return
    if why and str(directory) not in _WARNED:
        _WARNED.add(str(directory))
        log.warning("reference corpus: %s %s; the metrics describe that directory, not the manifest's corpus "
                    "(`review-lab corpus fetch` gets all of it)", directory, why)


def _content_hash(works: dict[str, bytes]) -> str:
    digest = hashlib.sha256()
    for name, data in works.items():
        digest.update(f"{name}|{len(data)}|".encode())
        digest.update(data)
    return digest.hexdigest()


def read_works(directory: str | Path) -> dict[str, bytes]:
    """The works' bytes by file name, in name order (the order the hashes and chunks follow).

    The one check of a corpus directory: loading and `review-lab corpus path` both call it, so the
    path command never approves a directory the metrics then refuse.

    Raises:
        ReferenceUnavailable: Not a directory, no `.txt` work, or a work that cannot be read (a
            dangling link, no permission, a directory named `*.txt`): one line, not a traceback.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise ReferenceUnavailable(f"{directory} is not a directory")
    works = {}
    for path in work_files(directory):
        try:
            works[path.name] = path.read_bytes()
        except OSError as exc:
            raise ReferenceUnavailable(f"cannot read {path}: {exc.strerror or exc}") from None
    if not works:
        raise ReferenceUnavailable(f"no .txt files in {directory}")
    return works


def _bodies(works: dict[str, bytes], directory: Path) -> tuple[dict[str, str], dict[str, int]]:
    """Each work's text without Gutenberg boilerplate, and the word counts over all of them."""
    bodies = {name: strip_gutenberg(data.decode("utf-8", errors="replace")) for name, data in works.items()}
    if not any(body.split() for body in bodies.values()):
        raise ReferenceUnavailable(f"the .txt files in {directory} hold no words")
    counts: Counter[str] = Counter()
    for body in bodies.values():
        counts.update(word_tokens(body))
    return bodies, dict(counts)


def _sampled(bodies: dict[str, str], embedder: Embedder, chunk_size: int, max_chunks: int | None,
             seed: int) -> tuple[list[str], list[str]]:
    """The chunk ids and texts to embed: all, or a seeded sample kept in corpus order."""
    chunk_ids: list[str] = []
    chunks: list[str] = []
    for name, pieces in zip(bodies, embedder.chunk(list(bodies.values()), chunk_size)):
        chunk_ids.extend(f"{name}#{i}" for i in range(len(pieces)))
        chunks.extend(pieces)
    if max_chunks is not None and max_chunks < len(chunks):
        keep = np.sort(np.random.default_rng(seed).choice(len(chunks), size=max_chunks, replace=False))
        chunk_ids = [chunk_ids[i] for i in keep]
        chunks = [chunks[i] for i in keep]
    return chunk_ids, chunks


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [""])[0][:200]


def _write_cache(entry: Path, embeddings: np.ndarray, meta: dict, counts: dict[str, int]) -> None:
    """Write a cache entry atomically: a crash leaves either no entry or a complete one."""
    entry.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=entry.parent, prefix=".tmp-"))
    try:
        staging.chmod(0o755)  # mkdtemp makes it owner-only; the cache is meant to be shared
        np.save(staging / _EMBEDDINGS, embeddings)
        (staging / _COUNTS).write_text(json.dumps(counts, ensure_ascii=False), encoding="utf-8")
        (staging / _META).write_text(json.dumps(meta, ensure_ascii=False), encoding="utf-8")
    except BaseException:  # a full disk: no half-written entry left to fill it further
        shutil.rmtree(staging, ignore_errors=True)
        raise
    try:
        staging.rename(entry)
    except OSError:
        # Another process cached the same key first; its entry is identical.
        shutil.rmtree(staging, ignore_errors=True)
