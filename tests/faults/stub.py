"""A scripted OpenAI-compatible chat server on loopback, for fast tests of our own error handling
(the end-to-end tests use the real llama.cpp server instead).

Replies are a pure function of the request, so a retried request gets the same answer. A user
message that contains `STATUS <code>` gets that HTTP status; one longer than `context_chars`
gets the 400 that OpenAI-compatible servers give a prompt beyond the context window. Error
bodies quote the request headers back, as some servers do (the secret tests need that).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def reply_text(messages: list[dict]) -> str:
    """What the stub answers to these messages."""
    digest = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()[:8]
    return f"Story {digest}. Score: 2"


class StubServer:
    def __init__(self, context_chars: int = 2000):
        self.context_chars = context_chars
        self.requests = 0
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

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            stub.requests += 1
            text = body["messages"][-1]["content"]
            echo = "; ".join(f"{k}: {v}" for k, v in self.headers.items())
            if status := re.search(r"STATUS (\d{3})", text):
                return self._send(int(status.group(1)), {"error": {"message": f"refused; you sent {echo}"}})
            if len(text) > stub.context_chars:
                return self._send(400, {"error": {
                    "message": f"This model's maximum context length is {stub.context_chars} tokens. However, "
                               f"you requested {len(text)} tokens. You sent {echo}", "type": "invalid_request_error",
                    "code": "context_length_exceeded"}})
            reply = reply_text(body["messages"])
            choice = {"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}
            if body.get("logprobs"):
                choice["logprobs"] = {"content": [
                    {"token": tok, "logprob": -0.1, "top_logprobs": [{"token": tok, "logprob": -0.1},
                                                                      {"token": "1", "logprob": -2.5}]}
                    for tok in reply.replace(" ", "\0 ").split("\0")]}
            self._send(200, {"id": "stub", "object": "chat.completion", "model": body["model"], "choices": [choice],
                             "usage": {"prompt_tokens": len(text.split()), "completion_tokens": 4}})

        def _send(self, status: int, payload: dict) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler
