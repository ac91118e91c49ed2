"""Where the project keeps caches (converted models, corpus embeddings, downloaded datasets):
one root, `$SCIFI_CACHE_DIR` (default `~/.cache/scifi-review`), defined here only."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
CONFIG_DIR = REPO_ROOT / "configs"


def cache_root() -> Path:
    """The cache root, read from the environment at call time (tests point it elsewhere)."""
    return Path(os.environ.get("SCIFI_CACHE_DIR") or Path.home() / ".cache" / "scifi-review")


def cache_dir(*parts: str) -> Path:
    """`cache_root()` joined with `parts`, created."""
    path = cache_root().joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path
