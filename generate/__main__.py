"""Generate stories with one framework.

    python -m generate --framework review --model smollm2-135m-instruct --dataset default \
        --limit 5 --max-new-tokens 400 --out runs/review

Re-running the same command resumes: finished prompts are skipped. A prompt whose reply stayed
blank after the re-asks fails (exit code 1, reasons in <out>/failed.jsonl); re-running the same
command retries it with new seeds.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence

from generate.common.cli import run_cli
from generate.common.config import add_dataclass_args, build_config
from generate.runner import RunConfig, Runner

log = logging.getLogger("generate")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m generate", description=__doc__.split("\n")[0])
    parser.add_argument("--config", help="YAML file of options; command-line flags override it")
    add_dataclass_args(parser, RunConfig)
    args = vars(parser.parse_args(argv))
    cfg = build_config(RunConfig, args.pop("config"), args)
    path = Runner(cfg).run()  # failed prompts raise PromptsFailed: exit 1 with one line
    log.info("stories: %s", path)
    return 0


if __name__ == "__main__":
    run_cli(main)
