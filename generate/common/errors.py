"""The one exception type for bad input; every command line turns it into one line and exit 2."""

from __future__ import annotations


class UsageError(Exception):
    """Bad input from the user (unknown name, malformed file, unreachable server).

    Raised anywhere in library code; `generate.common.cli.run_cli` turns it into a one-line
    message and exit code 2.
    """


class PartialFailure(Exception):
    """A long job finished what it could but some of its items failed (e.g. prompts whose
    completions stayed blank); `run_cli` prints one `error:` line and exits with code 1, and a
    re-run of the same command retries only the failed items."""
