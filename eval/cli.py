"""`review-lab eval`: score generated stories with the LLM judge, surprisal and the reference-corpus
novelty metrics.

    review-lab eval --stories runs/single/stories.jsonl runs/review/stories.jsonl \
        --judge smollm2-135m-instruct --judge-mode logprob \
        --reference-dir ../shared/data/scifi-reference/texts --out runs/eval

The paper's protocol is `--judge-mode sample --samples 3` with a strong judge (e.g.
`--judge openai:gpt-4o`); the embedded SmolLM2 judge only gives usable scores in `logprob` mode.
Writes scores.jsonl, summary.json, judge_stats.json, summary.md, plots and a manifest.
Re-running the same command resumes: stories already in scores.jsonl are skipped.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from eval.run import EvalConfig, Evaluator
from generate.common.config import add_dataclass_args, build_config, new_parser

log = logging.getLogger("eval")
EXAMPLE = "review-lab eval --stories runs/review/stories.jsonl --judge-mode logprob --out runs/review/eval"


def main(argv: Sequence[str] | None = None) -> int:
    parser = new_parser("review-lab eval", __doc__.split("\n\n")[0], EXAMPLE)
    parser.add_argument("--config", help="YAML file of options; command-line flags override it")
    parser.add_argument("--stories", nargs="+", action="extend", default=None,
                        help="stories.jsonl file(s); repeat or list several to compare frameworks")
    add_dataclass_args(parser, EvalConfig, skip=("stories",))
    args = vars(parser.parse_args(argv))
    cfg = build_config(EvalConfig, args.pop("config"), args)
    out = Evaluator(cfg).run()
    log.info("table: %s", out / "summary.md")
    return 0
