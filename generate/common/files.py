"""Writing run outputs so that a full disk, an unwritable directory or a kill never leaves a
half-written record behind.

An append either lands whole or not at all: a write that fails part-way (ENOSPC, EDQUOT, EFBIG,
EIO) is cut back to where the file ended before, and the failure becomes an `OutputError`, one
`error:` line and exit code 2 from any command line, with everything written before intact and
resumable. Whole files (manifests, rewritten stories) are written to a temporary sibling and
renamed into place, so a reader sees the old file or the new one, never a torn one.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from generate.common.errors import UsageError

# The errors of a place that cannot take our writes (rather than of our own code).
OUTPUT_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO,
                 errno.ENOTDIR}


class OutputError(UsageError):
    """The output location refused a write (full disk, read-only, no permission)."""


def output_error(path: str | Path, exc: OSError) -> OutputError:
    """The one-line message for a write that failed; what was written before is intact."""
    why = exc.strerror or str(exc)
    hint = " (disk full?)" if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG) else ""
    return OutputError(f"cannot write {path}: {why}{hint}; everything written before is intact: "
                       "fix the output location and re-run the same command to resume")


def make_dir(path: str | Path) -> Path:
    """Create the output directory `path` (and its parents), or raise `OutputError`: a location
    that takes no directory (read-only, no permission, a pseudo-filesystem such as /proc, where
    mkdir says ENOENT) is bad input. A file in the way raises as it is (`FileExistsError`), for
    the CLI to name the misplaced path."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise
    except OSError as exc:
        raise output_error(exc.filename or path, exc) from None
    return path


def append_bytes(path: str | Path, data: bytes) -> None:
    """Append `data` in full and fsync it, or leave the file as it was and raise `OutputError`."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as exc:
        raise output_error(path, exc) from None
    try:
        start = os.fstat(fd).st_size
        try:
            _write_all(fd, data)
            os.fsync(fd)
        except OSError as exc:
            try:  # cut back to the last whole record, so no torn line is left for the next run
                os.ftruncate(fd, start)
            except OSError:
                pass  # the next run's repair cuts the torn tail instead
            raise output_error(path, exc) from None
    finally:
        os.close(fd)


def write_text_atomic(path: str | Path, text: str) -> None:
    """`write_atomic` for UTF-8 text."""
    write_atomic(path, text.encode("utf-8"))


def write_atomic(path: str | Path, data: bytes) -> None:
    """Replace `path` with `data` through a temporary sibling and a rename."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise output_error(path, exc) from None


def _write_all(fd: int, data: bytes) -> None:
    """Every byte of `data` (os.write may take fewer). Tests replace this function to simulate a
    disk that fills part-way through a write."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
