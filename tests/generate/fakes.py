"""Scripted backends for testing our own logic (protocols, retries); never a stand-in for a model
in an end-to-end test."""

from __future__ import annotations

import asyncio
import hashlib

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
        out = []
        for r in requests:
            digest = hashlib.sha256(repr((r.messages, r.seed)).encode()).hexdigest()[:10]
            out.append(Completion(text=f"Tale {digest} unfolds.", prompt_tokens=10, completion_tokens=3))
        return out


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
