"""A fault-injecting HTTP proxy for OpenAI-compatible servers: loopback only, bounded, and it
stops by itself.

It stands between a client and a real server (the llama.cpp test server), forwards good
requests unchanged and, on a seeded schedule, answers chat completions with the faults real
servers and proxies produce (`FAULTS`). It records what it injected, and every client that hung
up before its reply came (a timeout on a slow machine, not scheduled), so a test can check that
the client's retry counts match exactly (`expected_retries`).

It also keeps llama.cpp deterministic for a test. The server reuses its KV cache for the prefix a
prompt shares with the previous one; when a prompt is an exact repeat of the previous one (the
retry of a reply we cut, the restart of a killed run), only its last position is recomputed, in
a one-token batch whose float rounding differs, and a sampled token can flip (measured: 3 of 8
repeats differed, 0 of 8 after another prompt). So the proxy forwards one request at a time and
sends a one-token request of its own between two requests with the same messages.

    with FaultProxy(server.base_url, upstream_key=server.api_key, schedule=seeded_schedule(0)) as proxy:
        ... point the client at proxy.base_url ...
    proxy.injected   # [(arrival number, fault), ...]
"""

from __future__ import annotations

import hashlib
import http.client
import json
import random
import select
import socket
import threading
import time
import urllib.parse
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FAULTS = {
    "truncated": "200 whose JSON body is cut in half (Content-Length says so)",
    "not_json": "200 with a plain-text body",
    "html": "200 with an HTML error page",
    "choices_empty": "200 with choices: []",
    "choices_null": "200 with choices: null",
    "message_null": "200 with a choice whose message is null",
    "content_missing": "200 with a message without content",
    "drop": "headers and half the body, then the connection closes",
    "stall": "headers, then silence past the client's timeout",
    "429": "429 without Retry-After",
    "429_retry_after": "429 with Retry-After (seconds)",
    "429_retry_after_long": "429 with a Retry-After beyond the client's cap",
    "502": "502 Bad Gateway (HTML body)",
    "503": "503 Service Unavailable",
    "504": "504 Gateway Timeout",
}
# Faults outside the every-fault schedules: each changes what a survived run records or costs.
EXTRA_FAULTS = {
    "trickle": "headers, then one byte every 0.2 s, for stall_s: no read ever waits long enough to time out",
    "choices_empty_billed": "200 with choices: [] and the usage it was billed (BILLED)",
}
BILLED = {"prompt_tokens": 11, "completion_tokens": 3}
# The cause `generate.backends.model.Model` counts a retry under, for each fault.
CAUSE = {"truncated": "malformed reply", "not_json": "malformed reply", "html": "malformed reply",
         "choices_empty": "malformed reply", "choices_null": "malformed reply", "message_null": "malformed reply",
         "content_missing": "malformed reply", "drop": "connection", "stall": "timeout", "429": "HTTP 429",
         "429_retry_after": "HTTP 429", "429_retry_after_long": "HTTP 429", "502": "HTTP 502", "503": "HTTP 503",
         "504": "HTTP 504", "trickle": "timeout", "choices_empty_billed": "malformed reply"}
CHAT = "/chat/completions"


def seeded_schedule(seed: int, faults: list[str] | None = None, max_gap: int = 1) -> list[tuple[int, str]]:
    """Every fault once, in a seeded order, each after 0..max_gap clean chat requests:
    [(clean requests to forward first, fault), ...]."""
    rng = random.Random(seed)
    order = list(faults or FAULTS)
    rng.shuffle(order)
    return [(rng.randint(0, max_gap), fault) for fault in order]


# Faults a retry can outlast that cost no waiting: a flaky server at test speed.
QUICK = ["truncated", "not_json", "html", "choices_empty", "choices_null", "message_null", "content_missing", "drop",
         "429", "502", "503", "504"]


def flaky_schedule(seed: int, rate: float = 2 / 3, length: int = 5000, faults: list[str] | None = None,
                   ) -> list[tuple[int, str]]:
    """A server failing each chat request with probability `rate` (a seeded draw per request, the
    fault drawn from `faults`, QUICK by default), for `length` faults: [(clean requests first, fault)]."""
    rng = random.Random(seed)
    out, clean = [], 0
    while len(out) < length:
        if rng.random() < rate:
            out.append((clean, rng.choice(faults or QUICK)))
            clean = 0
        else:
            clean += 1
    return out


def expected_retries(proxy: FaultProxy) -> Counter:
    """The retries a client should count, by cause: one per fault the proxy injected, and one
    timeout per reply the client stopped waiting for."""
    return Counter(CAUSE[fault] for _, fault in proxy.injected) + Counter({"timeout": len(proxy.hangups)})


