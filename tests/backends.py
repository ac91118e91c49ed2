"""The bookkeeping shared by scripted test backends: the size of each engine call, an optional
delay (timeouts) and an optional error (failure paths). Subclasses say only how to answer."""

from __future__ import annotations

import asyncio

from generate.backends import Backend, ChatRequest, Completion


class RecordingBackend(Backend):
    """Answers each request with `reply(request)` (a string becomes a 5-token completion)."""

    def __init__(self, name: str, delay: float = 0.0, error: Exception | None = None):
        super().__init__(name)
        self.delay, self.error = delay, error
        self.calls: list[int] = []

    def reply(self, request: ChatRequest) -> str | Completion:
        raise NotImplementedError

    async def generate(self, requests: list[ChatRequest]) -> list[Completion]:
        self.calls.append(len(requests))
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.error is not None:
            raise self.error
        replies = [self.reply(r) for r in requests]
        return [Completion(text=r, completion_tokens=5) if isinstance(r, str) else r for r in replies]
