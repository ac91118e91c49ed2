"""Fetch the classic science-fiction reference corpus, or say which copy the commands use.

`fetch` downloads every work of the manifest (each URL pinned to a GITenberg commit), normalises
it (source encoding -> UTF-8, CRLF -> LF, no BOM) and keeps it only when its SHA-256 matches the
manifest. A work that fails is reported on its own line and nothing of it is cached; the command
then ends with one `error:` line and exit 1, and a re-run fetches only what is still missing.
`path` prints the directory that eval, benchmark, curation, weak labels and the rewards would use:
`--reference-dir`, else `$SCIFI_REFERENCE_DIR`, else the fetched copy when it is complete.
"""

from __future__ import annotations

import logging
import sys
import urllib.parse
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from eval.corpus.fetch import FetchOptions, FetchReport, fetch_corpus
from eval.corpus.manifest import URL_SCHEMES, read_manifest
from eval.corpus.resolve import locate_reference
from eval.reference import ReferenceUnavailable, read_works
from generate.common.config import new_parser
from generate.common.errors import PartialFailure, UsageError
from generate.common.ranges import AT_LEAST_1, POSITIVE, ranged

log = logging.getLogger("corpus")
PROG = "review-lab corpus"


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    return COMMANDS[args.command](args)


def fetch(args) -> int:
    """Fetch and verify the manifest's works into the cache."""
    if args.mirror:
        _check_mirror(args.mirror)
    if args.timeout <= 0 or args.attempts < 1 or args.jobs < 1:
        raise UsageError("need --timeout > 0, --attempts >= 1 and --jobs >= 1")
    manifest = read_manifest(args.manifest)
    options = FetchOptions(mirror=args.mirror, timeout=args.timeout, attempts=args.attempts, jobs=args.jobs)
    report = fetch_corpus(manifest, options)
    _fail_unless_whole(report, len(manifest))
    log.info("reference corpus: %d works verified (%d fetched now, %d already cached)", len(manifest),
             len(report.fetched), len(report.kept))
    print(report.directory)
    return 0


def path(args) -> int:
    """Print the corpus directory a command would use and where that choice comes from."""
    if args.manifest:  # one given is read now: a missing one is an error, not "no corpus found"
        read_manifest(args.manifest)
    where = locate_reference(args.reference_dir, manifest=args.manifest)
    if where.path is None:
        print(f"none: {where.missing}")
        return 1
    try:  # the loader's own check: a directory it would refuse is not a corpus here either
        works = read_works(where.path)
    except ReferenceUnavailable as exc:
        print(f"{where.path} (from {where.source}): {exc}")
        return 1
    if why := read_manifest(args.manifest).differences(works):  # a copy of the corpus, but not all of it
        print(f"note: {where.path} {why}", file=sys.stderr)
    print(f"{where.path} (from {where.source})")
    return 0


COMMANDS = {"fetch": fetch, "path": path}


def _check_mirror(mirror: str) -> None:
    """Refuse a mirror that cannot serve any work: a `file://` directory that is not there would
    otherwise fail every work alike, one stderr line each."""
    if not mirror.startswith(URL_SCHEMES):
        raise UsageError(f"--mirror must be an http://, https:// or file:// URL, got {mirror!r}")
    if mirror.startswith("file://"):
        local = Path(urllib.request.url2pathname(urllib.parse.urlsplit(mirror).path))
        if not local.is_dir():
            raise UsageError(f"--mirror {mirror}: {local} is not a directory")


def _fail_unless_whole(report: FetchReport, total: int) -> None:
    cached = len(report.fetched) + len(report.kept)
    if report.unreachable:
        raise PartialFailure(f"cannot reach the corpus source: {report.unreachable}; {cached} of {total} works "
                             "cached. Retry when online, pass --mirror URL, or point --reference-dir or "
                             "SCIFI_REFERENCE_DIR at a local copy")
    if report.failed:
        for name, reason in sorted(report.failed.items()):
            print(f"{name}: {reason}", file=sys.stderr)
        raise PartialFailure(f"{len(report.failed)} of {total} works failed and are not cached ({cached} verified "
                             f"works kept in {report.directory}); the corpus is not used until every work "
                             "verifies: re-run to retry them")


def _parser():
    parser = new_parser(PROG, __doc__.splitlines()[0], example=f"{PROG} fetch")
    sub = parser.add_subparsers(dest="command", required=True, metavar="{fetch,path}")
    get = _subparser(sub, "fetch", "download, verify and cache the corpus (resumable)",
                     f"{PROG} fetch --mirror https://mirror.example.org/scifi-reference",
                     "Download, verify and cache the corpus under $SCIFI_CACHE_DIR (default ~/.cache/scifi-review)\n"
                     "/reference-corpus/; a re-run fetches only the works not yet verified.")
    get.add_argument("--mirror", help="fetch URL/<file name> (e.g. URL/pg35.txt) instead of the pinned URLs")
    get.add_argument("--timeout", type=ranged(float, POSITIVE), default=30.0,
                     help=f"seconds without data (connecting, each read) before one attempt gives up ({POSITIVE})")
    get.add_argument("--attempts", type=ranged(int, AT_LEAST_1), default=3,
                     help=f"attempts per work on transient failures ({AT_LEAST_1})")
    get.add_argument("--jobs", type=ranged(int, AT_LEAST_1), default=4,
                     help=f"works downloaded at the same time ({AT_LEAST_1})")
    show = _subparser(sub, "path", "print the corpus directory commands would use, and why",
                      f"{PROG} path --reference-dir ../shared/data/scifi-reference/texts",
                      "Print the corpus directory the commands would use and where it comes from:\n"
                      "--reference-dir, else $SCIFI_REFERENCE_DIR, else the fetched copy when every work\n"
                      "verifies. Exit 1 when there is none or it cannot be read.")
    show.add_argument("--reference-dir", help="a directory given to the command")
    for p in (get, show):
        p.add_argument("--manifest", type=Path, default=None,
                       help="corpus manifest (default: configs/reference/scifi-classics.tsv)")
    return parser


def _subparser(sub, name: str, help_text: str, example: str, description: str):
    return sub.add_parser(name, help=help_text, description=description, epilog=f"example:\n  {example}")
