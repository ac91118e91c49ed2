"""`review-lab rate {serve,export}`: a blind human rating study of evaluated runs.

    review-lab rate serve RUN [RUN ...] --db ratings.sqlite [--port 8000] [--host 127.0.0.1]
                          [--raters N | --rater NAME ...] [--mode likert|verdict]
    review-lab rate export --db ratings.sqlite --out DIR

`serve` creates the study in a new database (or resumes the one there), prints each rater's
link and serves until interrupted; `export` writes the consensus CSV for `review-lab align`, the
labelled JSONL, the agreement report and Table 4.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from pathlib import Path

from generate.common.config import new_parser
from generate.common.errors import UsageError
from eval.rating.study import MODES
from generate.common.ranges import AT_LEAST_1, PORT, Range, ranged

LIKERT = Range(0, 5)  # the rubric's scale
SERVE_EXAMPLE = "review-lab rate serve runs/benchmark --db ratings.sqlite --port 8000 --raters 3"
EXPORT_EXAMPLE = "review-lab rate export --db ratings.sqlite --out runs/human"


def _serve(args) -> int:
    from eval.rating.server import RatingServer
    from eval.rating.study import add_raters, open_study

    conn, meta = open_study(args.db, args.runs, args.mode, args.seed, args.eval_dir, args.sample)
    try:
        names = [f"rater-{i}" for i in range(1, (args.raters or 0) + 1)] + list(args.rater or [])
        known = conn.execute("SELECT COUNT(*) FROM raters").fetchone()[0]
        raters = add_raters(conn, meta, names or ([] if known else ["rater-1"]))
    finally:
        conn.close()
    try:
        server = RatingServer((args.host, args.port), args.db, meta)
    except OSError as exc:  # the port is taken, the address is not this machine's
        raise UsageError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
    host, port = server.server_address[:2]
    # Bound to every interface, the links must name an address other machines reach: this host's name
    # (127.0.0.1 would send a remote rater to their own machine).
    everywhere = host in ("0.0.0.0", "::", "")  # noqa: S104 - only what is printed
    shown = socket.gethostname() if everywhere else host
    print(f"{meta['mode']} study of {meta['n_stories']} stories in {args.db}; {len(raters)} rater(s):", flush=True)
    if everywhere:
        print(f"  (listening on every interface: where raters cannot resolve {shown!r}, use this machine's address)",
              flush=True)
    for r in raters:
        print(f"  {r.name}: http://{shown}:{port}/r/{r.token}", flush=True)
    print("serving; Ctrl-C stops (every saved rating is already in the database)", flush=True)
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return 0


def _export(args) -> int:
    from eval.rating.export import export

    report = export(args.db, args.out, args.good_at)
    print((Path(args.out) / "table4.md").read_text(encoding="utf-8"), end="")
    print(f"wrote {args.out}/: agreement.json, table4.md, labelled.jsonl, history.csv, manifest.json"
          + (", ratings.csv (review-lab align --ratings)" if report["mode"] == "likert" else ""))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = new_parser("review-lab rate", __doc__.split("\n")[0], SERVE_EXAMPLE + "\n" + EXPORT_EXAMPLE)
    sub = parser.add_subparsers(dest="command", required=True, metavar="{serve,export}")
    serve = sub.add_parser("serve", help="serve a rating study (created on first use)",
                           description="serve a rating study: each rater's link is printed",
                           epilog=f"example:\n  {SERVE_EXAMPLE}")
    serve.add_argument("runs", nargs="*", metavar="RUN", help="evaluated run, NAME=DIR, or a directory of runs "
                       "(needed only to create the study)")
    serve.add_argument("--db", required=True, help="the study's SQLite file (created when missing)")
    serve.add_argument("--port", type=ranged(int, PORT), default=8000, help=f"0 picks a free port ({PORT})")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (0.0.0.0: every interface)")
    serve.add_argument("--raters", type=ranged(int, AT_LEAST_1), help=f"create raters rater-1..rater-N ({AT_LEAST_1})")
    serve.add_argument("--rater", action="append", metavar="NAME", help="create a named rater (repeatable)")
    serve.add_argument("--mode", choices=MODES, help=f"new study: {' or '.join(MODES)} (default {MODES[0]})")
    serve.add_argument("--seed", type=int,
                       help="new study: the seed of every rater's order (default: random, recorded)")
    serve.add_argument("--eval", dest="eval_dir", help="new study: one evaluation that scored every run")
    serve.add_argument("--sample", type=ranged(int, AT_LEAST_1),
                       help=f"new study: rate this many stories, drawn with the seed ({AT_LEAST_1})")
    out = sub.add_parser("export", help="write consensus CSV, labels, agreement and Table 4",
                         description="write consensus CSV, labels, agreement and Table 4",
                         epilog=f"example:\n  {EXPORT_EXAMPLE}")
    out.add_argument("--db", required=True, help="the study's SQLite file")
    out.add_argument("--out", required=True, help="output directory")
    out.add_argument("--good-at", type=ranged(float, LIKERT), default=4.0,
                     help=f"likert: a story is labelled good when its consensus averaged over aspects is at least "
                          f"this ({LIKERT})")
    args = parser.parse_args(argv)
    return _serve(args) if args.command == "serve" else _export(args)
