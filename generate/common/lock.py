"""One process per output directory: two runs appending to the same files would interleave them.

The lock is an advisory `flock` on `<out>/.lock`, which holds the owner's pid, host and command.
The kernel drops the lock when its owner dies however it dies (SIGKILL included), so a lock left
by a dead process is stale by construction and simply taken over (and said so); a second live
process is refused with one line naming the holder. The file itself stays: removing it would let
two processes lock two different files of the same name.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from generate.common.errors import UsageError
from generate.common.files import output_error
from generate.common.secrets import redact_argv

log = logging.getLogger(__name__)

LOCK_NAME = ".lock"


class OutputLocked(UsageError):
    """Another live process holds the output directory."""


@contextmanager
def output_lock(out_dir: str | Path) -> Iterator[Path]:
    """Hold `<out_dir>/.lock` for the duration of the block (creating the directory).

    Raises:
        OutputLocked: another process holds it; the message names its pid, host and start.
        OutputError: the directory cannot be created or written.
    """
    out_dir = Path(out_dir)
    path = out_dir / LOCK_NAME
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise output_error(exc.filename or out_dir, exc) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise OutputLocked(f"{out_dir} is in use by another run ({_holder(fd)}); wait for it to finish or "
                               "use another --out") from None
        previous = _read(fd)
        if previous:  # written by a process that died holding the lock (a clean exit empties it)
            log.warning("%s: taking over the lock of a process that is gone (%s)", out_dir, _describe(previous))
        try:
            _write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                   "since": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                                   "command": " ".join(redact_argv(sys.argv))}))
        except OSError as exc:
            raise output_error(path, exc) from None
        try:
            yield path
        finally:
            try:
                _write(fd, "")
            except OSError:
                pass  # a full disk: the next holder reports a stale owner, which is harmless
    finally:
        os.close(fd)  # releases the flock


def _holder(fd: int) -> str:
    info = _read(fd)
    return _describe(info) if info else "pid unknown: it is starting"


def _describe(info: dict) -> str:
    return f"pid {info.get('pid')} on host {info.get('host')}, since {info.get('since')}"


def _read(fd: int) -> dict:
    os.lseek(fd, 0, os.SEEK_SET)
    raw = b""
    while chunk := os.read(fd, 65536):
        raw += chunk
    try:
        info = json.loads(raw) if raw.strip() else {}
    except ValueError:
        return {"pid": "?", "host": "?", "since": "?"}
    return info if isinstance(info, dict) else {}


def _write(fd: int, text: str) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, text.encode("utf-8"), 0)
    os.fsync(fd)
