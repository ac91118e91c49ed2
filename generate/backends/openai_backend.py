"""OpenAI-compatible chat servers (OpenAI, `vllm serve`, llama.cpp server) via the async client.

The client's own retries are off: `Model` owns retrying, so every backend behaves the same.
Errors are sorted here into retryable (429, 5xx, timeouts, dropped connections) and fatal
(400/401/404: retrying cannot help, so the user hears about it at once).
"""

from __future__ import annotations

import asyncio
import os

from generate.backends.base import Backend, ChatRequest, Completion, TokenLogprob, TransientBackendError
from generate.common.errors import UsageError

RETRYABLE_STATUS = {408, 409, 425, 429}


class OpenAIBackend(Backend):
    batch_size = 1

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 concurrency: int = 8, timeout: float = 120.0):
        super().__init__(model)
        import openai  # noqa: F401 - fail early if missing

        self.base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        self._api_key = api_key or os.environ.get("OPENAI_API_KEY") or None
        if self._api_key is None:
            if self.base_url is None:
                raise UsageError("openai backend: set OPENAI_API_KEY, or OPENAI_BASE_URL for a local server")
            self._api_key = "EMPTY"  # local servers accept any key
        self.max_concurrency = concurrency
        self.timeout = timeout + 5.0  # the client's own timeout fires first; this is a backstop
        self._request_timeout = timeout
        self._clients: dict[int, object] = {}

    def describe(self) -> dict:
        return {**super().describe(), "base_url": self.base_url}

    def _client(self):
        """One client per event loop: an httpx pool must not outlive the loop it was made in."""
        import openai

        loop = id(asyncio.get_running_loop())
        if loop not in self._clients:
            self._clients.clear()
            self._clients[loop] = openai.AsyncOpenAI(base_url=self.base_url, api_key=self._api_key,
                                                     timeout=self._request_timeout, max_retries=0)
        return self._clients[loop]

    async def generate(self, requests: list[ChatRequest]) -> list[Completion]:
        return [await self._one(r) for r in requests]

    async def _one(self, req: ChatRequest) -> Completion:
        import openai

        kwargs = {"model": self.model, "messages": req.messages, "max_tokens": req.params.max_new_tokens,
                  "temperature": req.params.temperature, "top_p": req.params.top_p}
        if req.seed is not None:
            kwargs["seed"] = req.seed
        if req.logprobs is not None:
            kwargs["logprobs"] = True
            if req.logprobs:
                kwargs["top_logprobs"] = req.logprobs
        try:
            resp = await self._client().chat.completions.create(**kwargs)
        except (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError) as exc:
            raise TransientBackendError(f"{type(exc).__name__}: {exc}") from exc
        except openai.APIStatusError as exc:
            if exc.status_code >= 500 or exc.status_code in RETRYABLE_STATUS:
                raise TransientBackendError(f"HTTP {exc.status_code}") from exc
            raise UsageError(f"{self.model}: the server refused the request (HTTP {exc.status_code}): "
                             f"{_short(exc.message)}") from None
        if not resp.choices:
            raise TransientBackendError("reply without choices")
        return to_completion(resp)


def to_completion(resp) -> Completion:
    """Translate a chat.completions response into our Completion."""
    choice = resp.choices[0]
    usage = resp.usage
    comp = Completion(text=choice.message.content or "",
                      prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
                      completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
                      finish_reason=choice.finish_reason)
    content = getattr(choice.logprobs, "content", None) if choice.logprobs else None
    if content is not None:
        comp.logprobs = [TokenLogprob(t.token, t.logprob, {a.token: a.logprob for a in (t.top_logprobs or [])})
                         for t in content]
    return comp


def _short(text: str) -> str:
    line = " ".join(str(text).split())
    return line[:300]
