"""A scripted OpenAI-compatible chat server on loopback, for fast tests of our own error handling
(the end-to-end tests use the real llama.cpp server instead).

Replies are a pure function of the request, so a retried request gets the same answer. A user
message that contains `STATUS <code>` gets that HTTP status (`STATUS 429 insufficient_quota`: with
that error code); one longer than `context_chars` gets the 400 that OpenAI-compatible servers give
a prompt beyond the context window; one that contains `SHAPE <name>` gets a well-formed 200 of
that shape (`SHAPES`); one that contains `SLOW` is answered after 0.2 s. A model whose name starts
with `reasoning` refuses `max_tokens` as OpenAI's reasoning models do (`max_completion_tokens`). The server keeps every
request body (`bodies`) and the most requests it ever held at once (`most_at_once`). Error bodies
quote the request headers back, as some servers do (the secret tests need that). `GET /v1/models`
lists `cards` (each listing stamped with the time, as vLLM does); with `cards` None it answers 404,
as servers without a listing do.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


SHAPES = {
    "content_filter": "the reply's start, then finish_reason content_filter (the provider's filter cut it)",
    "refusal": "content null and a `refusal` (a model that declined)",
    "reasoning_length": "content null, finish_reason length: every token went to hidden reasoning",
    "length": "the reply cut at the cap, finish_reason length",
    "no_usage": "a reply without `usage`",
    "no_logprobs": "a reply without logprobs, even when asked for them",
}
USAGE = {"completion_tokens": 4}  # and prompt_tokens: the words of the last message


def reply_text(messages: list[dict]) -> str:
    """What the stub answers to these messages."""
    digest = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()[:8]
    return f"Story {digest}. Score: 2"


class StubServer:
    def __init__(self, context_chars: int = 2000):
        self.context_chars = context_chars
        self.requests = 0
        self.bodies: list[dict] = []
        self.at_once = self.most_at_once = 0
        self.cards: list[dict] | None = None
        self.lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> StubServer:
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self._server.shutdown()
        self._server.server_close()


def _handler(stub: StubServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = 30

        def log_message(self, format, *args):
            pass

        def do_GET(self):
            if stub.cards is None or not self.path.endswith("/models"):
                return self._send(404, {"error": {"message": f"no route {self.path}"}})
            self._send(200, {"object": "list", "data": [{"object": "model", "created": time.time_ns(), **card}
                                                        for card in stub.cards]})

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            with stub.lock:
                stub.requests += 1
                stub.bodies.append(body)
                stub.at_once += 1
                stub.most_at_once = max(stub.most_at_once, stub.at_once)
            try:
                self._answer(body)
            finally:
                with stub.lock:
                    stub.at_once -= 1

        def _answer(self, body: dict) -> None:
            text = body["messages"][-1]["content"]
            if "SLOW" in text:
                time.sleep(0.2)
            echo = "; ".join(f"{k}: {v}" for k, v in self.headers.items())
            if body["model"].startswith("reasoning") and "max_tokens" in body:
                return self._send(400, {"error": {
                    "message": "Unsupported parameter: 'max_tokens' is not supported with this model. Use "
                               "'max_completion_tokens' instead.", "type": "invalid_request_error",
                    "param": "max_tokens", "code": "unsupported_parameter"}})
            if status := re.search(r"STATUS (\d{3})(?: (\w+))?", text):
                return self._send(int(status.group(1)), {"error": {"message": f"refused; you sent {echo}",
                                                                   "code": status.group(2)}})
            if len(text) > stub.context_chars:
                return self._send(400, {"error": {
                    "message": f"This model's maximum context length is {stub.context_chars} tokens. However, "
                               f"you requested {len(text)} tokens. You sent {echo}", "type": "invalid_request_error",
                    "code": "context_length_exceeded"}})
            reply = reply_text(body["messages"])
            shape = match.group(1) if (match := re.search(r"SHAPE (\w+)", text)) else None
            choice = {"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}
            if body.get("logprobs") and shape != "no_logprobs":
                choice["logprobs"] = {"content": [
                    {"token": tok, "logprob": -0.1, "top_logprobs": [{"token": tok, "logprob": -0.1},
                                                                      {"token": "1", "logprob": -2.5}]}
                    for tok in reply.replace(" ", "\0 ").split("\0")]}
            if shape in ("content_filter", "length"):
                choice.update(message={"role": "assistant", "content": reply[:6]}, finish_reason=shape)
            elif shape == "refusal":
                choice["message"] = {"role": "assistant", "content": None, "refusal": "I can't help with that."}
            elif shape == "reasoning_length":
                choice.update(message={"role": "assistant", "content": None}, finish_reason="length")
            payload = {"id": "stub", "object": "chat.completion", "model": body["model"], "choices": [choice]}
            if shape != "no_usage":
                payload["usage"] = {"prompt_tokens": len(text.split()), **USAGE}
            self._send(200, payload)

        def _send(self, status: int, payload: dict) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler
