"""The fetched corpus on disk: `<cache root>/reference-corpus/<manifest key>/texts/<file>`.

A work enters `texts/` only after its normal form matched the manifest's hash, and it enters by
an atomic rename from `.partial/`, so an interrupted or refused download leaves nothing behind
and the works already there are kept for the next run. The directory is complete only when every
work of its manifest is there and verifies: a corpus missing a work is never used as if whole
(the metrics would silently describe a different corpus).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from eval.corpus.manifest import Manifest, work_files
from generate.common.paths import cache_root

ROOT = "reference-corpus"
TEXTS = "texts"
PARTIAL = ".partial"

# (path, size, mtime_ns) -> sha256: each command checks the cache once per file, not once per use.
_DIGESTS: dict[tuple[str, int, int], str] = {}


@dataclass(frozen=True)
class CacheState:
    """What a manifest's cache directory holds.

    Attributes:
        directory: The `texts/` directory a command would read.
        verified: Names of the works present with the manifest's hash.
        total: Number of works in the manifest.
        stray: `.txt` files there that the manifest does not list.
    """

    directory: Path
    verified: frozenset[str]
    total: int
    stray: tuple[str, ...] = ()

    @property
    def complete(self) -> bool:
        return len(self.verified) == self.total and not self.stray


def texts_dir(manifest: Manifest, root: str | Path | None = None) -> Path:
    """Where `manifest`'s works are cached (under `$SCIFI_CACHE_DIR` unless `root` is given)."""
    return Path(root or cache_root()) / ROOT / manifest.key / TEXTS


def file_sha256(path: Path) -> str:
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _DIGESTS:
        _DIGESTS[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return _DIGESTS[key]


def inspect(manifest: Manifest, root: str | Path | None = None) -> CacheState:
    """Check every cached work against the manifest (reads nothing when the directory is absent)."""
    directory = texts_dir(manifest, root)
    present = {p.name for p in work_files(directory)} if directory.is_dir() else set()
    verified = frozenset(w.file for w in manifest.works
                         if w.file in present and file_sha256(directory / w.file) == w.sha256)
    stray = tuple(sorted(present - {w.file for w in manifest.works}))
    return CacheState(directory, verified, len(manifest), stray)


def store(directory: Path, name: str, data: bytes) -> Path:
    """Write one verified work atomically (temp file in `.partial/`, then rename)."""
    staging = directory.parent / PARTIAL
    staging.mkdir(parents=True, exist_ok=True)
    directory.mkdir(parents=True, exist_ok=True)
    handle, temp = tempfile.mkstemp(dir=staging, prefix=f"{name}.", suffix=".part")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        os.chmod(temp, 0o644)  # mkstemp makes it owner-only; the cache is meant to be shared
        target = directory / name
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return target


def discard(directory: Path, names: list[str] | tuple[str, ...]) -> None:
    """Remove works that must not be read as part of the corpus (failed hash, not in the manifest)."""
    for name in names:
        (directory / name).unlink(missing_ok=True)
