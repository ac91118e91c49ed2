"""`review-lab curate`: preference pairs from candidate stories, curated by five agents (arXiv
2508.21476, section 3.1). `python -m rewards.curate` is an alias.

    review-lab curate --candidates runs/benchmark/single/stories.jsonl runs/benchmark/review/stories.jsonl \
        --model smollm2-135m-instruct --reference-dir ../shared/data/scifi-reference/texts --out runs/curation
    review-lab curate --config my.yaml --without reflect --out runs/curation_no_reflect   # an ablation

Outputs in --out: judgments.jsonl (every agent's output, initial and final verdict, per response),
preferences.jsonl (trl preference pairs, same prompt only), failed.jsonl, calls.jsonl (the call
journal), manifest.json (config, template hashes, retrieval sources, counts, calls and seconds per
response). Re-running the same command resumes; failed responses exit 1 and are retried by a re-run.
"""

from __future__ import annotations

from collections.abc import Sequence

from generate.common.cli import run_cli
from generate.common.config import parse_config
from rewards.curation import CurateConfig, Curator

EXAMPLE = ("review-lab curate --candidates runs/benchmark/single/stories.jsonl runs/benchmark/review/stories.jsonl "
           "--out runs/curation")


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_config(CurateConfig, argv, prog="review-lab curate", description=__doc__.split("\n\n")[0],
                       example=EXAMPLE)
    Curator(cfg).run()
    return 0


if __name__ == "__main__":
    run_cli(main)
