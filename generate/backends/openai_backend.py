"""OpenAI-compatible chat servers (OpenAI, `vllm serve`, llama.cpp server) via the async client.

The client's own retries are off: `Model` owns retrying, so every backend behaves the same.
Replies are read raw and checked field by field, because servers and the proxies in front of
them do send 200s whose body is cut short, an HTML error page, or JSON without `choices` or
`message`: each is a transient fault to retry, never a crash. Errors are sorted here:
retryable (429 with its Retry-After, 5xx, timeouts, dropped connections, malformed replies);
this request only (a 400 saying the prompt exceeds the context window, or that the provider's
content policy flagged it: `Completion.error`, the caller fails that item and the others go on);
fatal (other 400s, 401, 404, a 429 saying the account's quota is spent: retrying cannot help, so
the user hears about it at once, in one line, and `Model` starts no further call). The API key,
and any credential the server URL carries (`https://user:KEY@host`), is scrubbed from every
message, since error bodies can echo the request headers.

A well-formed reply is read by what it says, not only by its shape:

- finish_reason "content_filter": the provider's filter cut the reply, so it is neither a whole
  story nor a verdict: the request fails (`Completion.error`, with its tokens), never a story
  counted complete. A `refusal` in place of the content likewise.
- content null with finish_reason "length": every token went elsewhere (a reasoning model's hidden
  reasoning) and none to the answer: a blank reply that hit the cap, re-asked as blanks are.
- no `usage`: the tokens are unknown, not 0; the completion says so (`usage_reported`) and
  `Model` counts such replies in its stats, which the manifests record.
- logprobs asked but absent: a transient fault where this server has sent them before (a proxy
  that dropped them); from a server that never has, a second such reply is fatal, in one line:
  it cannot serve a logprob-mode judge, and every score read from it would be missing.

The length cap goes out as `max_tokens`, which every OpenAI-compatible server reads; OpenAI's
reasoning models refuse it (400, `unsupported_parameter`, naming `max_completion_tokens`), and
from the first such refusal on, this backend sends the cap as `max_completion_tokens` instead (the
refused request is sent again at once, no retry spent).

The client's `timeout` bounds each wait for bytes, not the request: a server that trickles its
reply a byte at a time would never trip it, so this backend's `timeout` (what `Model` bounds the
whole call by) is a few seconds longer than the client's.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import logging
import os
import re
import time

from generate.backends.base import Backend, ChatRequest, Completion, TokenLogprob, TransientBackendError
from generate.backends.served import served_identity
from generate.common.errors import UsageError
from generate.common.ranges import http_url
from generate.common.secrets import scrub, url_secrets

RETRYABLE_STATUS = {408, 409, 425, 429}
# How servers word "your prompt does not fit": OpenAI and vLLM ("maximum context length is N
# tokens"), older vLLM ("The decoder prompt (length N) is longer than the maximum model length of
# M"), llama.cpp ("exceeds the available context size"), others ("prompt is too long").
CONTEXT_EXCEEDED = re.compile(r"context[ _](length|window|size)|maximum context|maximum model length|"
                              r"prompt is too long|input is too long|too many tokens", re.I)
# A 429 that no wait cures: the account's quota or budget is spent (OpenAI's codes).
QUOTA_SPENT = {"insufficient_quota", "billing_hard_limit_reached", "billing_not_active"}
# A 400 about this prompt only: the provider's content policy flagged it (Azure's and OpenAI's codes).
PROMPT_FLAGGED = {"content_filter", "content_policy_violation", "invalid_prompt"}
BACKSTOP_S = 5.0  # `timeout` beyond the client's per-read timeout (module doc)
# The length cap's names: the one every server reads, and the one OpenAI's reasoning models take instead.
LENGTH_CAPS = ("max_tokens", "max_completion_tokens")

log = logging.getLogger(__name__)


class OpenAIBackend(Backend):
    # What the server lists of the model beyond its name (`generate.backends.served`): a resumed run
    # refuses another model served under the same name; absent where the server lists nothing.
    NUMERICS = ("served",)
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
        self._secrets = [self._api_key, *url_secrets(self.base_url or "")]
        if self.base_url is not None:
            check_base_url(self.base_url)
        self.max_concurrency = concurrency
        self.timeout = timeout + BACKSTOP_S  # the client's own timeout fires first; this is a backstop
        self._request_timeout = timeout
        self._clients: dict[int, object] = {}
        self._logprobs_seen = False  # a reply ever carried the logprobs asked for
        self._logprobs_missing = 0  # replies without the logprobs asked for
        self._length_cap = LENGTH_CAPS[0]  # the second once the server refuses the first (module doc)
        self._served: dict | None = None
        self._served_read = False

    def describe(self) -> dict:
        out = {**super().describe(), "base_url": self._scrub(self.base_url or "") or None}
        if not self._served_read:  # once per backend: a listing is one more request to the server
            self._served = served_identity(self.base_url, self._api_key, self.model, self._scrub)
            self._served_read = True
        return {**out, "served": self._served} if self._served else out

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
        return scrub(str(text), self._secrets)

    async def generate(self, requests: list[ChatRequest]) -> list[Completion]:
        return [await self._one(r) for r in requests]

    async def _one(self, req: ChatRequest) -> Completion:
        import openai

        cap = self._length_cap
        kwargs = {"model": self.model, "messages": req.messages, cap: req.params.max_new_tokens,
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
            if cap == LENGTH_CAPS[0] and self._renamed_length_cap(exc):
                return await self._one(req)
            return self._refused(exc)
        try:
            comp = parse_reply(raw.content)
        except TransientBackendError as exc:
            exc.args = (self._scrub(exc.args[0]),)
            raise
        if req.logprobs is not None and comp.error is None:
            self._check_logprobs(comp)
        return comp

    def _renamed_length_cap(self, exc) -> bool:
        """True where the server refused `max_tokens` for `max_completion_tokens` (a reasoning
        model): every request from now on sends the latter (requests in flight with the former are
        each sent again once; a refusal of the latter is reported as any other)."""
        if not (exc.status_code == 400 and exc.param == LENGTH_CAPS[0] and LENGTH_CAPS[1] in exc.message):
            return False
        if self._length_cap == LENGTH_CAPS[0]:
            self._length_cap = LENGTH_CAPS[1]
            log.info("%s: the server takes the length cap as %s, not %s", self.model, *LENGTH_CAPS[::-1])
        return True

    def _check_logprobs(self, comp: Completion) -> None:
        """A reply without the logprobs asked for: transient from a server that has sent them before,
        fatal from one that never has, at its second such reply (module doc)."""
        if comp.logprobs or not comp.text:
            self._logprobs_seen = self._logprobs_seen or bool(comp.logprobs)
            return
        self._logprobs_missing += 1
        if not self._logprobs_seen and self._logprobs_missing > 1:
            raise UsageError(f"{self.model}: the server sends no logprobs though asked (logprobs=true, "
                             f"{self._logprobs_missing} replies): it cannot serve a logprob-mode judge; use sample "
                             "mode, or a server that returns logprobs")
        raise _malformed("no logprobs, though they were asked for")

    def _refused(self, exc) -> Completion:
        """A 4xx/5xx reply: retry it, fail this request only, or stop the run (see module doc)."""
        status = exc.status_code
        detail = _short(self._scrub(exc.message))
        if status == 429 and exc.code in QUOTA_SPENT:
            raise UsageError(f"{self.model}: the server refused the request (HTTP 429, {exc.code}: no retry can "
                             f"help): {detail}") from None
        if status >= 500 or status in RETRYABLE_STATUS:
            raise TransientBackendError(f"HTTP {status}: {detail}", cause=f"HTTP {status}",
                                        retry_after=retry_after(exc.response.headers)) from None
        if status in (400, 413, 422) and (exc.code == "context_length_exceeded" or CONTEXT_EXCEEDED.search(detail)):
            return Completion(text="", finish_reason="error",
                              error=f"prompt too long for the model's context (HTTP {status}): {detail}")
        if status == 400 and exc.code in PROMPT_FLAGGED:
            return Completion(text="", finish_reason="error",
                              error=f"the server's content policy refused this prompt (HTTP 400, {exc.code}): {detail}")
        where = self._scrub(self.base_url) if self.base_url else "OpenAI's"
        hint = {401: "; check the API key (--api-key, OPENAI_API_KEY)",
                404: f"; check the model name, and the server URL ({where}; an OpenAI-compatible server's usually "
                     "ends in /v1)"}.get(status, "")
        raise UsageError(f"{self.model}: the server refused the request (HTTP {status}): {detail}{hint}") from None


def check_base_url(url: str) -> None:
    """Refuse a server URL the client could only fail on, at once, instead of retrying each call:
    one without http(s):// (`localhost:8000/v1`) or without a host (`ranges.http_url`)."""
    try:
        http_url(url)
    except UsageError as exc:
        raise UsageError(f"bad server URL {exc}") from None