class FaultProxy:
    """The proxy server; a context manager that serves on a thread until exit or `lifetime`.

    Args:
        upstream: base URL of the real server (`http://127.0.0.1:PORT/v1`).
        schedule: [(clean chat requests first, fault)] consumed in order (`seeded_schedule`).
        api_key: the key clients must present (401 otherwise); upstream_key: the key forwarded
            (default: the client's own).
        echo_headers: error bodies quote the request's headers, as some servers do (secret tests).
        stall_s: how long a `stall` keeps the connection silent (longer than the client's timeout),
            and a `trickle` trickles.
        retry_after: the Retry-After of `429_retry_after`; `429_retry_after_long` sends 3600.
        max_faults_per_request: a request (by body) is faulted at most this often, so the
            client's retries always suffice; a later arrival takes the fault instead.
        lifetime: seconds after which the proxy shuts down on its own.
    """

    def __init__(self, upstream: str, *, schedule: list[tuple[int, str]] | None = None, api_key: str | None = None,
                 upstream_key: str | None = None, echo_headers: bool = False, stall_s: float = 3.0,
                 retry_after: float = 1.0, max_faults_per_request: int = 2, lifetime: float = 900.0):
        self.upstream = urllib.parse.urlsplit(upstream)
        self.schedule = list(schedule or [])
        self.api_key, self.upstream_key = api_key, upstream_key
        self.echo_headers, self.stall_s, self.retry_after = echo_headers, stall_s, retry_after
        self.max_faults_per_request, self.lifetime = max_faults_per_request, lifetime
        self.arrivals = 0  # chat requests received
        self.injected: list[tuple[int, str]] = []  # (arrival, fault)
        self.hangups: list[int] = []  # arrivals whose client was gone before its reply
        self.forwarded = 0
        self.busted = 0  # requests of our own between two with the same messages (module doc)
        self._clean_before_next = self.schedule[0][0] if self.schedule else 0
        self._faulted: Counter = Counter()  # request body hash -> faults injected
        self._last_messages: object = None
        self._lock = threading.Lock()  # the counters above
        self._upstream = threading.Lock()  # one forwarded request at a time
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._threads: list[threading.Thread] = []

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}{self.upstream.path}"

    def __enter__(self) -> FaultProxy:
        serve = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        watchdog = threading.Timer(self.lifetime, self._server.shutdown)
        watchdog.daemon = True
        self._threads = [serve, watchdog]
        serve.start()
        watchdog.start()
        return self

    def __exit__(self, *exc) -> None:
        self._threads[1].cancel()
        self._server.shutdown()
        self._server.server_close()

    @property
    def pending(self) -> list[str]:
        """Scheduled faults not injected yet."""
        return [fault for _, fault in self.schedule]

    def next_fault(self, body: bytes) -> str | None:
        """The fault for this chat request, if the schedule says so (thread-safe)."""
        key = hashlib.sha256(body).hexdigest()
        with self._lock:
            self.arrivals += 1
            if not self.schedule:
                return None
            if self._clean_before_next > 0 or self._faulted[key] >= self.max_faults_per_request:
                self._clean_before_next -= 1
                return None
            _, fault = self.schedule.pop(0)
            self._clean_before_next = self.schedule[0][0] if self.schedule else 0
            self._faulted[key] += 1
            self.injected.append((self.arrivals, fault))
            return fault

    def gone_before_reply(self, fault: str | None) -> None:
        """The client hung up before its reply (it timed out, or was killed): it will count a
        timeout, not `fault`, which goes back to the head of the schedule."""
        with self._lock:
            self.hangups.append(self.arrivals)
            if fault is not None:
                self.injected.pop(next(i for i in range(len(self.injected) - 1, -1, -1)
                                       if self.injected[i][1] == fault))
                self.schedule.insert(0, (0, fault))
                self._clean_before_next = 0


