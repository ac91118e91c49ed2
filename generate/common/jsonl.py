"""Append-only JSONL files: the storage format of every run (stories, scores, call journals)."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def append_jsonl(path: str | Path, records: list[dict[str, Any]] | dict[str, Any]) -> None:
    """Append records and fsync, so a crash right after loses nothing that was written."""
    if isinstance(records, dict):
        records = [records]
    if not records:
        return
    data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """Yield records; a torn last line (a crash mid-write) is skipped with a warning."""
    path = Path(path)
    if not path.exists():
        return
    with open(path, encoding="utf-8") as fh:
        lines = fh.readlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except json.JSONDecodeError:
            if i == len(lines) - 1:
                log.warning("%s: skipping a torn last line (interrupted write)", path)
            else:
                raise ValueError(f"{path}:{i + 1}: not valid JSON") from None


def repair_jsonl(path: str | Path) -> None:
    """Cut a torn last line so that the next append starts on a fresh line."""
    path = Path(path)
    if not path.exists():
        return
    raw = path.read_bytes()
    if raw and not raw.endswith(b"\n"):
        cut = raw.rfind(b"\n") + 1
        path.write_bytes(raw[:cut])
