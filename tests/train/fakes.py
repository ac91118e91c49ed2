"""Scripted judge backends for testing our reward logic (timeouts, batching), never a judge's quality."""

from __future__ import annotations

import math

from eval.judge import Judge
from generate.backends import Backend, ChatRequest, Completion, Model, RetryPolicy, TokenLogprob
from tests.backends import RecordingBackend


class DigitJudgeBackend(RecordingBackend):
    """Answers logprob-mode judge requests with a fixed digit: 5 if the story says "brilliant", else 1.

    Records each engine call's size, so tests can check the reward batches its judge calls.
    """

    batch_size = 1000
    supports_prefill = True

    def __init__(self, delay: float = 0.0, error: Exception | None = None):
        super().__init__("fake-judge", delay, error)

    def reply(self, request: ChatRequest) -> Completion:
        digit = "5" if "brilliant" in request.messages[-1]["content"] else "1"
        return Completion(text=digit, logprobs=[TokenLogprob(digit, 0.0, {digit: 0.0, "0": -math.inf})])


def fake_judge(backend: Backend) -> Judge:
    return Judge(Model(backend, policy=RetryPolicy(retries=0, empty_retries=0)), mode="logprob")
