"""The classic science-fiction reference corpus on a fresh machine: a committed manifest of
pinned source URLs and hashes (`configs/reference/scifi-classics.tsv`), a verified fetch into the
cache, and the one rule that says which corpus directory a command uses.

    review-lab corpus fetch              # download, normalise, verify, cache (resumable)
    review-lab corpus path               # the directory a command would use, and why

The command's `main` lives in `eval.corpus.cli`; it is re-exported here so that `review-lab`
can dispatch to `eval.corpus.main` without importing the fetch code for other commands.
"""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """`review-lab corpus {fetch,path}` (see `eval.corpus.cli`)."""
    from eval.corpus.cli import main as corpus_main

    return corpus_main(argv)
