"""Judge throughput: stories per minute in `logprob` mode (one greedy 2-token pass per aspect)
against `sample` mode (K replies per aspect, each with reasoning and a score line).

Used by `scripts/bench_novelty.py`; it tells what judging a training batch or a 100-prompt
benchmark costs with a given judge, and how much the logprob mode saves.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from eval.judge import Judge
from generate.backends import Model


@dataclass(frozen=True)
class JudgeThroughput:
    mode: str
    stories: int
    seconds: float
    requests: int
    parse_failure_rate: float | None

    @property
    def stories_per_minute(self) -> float:
        return 60.0 * self.stories / self.seconds if self.seconds > 0 else float("inf")

    def line(self) -> str:
        rate = "n/a" if self.parse_failure_rate is None else f"{100 * self.parse_failure_rate:.0f}%"
        return (f"judge throughput {self.mode}: {self.stories_per_minute:.1f} stories/min "
                f"({self.stories} stories, {self.requests} judge replies, {self.seconds:.1f} s, "
                f"parse failures {rate})")


def measure_judge_throughput(model: Model, stories: list[str], *, modes: tuple[str, ...] = ("logprob", "sample"),
                             samples: int = 3, max_new_tokens: int = 64, max_parse_retries: int = 0,
                             seed: int = 0) -> list[JudgeThroughput]:
    """Time one full judgement of `stories` per mode with the same model (loaded once, warm).

    Args:
        model: the judge.
        stories: the stories to judge (a handful of short ones is enough for a rate).
        modes: modes to time, in order.
        samples: K of sample mode.
        max_new_tokens: sample mode's reply budget; small keeps the benchmark short on a CPU.
        max_parse_retries: sample mode's re-asks. 0 by default: the rate is then that of one
            pass of K samples; a judge that fails to parse a fraction f of its replies costs up
            to (1 + f + f^2 ...) times more with re-asks, which the reported failure rate tells.
        seed: judge seed.
    """
    out = []
    for mode in modes:
        judge = Judge(model, mode=mode, samples=samples, max_new_tokens=max_new_tokens,
                      max_parse_retries=max_parse_retries, seed=seed)
        start = time.perf_counter()
        judge.score(stories, desc=None)
        seconds = time.perf_counter() - start
        out.append(JudgeThroughput(mode, len(stories), seconds, judge.stats.requests, judge.stats.parse_failure_rate))
    return out
