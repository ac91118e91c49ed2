"""Append-only JSONL files: the storage format of every run (stories, scores, call journals).

A record is a line that ends in a newline. Each append writes its records in one write and
fsyncs, so a kill leaves at most one unterminated last line (a torn write); a full disk leaves
none (`files.append_bytes` cuts a failed write back). Readers and writers agree on what a torn
last line is worth: nothing. `read_jsonl` ignores it with a warning, `repair_jsonl` cuts it
(writers call it before reading a file they will append to), and `append_jsonl` cuts it before
writing, so a record can never be glued onto a fragment. A line in the middle of a file that is
not JSON is not a torn write but a damaged file, and reading it is an error.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from generate.common.errors import UsageError
from generate.common.files import append_bytes, output_error, write_atomic

log = logging.getLogger(__name__)


def append_jsonl(path: str | Path, records: list[dict[str, Any]] | dict[str, Any]) -> None:
    """Append records in one write and fsync, so a crash right after loses nothing written.

    Raises:
        OutputError: the disk is full or the file unwritable; the file is left as it was.
    """
    if isinstance(records, dict):
        records = [records]
    if not records:
        return
    repair_jsonl(path)
    append_bytes(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8"))


def rewrite_jsonl(path: str | Path, records: list[dict[str, Any]]) -> None:
    """Replace the file's records at once (a reader sees the old file or the new, never half)."""
    write_atomic(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode("utf-8"))


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """Yield the records of a file (none if it does not exist).

    An unterminated last line is a write that was interrupted (or is still in progress): it holds
    no record and is skipped with a warning, exactly what `repair_jsonl` would cut.

    Raises:
        UsageError: a complete line that is not JSON, or JSON but not an object (the file is
            damaged, or not a file of records), naming the line. A directory is no file of records.
    """
    path = Path(path)
    if not path.exists():
        return
    if path.is_dir():
        raise UsageError(f"{path} is a directory, not a JSONL file")
    with open(path, "rb") as fh:  # bytes: a torn line may end inside a multi-byte character
        for number, line in enumerate(fh, start=1):
            if not line.endswith(b"\n"):
                log.warning("%s: ignoring an unfinished last line (%d bytes: an interrupted write); the next "
                            "run that writes this file cuts it", path, len(line))
                return
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except UnicodeDecodeError as exc:
                raise UsageError(f"{path}:{number}: not UTF-8 text ({exc.reason} at byte {exc.start} of the "
                                 "line)") from None
            except json.JSONDecodeError:
                raise UsageError(f"{path}:{number}: not valid JSON in the middle of the file (damaged, not "
                                 "an interrupted write); repair or remove that line") from None
            if not isinstance(record, dict):
                raise UsageError(f"{path}:{number}: expected a JSON object (a record), got {type(record).__name__}")
            yield record


def repair_jsonl(path: str | Path) -> None:
    """Cut an unterminated last line (a torn write), so that the next append starts a fresh line.

    Truncation is one system call: a kill during the repair leaves the file repaired or as it was.
    """
    path = Path(path)
    if not path.exists():
        return
    with open(path, "rb") as fh:
        size = fh.seek(0, os.SEEK_END)
        if size == 0:
            return
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return
        cut = _last_newline(fh, size) + 1
    log.warning("%s: cutting a torn last line (%d bytes of an interrupted write); its work is redone", path,
                size - cut)
    try:
        os.truncate(path, cut)
    except OSError as exc:
        raise output_error(path, exc) from None


def _last_newline(fh, size: int) -> int:
    """Offset of the last b"\\n" before `size`, or -1; reads backwards in blocks."""
    end = size
    while end > 0:
        start = max(0, end - 65536)
        fh.seek(start)
        block = fh.read(end - start)
        i = block.rfind(b"\n")
        if i >= 0:
            return start + i
        end = start
    return -1


def parse_object(line: str, where: str) -> dict[str, Any]:
    """One line of a user's JSONL input as a JSON object, or a one-line `UsageError` naming `where`
    (file:line) when it is not valid JSON or not an object."""
    try:
        row = json.loads(line)
    except json.JSONDecodeError:
        raise UsageError(f"{where}: not valid JSON") from None
    if not isinstance(row, dict):
        raise UsageError(f"{where}: expected a JSON object")
    return row
