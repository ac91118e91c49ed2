"""`review-lab view`: the run viewer, one self-contained HTML page (no network needed to open it).

    review-lab view RUN_DIR [RUN_DIR ...] [--eval EVAL_DIR] [--compare COMPARE_DIR] [--human CSV] --out view.html

A RUN_DIR is a generation output (stories.jsonl, failed.jsonl), optionally named as NAME=DIR, or a
directory of them (a benchmark's output). Scores come from each run's `eval/` unless --eval names
one evaluation that scored them all; --compare adds a `review-lab compare` output; --human the human
consensus of a rating study (`review-lab rate export`), beside the judge's score of each aspect.
"""

from __future__ import annotations

from collections.abc import Sequence

from eval.view import write_view
from generate.common.config import new_parser

EXAMPLE = "review-lab view runs/benchmark --out runs/benchmark/view.html"


def main(argv: Sequence[str] | None = None) -> int:
    parser = new_parser("review-lab view", __doc__.split("\n")[0], EXAMPLE)
    parser.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run directory, NAME=DIR, or a directory of runs")
    parser.add_argument("--eval", dest="eval_dir", help="evaluation directory that scored these runs (scores.jsonl)")
    parser.add_argument("--compare", dest="compare_dir", help="comparison directory (comparison.json)")
    parser.add_argument("--title", help="page title")
    parser.add_argument("--human", help="human consensus ratings (review-lab rate export's ratings.csv), "
                                        "shown beside the judge's scores")
    parser.add_argument("--out", required=True, help="the HTML file to write")
    args = parser.parse_args(argv)
    write_view(args.runs, args.out, args.eval_dir, args.compare_dir, args.title, args.human)
    return 0
