"""OpenAI-compatible chat servers (OpenAI, `vllm serve`, llama.cpp server) via the async client.

The client's own retries are off: `Model` owns retrying, so every backend behaves the same.
Replies are read raw and checked field by field, because servers and the proxies in front of
them do send 200s whose body is cut short, an HTML error page, or JSON without `choices` or
`message`: each is a transient fault to retry, never a crash. Errors are sorted here:
retryable (429 with its Retry-After, 5xx, timeouts, dropped connections, malformed replies);
this request only (a 400 saying the prompt exceeds the context window: `Completion.error`, the
caller fails that item and the others go on); fatal (other 400s, 401, 404: retrying cannot help,
so the user hears about it at once, in one line). The API key is scrubbed from every message,
since error bodies can echo the request headers.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import os
import re
import time

from generate.backends.base import Backend, ChatRequest, Completion, TokenLogprob, TransientBackendError
from generate.common.errors import UsageError
from generate.common.secrets import scrub

RETRYABLE_STATUS = {408, 409, 425, 429}
# How servers word "your prompt does not fit": OpenAI and vLLM ("maximum context length is N
# tokens"), llama.cpp ("exceeds the available context size"), others ("prompt is too long").
CONTEXT_EXCEEDED = re.compile(r"context[ _](length|window|size)|maximum context|prompt is too long|"
                              r"input is too long|too many tokens", re.I)


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
        return {**super().describe(), "base_url": self._scrub(self.base_url or "") or None}

    def _client(self):
        """One client per event loop: an httpx pool must not outlive the loop it was made in."""
        import openai

        loop = id(asyncio.get_running_loop())
        if loop not in self._clients:
            self._clients.clear()
            self._clients[loop] = openai.AsyncOpenAI(base_url=self.base_url, api_key=self._api_key,
                                                     timeout=self._request_timeout, max_retries=0)
        return self._clients[loop]

    async def aclose(self) -> None:
        client = self._clients.pop(id(asyncio.get_running_loop()), None)
        if client is not None:
            await client.close()

    def _scrub(self, text: str) -> str:
        return scrub(str(text), [self._api_key])

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
            raw = await self._client().chat.completions.with_raw_response.create(**kwargs)
        except openai.APITimeoutError:
            raise TransientBackendError(f"no reply within {self._request_timeout:g}s", cause="timeout") from None
        except openai.APIConnectionError as exc:
            why = f"{type(exc.__cause__).__name__}: {exc.__cause__}" if exc.__cause__ else str(exc)
            raise TransientBackendError(f"connection failed ({self._scrub(why)})", cause="connection") from None
        except openai.APIStatusError as exc:
            return self._refused(exc)
        return parse_reply(raw.content)

    def _refused(self, exc) -> Completion:
        """A 4xx/5xx reply: retry it, fail this request only, or stop the run (see module doc)."""
        status = exc.status_code
        detail = _short(self._scrub(exc.message))
        if status >= 500 or status in RETRYABLE_STATUS:
            raise TransientBackendError(f"HTTP {status}: {detail}", cause=f"HTTP {status}",
                                        retry_after=retry_after(exc.response.headers)) from None
        if status in (400, 413) and (exc.code == "context_length_exceeded" or CONTEXT_EXCEEDED.search(detail)):
            return Completion(text="", finish_reason="error",
                              error=f"prompt too long for the model's context (HTTP {status}): {detail}")
        raise UsageError(f"{self.model}: the server refused the request (HTTP {status}): {detail}") from None


def parse_reply(body: bytes) -> Completion:
    """Our Completion from a chat.completions reply body, checked field by field.

    Raises:
        TransientBackendError: (cause "malformed reply") the body is not JSON (cut short, an HTML
            page), or has no `choices`, no `message` or no string `content`.
    """
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise _malformed(f"not JSON ({len(body)} bytes starting {body[:60]!r})") from None
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise _malformed(f"no choices (choices={choices!r:.60})")
    choice = choices[0]
    message = choice.get("message")
    if not isinstance(message, dict):
        raise _malformed(f"no message (message={message!r:.60})")
    content = message.get("content")
    if not isinstance(content, str):
        raise _malformed(f"no content in the message (content={content!r:.60})")
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    try:
        comp = Completion(text=content, prompt_tokens=int(usage.get("prompt_tokens") or 0),
                          completion_tokens=int(usage.get("completion_tokens") or 0),
                          finish_reason=choice.get("finish_reason"))
        tokens = (choice.get("logprobs") or {}).get("content")
        if tokens is not None:
            comp.logprobs = [TokenLogprob(t["token"], float(t["logprob"]),
                                          {a["token"]: float(a["logprob"]) for a in t.get("top_logprobs") or []})
                             for t in tokens]
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise _malformed(f"bad usage or logprobs ({type(exc).__name__}: {exc})") from None
    return comp


def retry_after(headers) -> float | None:
    """Seconds a 429/503 asks us to wait: `retry-after-ms`, `retry-after` in seconds or as a date."""
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value) / scale)
        except ValueError:
            pass
        try:
            return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError):
            pass
    return None


def _malformed(what: str) -> TransientBackendError:
    return TransientBackendError(f"malformed reply: {what}", cause="malformed reply")


def _short(text: str) -> str:
    line = " ".join(str(text).split())
    return line[:300]
