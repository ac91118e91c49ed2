"""Scripted backends for testing our own logic (protocols, retries); never a stand-in for a model
in an end-to-end test."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable

from generate.backends import Backend, ChatRequest, Completion
from generate.backends.base import TransientBackendError


class RecordingEcho(Backend):
    """Replies with a unique token derived from the request, and records every request."""

    batch_size = 4

    def __init__(self, model: str = "echo"):
        super().__init__(model)
        self.requests: list[ChatRequest] = []
        self.batches: list[int] = []

    async def generate(self, requests: list[ChatRequest]) -> list[Completion]:
        self.requests.extend(requests)
        self.batches.append(len(requests))
        return [Completion(text=self.reply(r), prompt_tokens=10, completion_tokens=3) for r in requests]

    @staticmethod
    def reply(request: ChatRequest) -> str:
        """The reply this backend gives `request` (so a test can tell which request a text answers)."""
        digest = hashlib.sha256(repr((request.messages, request.seed)).encode()).hexdigest()[:10]
        return f"Tale {digest} unfolds."


class Scripted(RecordingEcho):
    """Echo replies, except where `rule(request)` returns a text (a blank, a bare wrapper...) or a
    whole `Completion` (e.g. one the backend refused, with `error` set)."""

    def __init__(self, rule: Callable[[ChatRequest], str | Completion | None]):
        super().__init__()
        self.rule = rule

    async def generate(self, requests: list[ChatRequest]) -> list[Completion]:
        outs = await super().generate(requests)
        for i, r in enumerate(requests):
            scripted = self.rule(r)
            if isinstance(scripted, str):
                scripted = Completion(text=scripted, prompt_tokens=10, completion_tokens=1)
            if scripted is not None:
                outs[i] = scripted
        return outs


class Flaky(Backend):
    """Fails `failures` times (transiently, or by hanging) before answering."""

    def __init__(self, failures: int, hang: bool = False, blank: int = 0):
        super().__init__("flaky")
        self.failures, self.hang, self.blank = failures, hang, blank
        self.attempts = 0

    async def generate(self, requests: list[ChatRequest]) -> list[Completion]:
        self.attempts += 1
        if self.attempts <= self.failures:
            if self.hang:
                await asyncio.sleep(60)
            raise TransientBackendError("HTTP 503")
        if self.blank > 0:
            self.blank -= 1
            return [Completion(text="  ") for _ in requests]
        return [Completion(text=f"ok {r.seed}") for r in requests]
