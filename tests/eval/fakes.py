"""Scripted backends for testing the judge and the evaluation logic without a real model."""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable

from generate.backends import ChatRequest, Completion, Model, RetryPolicy, TokenLogprob
from generate.backends.base import Backend, TransientBackendError

ASPECT_NAMES = {"Scientific Concept Integration": "concepts", "Speculative Logic": "logic",
                "Character Depth": "characters", "Immersive World-Building": "world_building",
                "Ethical and Philosophical Themes": "ethics"}
_ASPECT_LINE = re.compile(r"^Aspect: (.+)$", re.MULTILINE)


def aspect_of(req: ChatRequest) -> str:
    """The rubric key of the aspect a judge request asks about."""
    return ASPECT_NAMES[_ASPECT_LINE.search(req.messages[-1]["content"]).group(1)]


class ScriptedBackend(Backend):
    """Replies from a script: `script[aspect]` is a list of replies handed out in call order
    (the last one repeats); a callable script gets (request, call number for that aspect)."""

    batch_size = 1000

    def __init__(self, script: dict[str, list[str]] | Callable[[ChatRequest, int], str], *, prefill: bool = False):
        super().__init__("scripted")
        self.script = script
        self.supports_prefill = prefill
        self.requests: list[ChatRequest] = []
        self._calls: dict[str, int] = defaultdict(int)

    async def generate(self, requests: list[ChatRequest]) -> list[Completion]:
        out = []
        for req in requests:
            self.requests.append(req)
            aspect = aspect_of(req)
            n = self._calls[aspect]
            self._calls[aspect] += 1
            if callable(self.script):
                text = self.script(req, n)
            else:
                replies = self.script.get(aspect, self.script.get("*", [""]))
                text = replies[min(n, len(replies) - 1)]
            out.append(Completion(text=text, completion_tokens=len(text.split())))
        return out


class LogprobBackend(Backend):
    """Returns fixed per-position logprobs: `positions` is [(token, {alt: logprob})]."""

    batch_size = 1000

    def __init__(self, positions: list[tuple[str, dict[str, float]]], *, prefill: bool = True):
        super().__init__("logprob-fake")
        self.positions = positions
        self.supports_prefill = prefill
        self.requests: list[ChatRequest] = []

    async def generate(self, requests: list[ChatRequest]) -> list[Completion]:
        self.requests.extend(requests)
        lps = [TokenLogprob(tok, top.get(tok, 0.0), dict(top)) for tok, top in self.positions]
        return [Completion(text="".join(t for t, _ in self.positions) or "x", logprobs=lps) for _ in requests]


class DownBackend(Backend):
    """A server that never answers."""

    batch_size = 1000

    def __init__(self):
        super().__init__("down")
        self.calls = 0

    async def generate(self, requests: list[ChatRequest]) -> list[Completion]:
        self.calls += 1
        raise TransientBackendError("HTTP 503")


class FakeScorer(Backend):
    """A teacher-forcing scorer: each story token (whitespace word) gets logprob -1 - 0.1 * len(word)."""

    batch_size = 1000

    def __init__(self):
        super().__init__("fake-scorer")
        self.pairs: list = []

    async def generate(self, requests: list[ChatRequest]) -> list[Completion]:
        return [Completion(text="Score: 3") for _ in requests]

    def score(self, pairs, batch_size=None):
        self.pairs.extend(pairs)
        return [[-1.0 - 0.1 * len(w) for w in cont.split()] for _, cont in pairs]


def model(backend: Backend) -> Model:
    """A `Model` that fails fast (no backoff) and hands blank replies to the judge unchanged."""
    return Model(backend, policy=RetryPolicy(retries=1, backoff=0.0, max_backoff=0.0, empty_retries=0))