def parse_reply(body: bytes) -> Completion:
    """Our Completion from a chat.completions reply body, checked field by field (module doc).

    Returns:
        The completion; with `error` set (and `text` empty) for a reply the provider's content
        filter cut or the model refused.

    Raises:
        TransientBackendError: (cause "malformed reply") the body is not JSON (cut short, an HTML
            page), or has no `choices`, no `message` or no string `content` (except as above), or
            unreadable usage or logprobs. It carries the reply's tokens where its `usage` is readable.
    """
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise _malformed(f"not JSON ({len(body)} bytes starting {body[:60]!r})") from None
    usage = _usage(data)
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise _malformed(f"no choices (choices={choices!r:.60})", usage)
    choice = choices[0]
    finish = choice.get("finish_reason")
    message = choice.get("message")
    if not isinstance(message, dict):
        raise _malformed(f"no message (message={message!r:.60})", usage)
    content = message.get("content")
    refusal = message.get("refusal")
    tokens = {"prompt_tokens": usage[0], "completion_tokens": usage[1]} if usage else {}
    tokens["usage_reported"] = usage is not None
    if finish == "content_filter":
        return Completion(text="", finish_reason="error", **tokens,
                          error="the server's content filter stopped the reply (finish_reason 'content_filter'; "
                                f"{len(content) if isinstance(content, str) else 0} characters came before it)")
    if not content and isinstance(refusal, str) and refusal.strip():
        return Completion(text="", finish_reason="error", **tokens, error=f"the model refused: {_short(refusal)}")
    if content is None and finish == "length":
        content = ""  # the cap was reached before any answer (reasoning), a blank reply that hit the cap
    if not isinstance(content, str):
        raise _malformed(f"no content in the message (content={content!r:.60})", usage)
    comp = Completion(text=content, finish_reason=finish, **tokens)
    try:
        lp = choice.get("logprobs")
        lp_tokens = lp.get("content") if lp is not None else None
        if lp_tokens:
            comp.logprobs = [TokenLogprob(t["token"], float(t["logprob"]),
                                          {a["token"]: float(a["logprob"]) for a in t.get("top_logprobs") or []})
                             for t in lp_tokens]
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise _malformed(f"bad logprobs ({type(exc).__name__}: {exc})", usage) from None
    return comp


def _usage(data) -> tuple[int, int] | None:
    """(prompt tokens, completion tokens) of a reply, or None where it reports none it can be read by."""
    usage = data.get("usage") if isinstance(data, dict) else None
    if not isinstance(usage, dict):
        return None
    try:
        prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
        if prompt is None and completion is None:
            return None
        return int(prompt or 0), int(completion or 0)
    except (TypeError, ValueError):
        return None


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


def _malformed(what: str, usage: tuple[int, int] | None = None) -> TransientBackendError:
    prompt, completion = usage or (0, 0)
    return TransientBackendError(f"malformed reply: {what}", cause="malformed reply", prompt_tokens=prompt,
                                 completion_tokens=completion)


def _short(text: str) -> str:
    line = " ".join(str(text).split())
    return line[:300]
