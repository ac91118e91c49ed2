"""`review-lab generate`: stories with one framework.

    review-lab generate --framework review --model smollm2-135m-instruct --dataset default \
        --limit 5 --max-new-tokens 400 --out runs/review

Re-running the same command resumes: finished prompts are skipped. A prompt with a call that
failed (a reply blank after the re-asks, a call out of retries) fails (exit code 1, reasons in
<out>/failed.jsonl); re-running the same command retries it, replaying every finished call.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from generate.common.config import parse_config
from generate.runner import RunConfig, Runner

log = logging.getLogger("generate")
EXAMPLE = "review-lab generate --framework review --dataset default --limit 5 --max-new-tokens 400 --out runs/review"


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_config(RunConfig, argv, prog="review-lab generate", description=__doc__.split("\n")[0],
                       example=EXAMPLE)
    path = Runner(cfg).run()  # failed prompts raise PromptsFailed: exit 1 with one line
    log.info("stories: %s", path)
    return 0
