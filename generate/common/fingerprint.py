"""Content hashes of the files a result is made from (a model's weights, a principles file), so
provenance names what a model or signal *is*, not where it was: a model retrained into the same
directory gets another hash. The backends' `model_identity`, the judge, the encoder and the
flows' step keys (`train/steps.py`) use these functions."""

from __future__ import annotations

import hashlib
from importlib import metadata
from pathlib import Path

SKIPPED = {"step.json", "manifest.json"}  # records of when and how a step ran, not of what it made
_DIRECTORIES: dict[Path, tuple[tuple, str]] = {}  # directory -> (its files' sizes and times, content hash)


def content_hash(*paths: str | Path) -> str:
    """sha256 over the contents of files and (recursively, in name order) directories, with their
    relative names; inside a directory, step records, manifests and `checkpoint-*` folders below it
    are left out (only the part of a path below the hashed directory counts: a repository, output
    or model folder that is itself named checkpoint-... must not empty the hash), and a file given
    by itself is always hashed. A missing path hashes as missing."""
    h = hashlib.sha256()
    for path in map(Path, paths):
        folder = path.is_dir()
        for file in sorted(p for p in path.rglob("*") if p.is_file()) if folder else [path]:
            below = file.relative_to(path).parts if folder else ()
            if folder and (file.name in SKIPPED or any(part.startswith("checkpoint-") for part in below)):
                continue
            h.update(str(file.relative_to(path) if folder else file.name).encode() + b"\0")
            if not file.is_file():
                h.update(b"missing\0")
                continue
            with file.open("rb") as f:
                for block in iter(lambda: f.read(1 << 20), b""):
                    h.update(block)
    return h.hexdigest()


def directory_hash(path: str | Path) -> str:
    """`content_hash` of a model directory, computed once per process while no file in it changes
    size or time: a judge or encoder is identified by its weights on every call, and hashing
    hundreds of megabytes each time would cost more than the call."""
    path = Path(path)
    stamp = tuple((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(path.rglob("*")) if p.is_file())
    key = path.resolve()
    if key not in _DIRECTORIES or _DIRECTORIES[key][0] != stamp:
        _DIRECTORIES[key] = (stamp, content_hash(path))
    return _DIRECTORIES[key][1]


def package_version(distribution: str) -> str:
    """The installed version of a distribution whose files hold a model's weights, else "not installed"."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "not installed"
