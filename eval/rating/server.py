"""The rating server: the standard library's threading HTTP server over the study's database.

Two routes, both behind a rater's token (the capability in their link; there are no accounts):

    GET  /r/<token>        the rater's page: their queue, in their order, with their ratings
    POST /r/<token>/rate   {"story": id, "submission": id, "ratings": {aspect: value}} -> JSON

Every request is checked completely before anything is written, and refused with a status that
says why and a one-line JSON `error`: 401 no token, 403 a token that is not a rater's (or a
request from another origin), 404 a story outside the rater's queue or an unknown path, 405 a
wrong method, 408 a body that does not arrive within `TIMEOUT`, 411/413 a body without a length
or over `MAX_BODY`, 415 not JSON, 400 a body that is not the object above (or a request the
standard library cannot parse), 422 an aspect or a score outside the study's, 409 a submission
id reused with other content, 500 anything unforeseen (the traceback goes to the server's log,
never to the client). A refused request leaves the database as it was. Each request opens its
own connection; SQLite serialises the writers (`eval.rating.store`). A connection idle for
`TIMEOUT` is closed, so clients that connect and send nothing cannot hold threads for ever, and
at most `MAX_CONNECTIONS` are served at once (a thread each): one more is answered 503 with a
Retry-After at once and closed, so a burst of connections cannot exhaust the server's threads.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from eval.rating import store
from eval.rating.page import content_security_policy, render_page
from eval.rating.study import rater_page_data

log = logging.getLogger(__name__)

MAX_BODY = 16 * 1024  # bytes: a submission is a few hundred
TIMEOUT = 60.0  # seconds a connection may stay silent (between requests, or in the middle of a body)
MAX_CONNECTIONS = 64  # served at once: a study's raters, each a keep-alive connection or two, with room
ROUTE = re.compile(r"^/r/(?P<token>[^/]*)(?P<rate>/rate)?/?$")
TOKEN = re.compile(r"^[A-Za-z0-9_-]{16,64}$")
SUBMISSION = re.compile(r"^[A-Za-z0-9-]{8,64}$")
SECURITY_HEADERS = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
                    "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY"}
# The client left (reset, closed) or went silent past TIMEOUT while the server was reading or writing.
CLIENT_GONE = (ConnectionError, TimeoutError)
# What the log shows of a request: control characters escaped (a request line could otherwise write
# terminal escape sequences or fake lines into the operator's terminal), as the standard library's
# own log_message does.
_CONTROL = str.maketrans({c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0))})


class Refused(Exception):
    """A request refused with an HTTP status and a message; nothing was written."""

    def __init__(self, status: HTTPStatus, message: str):
        super().__init__(message)
        self.status = status


class RatingServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], db: str | Path, meta: dict, max_connections: int = MAX_CONNECTIONS):
        self.db, self.meta = str(db), meta
        self.max_connections = max_connections
        self.slots = threading.BoundedSemaphore(max_connections)
        super().__init__(address, Handler)

    def process_request(self, request, client_address) -> None:
        """A thread for the connection while a slot is free; else 503 at once, from this thread."""
        if not self.slots.acquire(blocking=False):
            log.warning("%s: %d connections already served; answered 503", client_address[0], self.max_connections)
            busy_reply(request)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:  # no thread started: nothing will release the slot
            self.slots.release()
            raise

    def process_request_thread(self, request, client_address) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


def busy_reply(request) -> None:
    """503 in our refusals' shape, written without reading the request (its client may never send
    one); a client that does not take it within a second is left to the close."""
    body = json.dumps({"error": "the server is busy: too many connections; try again in a few seconds"}).encode()
    headers = {**SECURITY_HEADERS, "Content-Type": "application/json", "Content-Length": str(len(body)),
               "Retry-After": "5", "Connection": "close"}
    head = "HTTP/1.1 503 Service Unavailable\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    try:
        request.settimeout(1.0)
        request.sendall(head.encode("latin-1") + body)
    except OSError:
        pass  # gone already


class Handler(BaseHTTPRequestHandler):
    server: RatingServer
    protocol_version = "HTTP/1.1"
    timeout = TIMEOUT  # the socket's: StreamRequestHandler.setup applies it

    def version_string(self) -> str:  # the Server header: not the Python version
        return "review-lab-rating"

    def do_GET(self) -> None:  # noqa: N802 - the standard library's name
        self._handle(self._page)

    def do_POST(self) -> None:  # noqa: N802
        self._handle(self._rate)

    def do_PUT(self) -> None:  # noqa: N802
        self._handle(lambda: self._refuse_method())

    do_HEAD = do_DELETE = do_PATCH = do_OPTIONS = do_PUT

    def _refuse_method(self) -> None:
        raise Refused(HTTPStatus.METHOD_NOT_ALLOWED, f"{self.command} is not allowed here")

    def _handle(self, action) -> None:
        try:
            try:
                action()
            except Refused as exc:
                self._error(exc.status, str(exc))
            except CLIENT_GONE:
                raise
            except Exception:  # a bug, a database gone or locked: a status, the traceback only in the log
                log.exception("%s %s failed", self.command, _redacted(self.path))
                self._error(HTTPStatus.INTERNAL_SERVER_ERROR, "internal error: the server could not answer")
        except CLIENT_GONE:  # nobody left to answer
            self.close_connection = True

    def _error(self, status: HTTPStatus | int, message: str) -> None:
        self.close_connection = True  # an unread body must not be taken for the next request
        self._send(status, json.dumps({"error": message}).encode(), "application/json")

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The standard library's refusals (a malformed request line, too many headers, an unknown
        method) in the same shape as ours: one-line JSON, the security headers, no HTML."""
        self.log_error("code %d, message %s", code, message)
        if self.request_version == "HTTP/0.9":  # a request line it could not parse: a status line all the same
            self.request_version = "HTTP/1.0"
        try:
            self._error(code, message or HTTPStatus(code).phrase)
        except CLIENT_GONE:
            self.close_connection = True

    def _rater(self, want_rate: bool) -> str:
        match = ROUTE.match(self.path.split("?", 1)[0])
        if not match:
            raise Refused(HTTPStatus.NOT_FOUND, "no such page: open the link you were given")
        if bool(match["rate"]) != want_rate:
            self._refuse_method()
        token = match["token"]
        if not token:
            raise Refused(HTTPStatus.UNAUTHORIZED, "missing token: open the link you were given")
        origin = self.headers.get("Origin")
        if origin and origin != f"http://{self.headers.get('Host')}":
            raise Refused(HTTPStatus.FORBIDDEN, "request from another origin")
        conn = store.connect(self.server.db)
        try:
            rater = store.rater_by_token(conn, token) if TOKEN.match(token) else None
        finally:
            conn.close()
        if rater is None:
            raise Refused(HTTPStatus.FORBIDDEN, "unknown token: this link is not a rater's")
        return rater

    def _page(self) -> None:
        rater = self._rater(want_rate=False)
        conn = store.connect(self.server.db)
        try:
            body = render_page(rater_page_data(conn, self.server.meta, rater)).encode("utf-8")
        finally:
            conn.close()
        self._send(HTTPStatus.OK, body, "text/html; charset=utf-8",
                   {"Content-Security-Policy": content_security_policy()})

    def _rate(self) -> None:
        rater = self._rater(want_rate=True)
        payload = self._json_body()
        sid, submission, values = self._validate(payload)
        conn = store.connect(self.server.db)
        try:
            if not store.in_queue(conn, rater, sid):  # the id is echoed only as far as an id goes
                raise Refused(HTTPStatus.NOT_FOUND, f"story {sid[:40]!r} is not in your study")
            try:
                done = store.submit(conn, rater, sid, submission, values, len(self.server.meta["aspects"]))
            except store.Conflict as exc:
                raise Refused(HTTPStatus.CONFLICT, str(exc)) from None
        finally:
            conn.close()
        body = {"saved": True, "replayed": done.replayed, "rated": done.rated, "total": done.total}
        self._send(HTTPStatus.OK, json.dumps(body).encode(), "application/json")

    def _json_body(self) -> object:
        if self.headers.get_content_type() != "application/json":
            raise Refused(HTTPStatus.UNSUPPORTED_MEDIA_TYPE, "send the rating as application/json")
        length = (self.headers.get("Content-Length") or "").strip()
        # ASCII digits only: str.isdigit() also takes '²', and int() refuses more than 4300 digits
        if not re.fullmatch(r"[0-9]+", length):
            raise Refused(HTTPStatus.LENGTH_REQUIRED, "a Content-Length is required")
        length = length.lstrip("0") or "0"
        if len(length) > len(str(MAX_BODY)) or int(length) > MAX_BODY:
            raise Refused(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"body over {MAX_BODY} bytes")
        try:
            raw = self.rfile.read(int(length))
        except TimeoutError:
            raise Refused(HTTPStatus.REQUEST_TIMEOUT, f"the body did not arrive within {self.timeout:g} s") from None
        try:
            return json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):  # RecursionError: nested too deep
            raise Refused(HTTPStatus.BAD_REQUEST, "the body is not JSON") from None

    def _validate(self, payload: object) -> tuple[str, str, dict[str, int]]:
        """(story, submission, {aspect: value}) of a well-formed rating of every aspect, in range."""
        if not isinstance(payload, dict) or set(payload) != {"story", "submission", "ratings"}:
            raise Refused(HTTPStatus.BAD_REQUEST, "expected an object with story, submission and ratings")
        sid, submission, values = payload["story"], payload["submission"], payload["ratings"]
        if not isinstance(sid, str) or not isinstance(submission, str) or not SUBMISSION.match(submission):
            raise Refused(HTTPStatus.BAD_REQUEST, "story must be a text and submission 8-64 letters, digits or '-'")
        meta = self.server.meta
        if not isinstance(values, dict) or set(values) != set(meta["aspects"]):
            raise Refused(HTTPStatus.UNPROCESSABLE_ENTITY, f"rate exactly these aspects: {', '.join(meta['aspects'])}")
        low, high = meta["scale"]
        for aspect, value in values.items():
            if type(value) is not int or not low <= value <= high:
                raise Refused(HTTPStatus.UNPROCESSABLE_ENTITY,
                              f"{aspect}: a score is a whole number from {low} to {high}, got {value!r}")
        return sid, submission, values

    def _send(self, status: HTTPStatus, body: bytes, content_type: str, headers: dict | None = None) -> None:
        self.send_response(status)
        for key, value in {**SECURITY_HEADERS, "Content-Type": content_type, "Content-Length": str(len(body)),
                           **(headers or {})}.items():
            self.send_header(key, value)
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":  # a reply to HEAD has headers only
            self.wfile.write(body)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 - the standard library's signature
        log.info("%s %s", self.address_string(), _redacted(format % args))


def _redacted(text: str) -> str:
    """`text` fit for the log: tokens are capabilities, never shown; control characters escaped."""
    return re.sub(r"/r/[^/ ]+", "/r/<token>", text).translate(_CONTROL)
