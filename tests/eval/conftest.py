"""Shared fixtures for the evaluation tests: a tiny synthetic reference corpus, no network."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import private_cache
from tests.embedders import CountingEmbedder

HEADER = (
    "The Project Gutenberg EBook of {title}\n\n"
    "*** START OF THIS PROJECT GUTENBERG EBOOK {title} ***\n\nProduced by Volunteers\n\n"
)
FOOTER = (
    "\n\nEnd of the Project Gutenberg EBook of {title}\n\n"
    "*** END OF THIS PROJECT GUTENBERG EBOOK {title} ***\n\nlicence text\n"
)


def write_work(directory: Path, name: str, body: str) -> Path:
    """Write one Gutenberg-style work with header and footer boilerplate around `body`."""
    title = name.upper()
    path = directory / f"{name}.txt"
    path.write_text(HEADER.format(title=title) + body + FOOTER.format(title=title), encoding="utf-8")
    return path


@pytest.fixture
def tiny_corpus(tmp_path: Path) -> Path:
    """Three works of 600, 300 and 90 words: 2 + 1 + 1 = 4 chunks of ~250 words."""
    directory = tmp_path / "corpus"
    directory.mkdir()
    write_work(directory, "rockets", " ".join(f"rocket{i % 7} flew past the moon" for i in range(120)))
    write_work(directory, "robots", " ".join(f"the robot{i % 5} dreamed" for i in range(100)))
    write_work(directory, "oceans", " ".join(f"waves on mars{i % 3}" for i in range(30)))
    return directory


@pytest.fixture
def counting_embedder() -> CountingEmbedder:
    return CountingEmbedder()


@pytest.fixture
def isolated_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reference caches go to a temp dir; the converted default model stays shared (no reconversion)."""
    monkeypatch.setenv("SCIFI_CACHE_DIR", str(private_cache(tmp_path / "cache")))
    monkeypatch.delenv("SCIFI_REFERENCE_DIR", raising=False)