def _handler(proxy: FaultProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        timeout = 60  # an idle client connection is dropped, so no thread lingers forever

        def log_message(self, format, *args):
            pass

        def do_GET(self):
            self._handle(b"")

        def do_POST(self):
            self._handle(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

        def _handle(self, body: bytes) -> None:
            if proxy.api_key is not None and self.headers.get("Authorization") != f"Bearer {proxy.api_key}":
                return self._error(401, "invalid api key")
            chat = self.command == "POST" and self.path.endswith(CHAT)
            fault = proxy.next_fault(body) if chat else None
            if fault is None or fault in ("truncated", "drop"):
                with proxy._upstream:  # one at a time, as llama.cpp serves them anyway
                    if self._client_gone():  # a killed or timed-out client: do not make the server wait
                        proxy.gone_before_reply(fault)
                        return self._hang_up()
                    if chat:
                        self._bust_repeat(body)
                    status, headers, reply = self._forward(body)
                if self._client_gone():  # it timed out while the server answered: it saw no fault either
                    proxy.gone_before_reply(fault)
                    return self._hang_up()
                if fault is None or status != 200:
                    return self._send(status, reply, headers.get("Content-Type", "application/json"))
                return self._truncated(reply) if fault == "truncated" else self._drop(reply)
            return getattr(self, "_fault_" + fault.replace("429_retry_after_long", "429_long"))()

        # --- forwarding -------------------------------------------------------------------
        def _forward(self, body: bytes, path: str | None = None) -> tuple[int, dict, bytes]:
            conn = http.client.HTTPConnection(proxy.upstream.hostname, proxy.upstream.port, timeout=300)
            headers = {"Content-Type": self.headers.get("Content-Type", "application/json")}
            if proxy.upstream_key:
                headers["Authorization"] = f"Bearer {proxy.upstream_key}"
            elif self.headers.get("Authorization"):
                headers["Authorization"] = self.headers["Authorization"]
            try:
                conn.request("POST" if path else self.command, path or self.path, body=body or None, headers=headers)
                resp = conn.getresponse()
                data = resp.read()
                with proxy._lock:
                    proxy.forwarded += 1
                return resp.status, dict(resp.getheaders()), data
            finally:
                conn.close()

        def _bust_repeat(self, body: bytes) -> None:
            """Between two requests with the same messages, send a different one-token request."""
            try:
                messages = json.loads(body).get("messages")
            except (ValueError, AttributeError):
                return
            if messages == proxy._last_messages:
                buster = {"model": "x", "messages": [{"role": "user", "content": "ok"}], "max_tokens": 1,
                          "temperature": 0.0}
                self._forward(json.dumps(buster).encode(), self.path)
                proxy.busted += 1
            proxy._last_messages = messages

        def _client_gone(self) -> bool:
            """Whether the client closed its connection while we waited (it timed out)."""
            try:
                readable, _, _ = select.select([self.connection], [], [], 0)
                return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
            except OSError:
                return True

        # --- replies ----------------------------------------------------------------------
        def _send(self, status: int, body: bytes, ctype: str = "application/json", extra: dict | None = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            for k, v in (extra or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(body)
            self.wfile.flush()

        def _error(self, status: int, message: str, extra: dict | None = None) -> None:
            if proxy.echo_headers:  # like servers that quote the request back in their errors
                message += "; request headers: " + "; ".join(f"{k}: {v}" for k, v in self.headers.items())
            body = json.dumps({"error": {"message": message, "type": "proxy_fault", "code": status}}).encode()
            self._send(status, body, extra=extra)

        def _json(self, payload: dict) -> None:
            self._send(200, json.dumps({"id": "fault", "object": "chat.completion", "model": "x", **payload}).encode())

        def _truncated(self, reply: bytes) -> None:
            self._send(200, reply[: len(reply) // 2])

        def _drop(self, reply: bytes) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply[: len(reply) // 2])
            self.wfile.flush()
            self._hang_up()

        def _hang_up(self) -> None:
            self.close_connection = True
            try:
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

        def _fault_not_json(self):
            self._send(200, b"upstream error: try again later", "text/plain")

        def _fault_html(self):
            self._send(200, b"<html><head><title>Error</title></head><body><h1>Bad Gateway</h1></body></html>",
                       "text/html")

        def _fault_choices_empty(self):
            self._json({"choices": []})

        def _fault_choices_empty_billed(self):
            self._json({"choices": [], "usage": BILLED})

        def _fault_choices_null(self):
            self._json({"choices": None})

        def _fault_message_null(self):
            self._json({"choices": [{"index": 0, "message": None, "finish_reason": "stop"}]})

        def _fault_content_missing(self):
            self._json({"choices": [{"index": 0, "message": {"role": "assistant"}, "finish_reason": "stop"}]})

        def _fault_stall(self):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "1000")
            self.end_headers()
            self.wfile.flush()
            time.sleep(proxy.stall_s)
            self._hang_up()

        def _fault_trickle(self):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "1000")
            self.end_headers()
            deadline = time.monotonic() + proxy.stall_s
            try:
                while time.monotonic() < deadline:
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.2)
            except OSError:  # the client gave up on it
                pass
            self._hang_up()

        def _fault_429(self):
            self._error(429, "rate limited")

        def _fault_429_retry_after(self):
            self._error(429, "rate limited", {"Retry-After": f"{proxy.retry_after:g}"})

        def _fault_429_long(self):
            self._error(429, "rate limited", {"Retry-After": "3600"})

        def _fault_502(self):
            self._send(502, b"<html><body><h1>502 Bad Gateway</h1></body></html>", "text/html")

        def _fault_503(self):
            self._error(503, "overloaded")

        def _fault_504(self):
            self._error(504, "upstream timed out")

    return Handler
