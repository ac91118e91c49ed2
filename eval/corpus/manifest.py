"""The corpus manifest: one row per work, with where to fetch it and what it must hash to.

A tab-separated file with a header row; lines starting with `#` are comments. Columns:

    file             name of the work in the corpus directory (`pg35.txt`)
    title, author    for people (optional)
    source_repo      GITenberg repository (optional)
    commit           the commit the URL is pinned to (optional)
    source_path      the file's path in that repository (optional)
    source_encoding  encoding the source is served in (utf-8, latin-1, cp1252)
    url              the source pinned to that commit
    sha256           SHA-256 of the normal form (`eval.corpus.normalise`)
    bytes            size of the normal form (optional)

The committed manifest is `configs/reference/scifi-classics.tsv`; tests write small ones.
"""

from __future__ import annotations

import csv
import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from generate.common.errors import UsageError
from generate.common.paths import CONFIG_DIR

DEFAULT_MANIFEST = CONFIG_DIR / "reference" / "scifi-classics.tsv"
COLUMNS = ("file", "title", "author", "source_repo", "commit", "source_path", "source_encoding", "url", "sha256",
           "bytes")
REQUIRED = ("file", "source_encoding", "url", "sha256")
URL_SCHEMES = ("http://", "https://", "file://")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\.txt")


@dataclass(frozen=True)
class Work:
    """One work of the corpus and how to get it."""

    file: str
    source_encoding: str
    url: str
    sha256: str
    title: str = ""
    author: str = ""
    source_repo: str = ""
    commit: str = ""
    source_path: str = ""
    bytes: int | None = None


@dataclass(frozen=True)
class Manifest:
    """The works of one corpus, in file-name order.

    Attributes:
        path: Where the manifest was read from.
        works: The works.
    """

    path: Path
    works: tuple[Work, ...]

    @property
    def key(self) -> str:
        """Names the corpus in the cache: a digest of the (file, sha256) pairs, so two manifests
        of different works never share a directory while a moved URL keeps the fetched copy."""
        digest = hashlib.sha256("".join(f"{w.file}\t{w.sha256}\n" for w in self.works).encode())
        return digest.hexdigest()[:16]

    def __len__(self) -> int:
        return len(self.works)

    def differences(self, works: Mapping[str, bytes]) -> str | None:
        """How a directory's works (name -> bytes) differ from this corpus, when they share a work
        name with it (a copy of it, half made or edited), else None: such a copy is used as given,
        and must not pass for the manifest's corpus without a word."""
        expected = {w.file: w.sha256 for w in self.works}
        shared = works.keys() & expected.keys()
        missing, extra = len(expected) - len(shared), len(works.keys() - expected.keys())
        changed = sum(hashlib.sha256(works[name]).hexdigest() != expected[name] for name in shared)
        if not shared or not (missing or changed or extra):
            return None
        return (f"holds {len(shared) - changed} of the manifest's {len(expected)} works ({missing} missing, "
                f"{changed} with other bytes, {extra} not in it)")


def work_files(directory: str | Path) -> list[Path]:
    """The works of any corpus directory (fetched or given), in name order: its `*.txt` files, less
    hidden ones. A copy made on macOS carries a `._<name>.txt` resource fork beside each work: read as
    works they would add binary noise to the counts and chunks and change the corpus hash. Every
    reader of a corpus directory lists it here, so none counts a file another skips."""
    return sorted(p for p in Path(directory).glob("*.txt") if not p.name.startswith("."))


def read_manifest(path: str | Path | None = None) -> Manifest:
    """Read and validate a manifest (default: the committed one).

    Raises:
        UsageError: The file is missing or a row is malformed (bad name, hash, encoding or a
            duplicate file name).
    """
    path = Path(path) if path else DEFAULT_MANIFEST
    if not path.is_file():
        raise UsageError(f"corpus manifest not found: {path}")
    try:  # utf-8-sig: a manifest saved by an editor that writes a byte-order mark keeps its `file` column
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    lines = [line for line in text.splitlines() if line and not line.startswith("#")]
    reader = csv.DictReader(lines, delimiter="\t", quoting=csv.QUOTE_NONE)
    missing = [c for c in REQUIRED if c not in (reader.fieldnames or ())]
    if missing:
        raise UsageError(f"{path}: missing column(s) {', '.join(missing)} in the header row")
    rows = list(reader)
    if not rows:
        raise UsageError(f"{path}: lists no works")
    works = [_work(row, f"{path}: work {n}") for n, row in enumerate(rows, 1)]
    names = [w.file for w in works]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise UsageError(f"{path}: duplicate file name(s) {', '.join(duplicates)}")
    return Manifest(path, tuple(sorted(works, key=lambda w: w.file)))


def _work(row: dict[str, str | None], where: str) -> Work:
    values = {k: (v or "").strip() for k, v in row.items() if k in COLUMNS}
    if not _NAME.fullmatch(values["file"]):
        raise UsageError(f"{where}: file must be a plain name ending in .txt, got {values['file']!r}")
    if not _HEX64.fullmatch(values["sha256"]):
        raise UsageError(f"{where}: sha256 must be 64 lowercase hex digits")
    try:  # decoding, not only a codec lookup: `base64` or `rot13` are codecs but not text encodings
        b"a".decode(values["source_encoding"], "ignore")
    except LookupError:
        raise UsageError(f"{where}: unknown source_encoding {values['source_encoding']!r}") from None
    if not values["url"].startswith(URL_SCHEMES):
        raise UsageError(f"{where}: url must be an http://, https:// or file:// URL, got {values['url']!r}")
    size = values.pop("bytes", "")
    if size and not size.isdigit():
        raise UsageError(f"{where}: bytes must be a whole number, got {size!r}")
    return Work(**values, bytes=int(size) if size else None)
