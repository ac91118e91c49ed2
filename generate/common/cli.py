"""Shared CLI plumbing: bad input becomes one line on stderr and exit code 2, a job that finished
with failed items one line and exit code 1, never a traceback.

An output location that refuses writes (full disk, read-only, no permission) is bad input too:
one line, exit 2, and what was written before is intact (`generate.common.files`); so is a path
naming a directory where a file is written, or a file where a directory is made (`MISPLACED`).
The secrets the command was given never reach its streams: every log line, error line and
traceback is scrubbed of them (`generate.common.secrets`).
"""

from __future__ import annotations

import errno
import logging
import os
import sys
import traceback
from collections.abc import Callable, Sequence

from generate.common.errors import PartialFailure, UsageError
from generate.common.files import OUTPUT_ERRNOS, output_error
from generate.common.secrets import ScrubFilter, find_secrets, scrub

# A launcher (accelerate's) reports any failure of the script it ran as exit status 1. Where this
# variable names a file, `run_cli` writes the script's own status there (2: bad input), which
# `train.launch` returns.
EXIT_STATUS_FILE = "REVIEW_LAB_EXIT_STATUS_FILE"
# A path given where the other kind of thing is: `--out` naming a directory where a file is written,
# or a file where a directory is made (an input file that is a directory is the reader's error line).
MISPLACED = {errno.EISDIR: "is a directory where a file belongs: give a file's path",
             errno.EEXIST: "is in the way (a file where a directory belongs): give another path"}
NOISY = ("httpx", "httpx2", "openai", "urllib3", "filelock", "sentence_transformers", "accelerate")


def run_cli(main: Callable[[Sequence[str] | None], int | None], argv: Sequence[str] | None = None) -> None:
    """Run a CLI entry point with the project's error contract."""
    secrets = find_secrets(sys.argv[1:] if argv is None else argv, os.environ)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    for handler in logging.getLogger().handlers:
        handler.addFilter(ScrubFilter(secrets))
    for noisy in NOISY:
        logging.getLogger(noisy).setLevel(logging.WARNING)

    def fail(message: str, code: int) -> None:
        print(scrub(message, secrets), file=sys.stderr)
        if path := os.environ.get(EXIT_STATUS_FILE):
            with open(path, "w", encoding="utf-8") as status:
                status.write(str(code))
        sys.exit(code)

    try:
        rc = main(argv)
    except UsageError as exc:
        fail(f"error: {one_line(exc)}", 2)
    except PartialFailure as exc:
        fail(f"error: {one_line(exc)}", 1)
    except KeyboardInterrupt:
        fail("interrupted: finished work is saved; re-run the same command to resume", 130)
    except OSError as exc:
        if exc.errno in OUTPUT_ERRNOS:
            fail(f"error: {output_error(exc.filename or 'the output', exc)}", 2)
        if exc.errno in MISPLACED and exc.filename:
            fail(f"error: {exc.filename} {MISPLACED[exc.errno]}", 2)
        fail(traceback.format_exc().rstrip(), 1)
    except Exception:  # noqa: BLE001 - a bug: its traceback, without the secrets it may quote
        fail(traceback.format_exc().rstrip(), 1)
    sys.exit(rc or 0)


def one_line(exc: BaseException) -> str:
    """An error's message on one line: one that quotes another's (a library's message, a file's
    text) may hold line breaks."""
    return " ".join(part.strip() for part in str(exc).splitlines() if part.strip())
