"""Shared CLI plumbing: bad input becomes one line on stderr and exit code 2, a job that finished
with failed items one line and exit code 1, never a traceback."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Sequence

from generate.common.errors import PartialFailure, UsageError


def run_cli(main: Callable[[Sequence[str] | None], int | None], argv: Sequence[str] | None = None) -> None:
    """Run a CLI entry point with the project's error contract."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s", datefmt="%H:%M:%S")
    for noisy in ("httpx", "openai", "urllib3", "filelock", "sentence_transformers", "accelerate"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        rc = main(argv)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    except PartialFailure as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(1)
    except KeyboardInterrupt:
        print("interrupted: finished work is saved; re-run the same command to resume", file=sys.stderr)
        sys.exit(130)
    sys.exit(rc or 0)
