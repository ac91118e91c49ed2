"""Fetch the corpus into the cache: download, normalise, verify, store; resumable.

Each work is verified on its own: one that fails (download error, undecodable, hash mismatch)
leaves nothing in the cache and is reported, the others are kept, and a re-run fetches only what
is still missing. The first work is fetched alone: when its source cannot be reached at all (an
offline machine) the fetch stops there instead of waiting out every work's retries. The rest are
fetched a few at a time (the work is network-bound); when the network drops on the way, as many
works in a row as are fetched at once (at least two) failing to reach their source stop the fetch
the same way: the works not yet started are not tried, instead of each waiting out its timeouts
and retries (up to an hour for 150 works behind a silent drop).
"""

from __future__ import annotations

import logging
import threading
import urllib.parse
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tqdm import tqdm

from eval.corpus import cache
from eval.corpus.download import DownloadError, download
from eval.corpus.manifest import Manifest, Work
from eval.corpus.normalise import normalise, sha256

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FetchOptions:
    """How to reach the works.

    Attributes:
        mirror: Base URL serving `<mirror>/<file name>` instead of each work's pinned URL (an
            http(s) mirror or a `file://` directory), in the source encoding or already normal.
        timeout: Seconds without progress before one attempt gives up.
        attempts: Attempts per work (transient failures only).
        jobs: Works downloaded at the same time.
    """

    mirror: str | None = None
    timeout: float = 30.0
    attempts: int = 3
    jobs: int = 4


@dataclass
class FetchReport:
    """What a fetch did.

    Attributes:
        directory: The cache's `texts/` directory.
        fetched: Works downloaded and verified now.
        kept: Works already verified by an earlier run.
        failed: file -> why, for the works not in the cache.
        unreachable: Set when the source could not be reached and the fetch stopped early.
    """

    directory: Path
    fetched: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    unreachable: str | None = None


@dataclass(frozen=True)
class _Failure:
    reason: str
    unreachable: bool = False


def source_url(work: Work, mirror: str | None) -> str:
    return f"{mirror.rstrip('/')}/{urllib.parse.quote(work.file)}" if mirror else work.url


def verify(raw: bytes, work: Work) -> bytes:
    """The work's normal form, if `raw` (in its source encoding, or already normal: some mirrors
    hold the normalised copies) yields the manifest's hash.

    Raises:
        ValueError: Neither reading matches (the message says what was found).
    """
    readings = [work.source_encoding] + (["utf-8"] if work.source_encoding.lower() not in ("utf-8", "utf8") else [])
    found = []
    for encoding in readings:
        try:
            data = normalise(raw, encoding)
        except UnicodeDecodeError:
            found.append(f"not valid {encoding}")
            continue
        if sha256(data) == work.sha256:
            return data
        found.append(f"sha256 {sha256(data)[:12]}... as {encoding}")
    raise ValueError(f"hash mismatch: expected sha256 {work.sha256[:12]}..., got {'; '.join(found)}")


def fetch_work(work: Work, directory: Path, options: FetchOptions) -> _Failure | None:
    """Fetch, verify and store one work; why it failed, or None."""
    url = source_url(work, options.mirror)
    try:
        raw = download(url, timeout=options.timeout, attempts=options.attempts)
        cache.store(directory, work.file, verify(raw, work))
    except DownloadError as exc:
        return _Failure(f"{exc} ({url})", exc.unreachable)
    except ValueError as exc:
        return _Failure(f"{exc} ({url})")
    return None


class _Breaker:
    """Counts works in a row whose source could not be reached (any other outcome resets it); from
    `limit` on, `tripped` holds the last reason and works not yet started are not tried. Shared by
    the fetch threads, so the count follows the order in which works finish."""

    def __init__(self, limit: int) -> None:
        self.limit, self.in_a_row, self.tripped = limit, 0, None
        self._lock = threading.Lock()

    def fetch(self, work: Work, directory: Path, options: FetchOptions) -> _Failure | None:
        if self.tripped:
            return _Failure(f"not tried: {self.tripped}", unreachable=True)
        failure = fetch_work(work, directory, options)
        with self._lock:
            self.in_a_row = self.in_a_row + 1 if failure and failure.unreachable else 0
            if self.in_a_row >= self.limit and not self.tripped:
                self.tripped = failure.reason
        return failure


def fetch_corpus(manifest: Manifest, options: FetchOptions = FetchOptions(),
                 root: str | Path | None = None) -> FetchReport:
    """Bring the cache of `manifest` up to date; works already verified are not downloaded again."""
    state = cache.inspect(manifest, root)
    cache.discard(state.directory, [w.file for w in manifest.works if w.file not in state.verified] + list(state.stray))
    report = FetchReport(state.directory, kept=sorted(state.verified))
    todo = [w for w in manifest.works if w.file not in state.verified]
    log.info("reference corpus: %d of %d works cached, fetching %d from %s", len(report.kept), len(manifest),
             len(todo), options.mirror or "their pinned URLs")
    with tqdm(total=len(todo), unit="work", desc="corpus", disable=None) as bar:
        def record(work: Work, failure: _Failure | None) -> None:
            if failure:
                report.failed[work.file] = failure.reason
            else:
                report.fetched.append(work.file)
            bar.update()

        if todo:
            first = fetch_work(todo[0], state.directory, options)
            record(todo[0], first)
            if first and first.unreachable:
                report.unreachable = first.reason
                return report
        breaker = _Breaker(max(2, options.jobs))
        with ThreadPoolExecutor(max_workers=max(1, options.jobs)) as pool:
            results = pool.map(lambda w: breaker.fetch(w, state.directory, options), todo[1:])
            for work, failure in zip(todo[1:], results):
                record(work, failure)
        report.unreachable = breaker.tripped
    report.fetched.sort()
    return report
