"""Which reference corpus a command uses: the one rule every command shares.

In order: the directory given on the command line (`--reference-dir`, or a reward's
`reference_dir` option), else `$SCIFI_REFERENCE_DIR`, else the corpus fetched into the cache by
`review-lab corpus fetch` when every work of the manifest is there and verifies. An explicit
directory is used as given, even when it is missing (the caller reports that): a typo must not
quietly fall through to another corpus. The fetched copy has the curated copy's bytes, so both
give the same corpus hash and share one embedding cache.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eval.corpus import cache
from eval.corpus.manifest import DEFAULT_MANIFEST, read_manifest

log = logging.getLogger(__name__)

ENV = "SCIFI_REFERENCE_DIR"
GET_IT = ("run `review-lab corpus fetch` to download it, or point --reference-dir or SCIFI_REFERENCE_DIR "
          "at a local copy")
EXPLICIT, FROM_ENV, FETCHED, NONE = "--reference-dir", ENV, "fetched cache", "none"


def reference_dir_option() -> Any:
    """The `reference_dir` field of every command that measures against the corpus: one help text
    that states the resolution order, so no command documents a rule it does not follow."""
    return field(default=None, metadata={"help": "classic SF .txt works (else $SCIFI_REFERENCE_DIR, else the "
                                                 "copy `review-lab corpus fetch` downloaded)"})

# The reasons already said inside `one_notice()` (None outside it). A plain global, not a context
# variable: an evaluation may load the corpus on a worker thread.
_reported: list[set[str]] = []


@dataclass(frozen=True)
class ReferenceLocation:
    """Where the corpus comes from.

    Attributes:
        path: The directory of `.txt` works, or None.
        source: `--reference-dir`, `SCIFI_REFERENCE_DIR`, `fetched cache` or `none`.
        missing: Without a path: why, and how to get the corpus (one line).
    """

    path: Path | None
    source: str
    missing: str = ""


def locate_reference(explicit: str | Path | None = None, *, manifest: str | Path | None = None,
                     root: str | Path | None = None) -> ReferenceLocation:
    """Apply the order above (an empty string counts as not given).

    Args:
        explicit: The directory the command was given.
        manifest: The manifest whose fetched copy may be used (default: the committed one).
        root: Cache root (default `$SCIFI_CACHE_DIR`).
    """
    if explicit:
        return ReferenceLocation(Path(explicit), EXPLICIT)
    if os.environ.get(ENV):
        return ReferenceLocation(Path(os.environ[ENV]), FROM_ENV)
    path = Path(manifest) if manifest else DEFAULT_MANIFEST
    if not path.is_file():
        return ReferenceLocation(None, NONE, f"no corpus found; {GET_IT}")
    state = cache.inspect(read_manifest(path), root)
    if state.complete:
        log.debug("reference corpus: the fetched copy in %s", state.directory)
        return ReferenceLocation(state.directory, FETCHED)
    if state.verified or state.stray:
        return ReferenceLocation(None, NONE, f"the fetched copy in {state.directory} is incomplete "
                                             f"({len(state.verified)} of {state.total} works verified); {GET_IT}")
    return ReferenceLocation(None, NONE, f"no corpus found; {GET_IT}")


def reference_dir(explicit: str | Path | None = None) -> str | None:
    """The directory to use, or None (callers that need the corpus say `GET_IT`)."""
    path = locate_reference(explicit).path
    return str(path) if path else None


def report_unavailable(logger: logging.Logger, reason: object) -> None:
    """Log "reference metrics unavailable: <reason>": each time, or once per reason inside
    `one_notice()` (a benchmark evaluates several runs and should say it once)."""
    text = str(reason)
    if _reported:
        if text in _reported[-1]:
            return
        _reported[-1].add(text)
    logger.warning("reference metrics unavailable: %s", text)


@contextlib.contextmanager
def one_notice() -> Iterator[None]:
    """Within this block (or a function it decorates), `report_unavailable` says each reason once."""
    _reported.append(set())
    try:
        yield
    finally:
        _reported.pop()
