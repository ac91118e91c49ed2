"""Scripted judge backends for testing our reward logic (timeouts, batching), never a judge's quality."""

from __future__ import annotations

import asyncio
import math

from eval.judge import Judge
from generate.backends import Backend, ChatRequest, Completion, Model, RetryPolicy, TokenLogprob


class DigitJudgeBackend(Backend):
    """Answers logprob-mode judge requests with a fixed digit: 5 if the story says "brilliant", else 1.

    Records each engine call's size, so tests can check the reward batches its judge calls.
    """

    batch_size = 1000
    supports_prefill = True

    def __init__(self, delay: float = 0.0, error: Exception | None = None):
        super().__init__("fake-judge")
        self.delay, self.error = delay, error
        self.calls: list[int] = []

    async def generate(self, requests: list[ChatRequest]) -> list[Completion]:
        self.calls.append(len(requests))
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.error is not None:
            raise self.error
        out = []
        for r in requests:
            digit = "5" if "brilliant" in r.messages[-1]["content"] else "1"
            out.append(Completion(text=digit, logprobs=[TokenLogprob(digit, 0.0, {digit: 0.0, "0": -math.inf})]))
        return out


def fake_judge(backend: Backend) -> Judge:
    return Judge(Model(backend, policy=RetryPolicy(retries=0, empty_retries=0)), mode="logprob")
