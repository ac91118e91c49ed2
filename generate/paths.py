"""Where the project keeps caches (converted models, corpus embeddings, downloaded datasets)."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
CONFIG_DIR = REPO_ROOT / "configs"


def cache_dir(*parts: str) -> Path:
    """`$SCIFI_CACHE_DIR` (default `~/.cache/scifi-review`) joined with `parts`, created."""
    root = Path(os.environ.get("SCIFI_CACHE_DIR") or Path.home() / ".cache" / "scifi-review")
    path = root.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path
