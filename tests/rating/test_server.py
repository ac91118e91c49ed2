"""The rating server over a real socket: blind pages, and every hostile request refused with its
status and the database left exactly as it was; replays and simultaneous submissions."""

from __future__ import annotations

import http.client
import json
import socket
import sqlite3
import threading
from urllib.parse import urlsplit

import pytest

from eval.rating import store
from eval.rating.cli import main
from eval.rating.server import Handler, RatingServer
from eval.rating.study import add_raters, open_study
from generate.common.errors import UsageError
from tests.rating.conftest import ASPECTS, HOSTILE, SECRET_NAMES, page_data, start_server, write_study_runs


def request(base: str, method: str, path: str, body: bytes | None = None, headers: dict | None = None):
    """(status, parsed JSON or text, headers) of one request."""
    conn = http.client.HTTPConnection(urlsplit(base).netloc, timeout=10)
    conn.request(method, path, body=body, headers=headers or {})
    reply = conn.getresponse()
    data = reply.read().decode("utf-8")
    conn.close()
    is_json = reply.getheader("Content-Type", "").startswith("application/json")
    return reply.status, json.loads(data) if is_json else data, reply


def post(base, token, payload, raw: bytes | None = None, headers: dict | None = None):
    body = raw if raw is not None else json.dumps(payload).encode()
    return request(base, "POST", f"/r/{token}/rate", body, {"Content-Type": "application/json", **(headers or {})})


def dump(db) -> list:
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT * FROM ratings ORDER BY id").fetchall() + conn.execute("SELECT * FROM meta").fetchall()
    conn.close()
    return rows


def stories_of(base, token) -> list[str]:
    return [s["id"] for s in page_data(request(base, "GET", f"/r/{token}")[1])["stories"]]


def rating(sid, submission="sub-0001", value=3):
    return {"story": sid, "submission": submission, "ratings": {a: value for a in ASPECTS}}


def test_a_page_is_blind_and_its_own_rater_s(served):
    base, _, _, tokens = served
    status, html, reply = request(base, "GET", f"/r/{tokens['ann']}")
    assert status == 200
    assert "script-src 'sha256-" in reply.getheader("Content-Security-Policy")
    assert "connect-src 'self'" in reply.getheader("Content-Security-Policy")
    data = page_data(html)
    for name in SECRET_NAMES + ["voice-01", "agent-a", "judge", "principle"]:
        assert name not in json.dumps(data), name
    assert len(data["stories"]) == 3 and all(s["id"].startswith("s") and len(s["id"]) == 13 for s in data["stories"])
    assert [a["key"] for a in data["aspects"]] == ["concepts", "logic", "characters", "world_building", "ethics"]
    assert data["aspects"][0]["anchors"][0][0] == 5 and data["aspects"][0]["anchors"][-1][0] == 0
    # each rater has the same stories in an order of their own, the same on every visit
    assert sorted(stories_of(base, tokens["bob"])) == sorted(stories_of(base, tokens["ann"]))
    assert stories_of(base, tokens["ann"]) == stories_of(base, tokens["ann"])


def test_every_hostile_request_is_refused_and_changes_nothing(served):
    base, db, _, tokens = served
    sid = stories_of(base, tokens["ann"])[0]
    before = dump(db)
    token = tokens["ann"]
    cases = [
        (post(base, "", rating(sid)), 401),                                    # missing token
        (post(base, "A" * 32, rating(sid)), 403),                              # forged token
        (post(base, token[:-1] + ("a" if token[-1] != "a" else "b"), rating(sid)), 403),
        (request(base, "GET", "/r/not-a-rater-token-at-all"), 403),
        (post(base, token, rating(sid, value=6)), 422),                        # out of range
        (post(base, token, rating(sid, value=-1)), 422),
        (post(base, token, rating(sid, value=2.5)), 422),
        (post(base, token, rating(sid, value=True)), 422),
        (post(base, token, {**rating(sid), "ratings": {"concepts": 3}}), 422),  # not every aspect
        (post(base, token, {**rating(sid), "ratings": {**rating(sid)["ratings"], "plot": 3}}), 422),
        (post(base, token, rating("s000000000000")), 404),                     # story outside the study
        (post(base, token, rating("frameworkq/voice-01/agent-a")), 404),
        (post(base, token, None, raw=b"x" * 20000), 413),                      # oversized
        (post(base, token, None, raw=b'{"story": "'), 400),                    # malformed
        (post(base, token, None, raw=b"\xff\xfe"), 400),
        (post(base, token, [1, 2]), 400),
        (post(base, token, {**rating(sid), "extra": 1}), 400),
        (post(base, token, {**rating(sid), "submission": "<script>"}), 400),
        (request(base, "POST", f"/r/{token}/rate", json.dumps(rating(sid)).encode(),
                 {"Content-Type": "text/plain"}), 415),
        (post(base, token, rating(sid), headers={"Origin": "http://evil.example"}), 403),
        (request(base, "DELETE", f"/r/{token}/rate"), 405),
        (request(base, "GET", f"/r/{token}/rate"), 405),
        (request(base, "GET", "/"), 404),
    ]
    for (status, body, _), expected in cases:
        assert status == expected, (expected, body)
        assert isinstance(body, dict) and body["error"], body
    assert raw_without_length(base, token) == 411
    assert dump(db) == before


def raw_without_length(base: str, token: str) -> int:
    """A POST with no Content-Length (http.client always sends one)."""
    with socket.create_connection(urlsplit(base).netloc.split(":"), timeout=10) as s:
        s.sendall(f"POST /r/{token}/rate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\r\n{{}}".encode())
        reply = b""
        while chunk := s.recv(4096):  # the server closes after a refusal
            reply += chunk
        return int(reply.split()[1])


def test_a_replay_changes_nothing_and_a_reused_id_is_refused(served):
    base, db, _, tokens = served
    sid = stories_of(base, tokens["ann"])[0]
    first = post(base, tokens["ann"], rating(sid, "sub-aaaa-1", 2))
    assert first[0] == 200 and first[1] == {"saved": True, "replayed": False, "rated": 1, "total": 3}
    after = dump(db)
    again = post(base, tokens["ann"], rating(sid, "sub-aaaa-1", 2))
    assert again[0] == 200 and again[1]["replayed"] is True
    assert post(base, tokens["ann"], rating(sid, "sub-aaaa-1", 4))[0] == 409
    assert dump(db) == after
    # a new submission changes the rating; the history keeps both and the last counts
    assert post(base, tokens["ann"], rating(sid, "sub-aaaa-2", 4))[0] == 200
    conn = store.connect(db)
    assert {r["value"] for r in store.current(conn, "ann")} == {4}
    assert conn.execute("SELECT COUNT(*) FROM ratings").fetchone()[0] == 10
    conn.close()


def test_two_submissions_at_once_leave_exactly_one_current_rating(served):
    base, db, _, tokens = served
    sid = stories_of(base, tokens["bob"])[1]
    for round_ in range(3):
        barrier, statuses = threading.Barrier(2), []

        def send(value, tag):
            barrier.wait()
            statuses.append(post(base, tokens["bob"], rating(sid, f"sub-{round_}-{tag}-at-once", value))[0])

        threads = [threading.Thread(target=send, args=(v, t)) for v, t in ((1, "x"), (5, "y"))]
        [t.start() for t in threads]
        [t.join() for t in threads]
        assert statuses == [200, 200]
        conn = store.connect(db)
        current = store.current(conn, "bob")
        assert len(current) == 5 and len({r["value"] for r in current}) == 1  # one submission won, whole
        conn.close()


def test_a_study_resumes_and_refuses_other_runs_or_modes(study, tmp_path):
    db, meta, tokens = study
    conn, again = open_study(db, [], None)
    assert again == meta
    conn.close()
    with pytest.raises(UsageError, match="verdict"):
        open_study(db, [], "verdict")
    other = write_study_runs(tmp_path / "other")
    with pytest.raises(UsageError, match="other runs"):
        open_study(db, other, None)
    with pytest.raises(UsageError, match="no study yet"):
        open_study(tmp_path / "empty.sqlite", [], None)
    assert not (tmp_path / "empty.sqlite").exists()


def test_a_port_in_use_is_one_error(study):
    db, _, _ = study
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(UsageError, match="cannot listen on 127.0.0.1"):
            main(["serve", "--db", str(db), "--port", str(taken.getsockname()[1])])


def test_links_of_a_study_served_on_every_interface_name_this_machine(study):
    """127.0.0.1 in a link sent to a rater on another machine points at the rater's own machine."""
    db, _, _ = study
    proc, links = start_server(["--db", str(db), "--host", "0.0.0.0"])
    try:
        assert links and all(urlsplit(link).hostname == socket.gethostname().lower() for link in links.values())
    finally:
        proc.terminate()
        proc.wait()


def raw_exchange(base: str, data: bytes, timeout: float = 10) -> bytes:
    """Everything the server sends back for `data`, until it closes the connection."""
    with socket.create_connection(urlsplit(base).netloc.split(":"), timeout=timeout) as s:
        s.sendall(data)
        reply = b""
        while chunk := s.recv(65536):
            reply += chunk
        return reply


def parse_reply(reply: bytes) -> tuple[int, dict, bytes]:
    """(status, headers, body) of one raw HTTP reply."""
    head, _, body = reply.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, body


def raw_post(token: str, body: bytes, length: str | None = None) -> bytes:
    return (f"POST /r/{token}/rate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body) if length is None else length}\r\n\r\n").encode("latin-1") + body


def test_requests_that_used_to_drop_the_connection_get_a_json_status(served):
    """Each of these once raised inside the handler: no reply at all, a traceback on the server."""
    base, db, _, tokens = served
    before = dump(db)
    token = tokens["ann"]
    cases = [
        (raw_post(token, b"[" * 15000), 400),                    # nested past the recursion limit
        (raw_post(token, b"{}", length="\xb2"), 411),            # '²'.isdigit() is True, int('²') fails
        (raw_post(token, b"{}", length="9" * 5000), 413),        # int() refuses over 4300 digits
        (b"TRACE / HTTP/1.1\r\nHost: x\r\n\r\n", 501),           # the standard library's refusals, as JSON
        (b"GET /r/x HTTP/1.1 extra\r\nHost: x\r\n\r\n", 400),
    ]
    for data, expected in cases:
        status, headers, body = parse_reply(raw_exchange(base, data))
        assert status == expected, (data[:60], status, body)
        assert headers["content-type"] == "application/json" and json.loads(body)["error"], body
        assert headers["x-content-type-options"] == "nosniff"
        assert "python" not in headers["server"].lower()
    # HEAD is a method like DELETE: 405, and a reply to HEAD has no body
    status, headers, body = parse_reply(raw_exchange(base, f"HEAD /r/{token} HTTP/1.1\r\nHost: x\r\n\r\n".encode()))
    assert status == 405 and body == b"" and int(headers["content-length"]) > 0
    # a story id is echoed back only as far as an id goes, not the whole 16 KiB a body may hold
    status, body, _ = post(base, token, rating("s" * 15000))
    assert status == 404 and len(body["error"]) < 100
    assert dump(db) == before


def test_a_silent_client_is_dropped_and_holds_no_thread(served, monkeypatch):
    """A body that never arrives is a 408; a connection that sends nothing is closed."""
    assert 0 < Handler.timeout <= 300  # the standard library's default is None: wait for ever
    monkeypatch.setattr("eval.rating.server.Handler.timeout", 0.5)
    base, db, _, tokens = served
    before = dump(db)
    status, headers, body = parse_reply(raw_exchange(base, raw_post(tokens["ann"], b"{}", length="100")))
    assert status == 408 and json.loads(body)["error"]
    assert raw_exchange(base, b"") == b""  # connected, then silent: the server hangs up
    assert dump(db) == before


def test_an_unforeseen_error_is_a_500_and_its_traceback_stays_in_the_log(served, monkeypatch, caplog):
    base, db, _, tokens = served
    sid = stories_of(base, tokens["ann"])[0]

    def locked(*args, **kwargs):
        raise sqlite3.OperationalError("database is locked")

    monkeypatch.setattr(store, "submit", locked)
    with caplog.at_level("ERROR", logger="eval.rating.server"):
        status, body, _ = post(base, tokens["ann"], rating(sid))
    assert status == 500 and body == {"error": "internal error: the server could not answer"}
    assert any("database is locked" in r.exc_text for r in caplog.records if r.exc_text)
    assert all(tokens["ann"] not in r.getMessage() for r in caplog.records)


def test_the_log_escapes_control_characters_and_never_shows_a_token(served, caplog):
    base, _, _, tokens = served
    with caplog.at_level("INFO", logger="eval.rating.server"):
        raw_exchange(base, b"GET /\x1b[2J\x1b[31mfake HTTP/1.1\r\nHost: x\r\n\r\n")
        request(base, "GET", f"/r/{tokens['ann']}")
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) >= 2 and all(tokens["ann"] not in m for m in messages)
    assert all("\x1b" not in m for m in messages) and any("\\x1b" in m for m in messages)


def test_the_page_carries_hostile_story_text_as_inert_json(served):
    base, _, _, tokens = served
    status, html, _ = request(base, "GET", f"/r/{tokens['ann']}")
    assert status == 200
    assert "<script>alert" not in html and "<img src=x" not in html and html.count("</script>") == 2
    assert any(HOSTILE.split(" <a")[0] in s["text"] for s in page_data(html)["stories"])


def test_many_raters_saving_at_once_lose_nothing(study):
    """Eight raters, each on one keep-alive connection, 20 submissions each, all at the same time."""
    db, meta, _ = study
    conn, _ = open_study(db, [], None)
    names = [f"rater-{i}" for i in range(8)]
    tokens = {r.name: r.token for r in add_raters(conn, meta, names) if r.name in names}
    sids = [row["sid"] for row in conn.execute("SELECT sid FROM stories ORDER BY position")]
    conn.close()
    server = RatingServer(("127.0.0.1", 0), db, meta)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    statuses: list[int] = []
    barrier = threading.Barrier(len(tokens))

    def rate_all(name: str) -> None:
        client = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=30)
        barrier.wait()
        for i in range(20):
            body = json.dumps(rating(sids[i % len(sids)], f"{name}-sub-{i:03d}", i % 6))
            client.request("POST", f"/r/{tokens[name]}/rate", body, {"Content-Type": "application/json"})
            reply = client.getresponse()
            reply.read()
            statuses.append(reply.status)
        client.close()

    try:
        threads = [threading.Thread(target=rate_all, args=(name,)) for name in tokens]
        [t.start() for t in threads]
        [t.join() for t in threads]
    finally:
        server.shutdown()
        server.server_close()
    assert statuses == [200] * 160
    conn = store.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("SELECT COUNT(*) FROM ratings").fetchone()[0] == 160 * len(ASPECTS)
    for name in tokens:  # each story's current rating is the rater's last submission of it
        current = {(r["sid"], r["aspect"]): r["value"] for r in store.current(conn, name)}
        last = {sids[i % len(sids)]: i % 6 for i in range(20)}
        assert current == {(sid, a): v for sid, v in last.items() for a in ASPECTS}
    conn.close()


def test_connections_beyond_the_cap_get_503_at_once_and_a_freed_slot_serves_again(study):
    """Silent connections each hold a thread until TIMEOUT: past `max_connections` the server
    answers 503 without a thread (before, every connection got one, without bound)."""
    db, meta, tokens = study
    server = RatingServer(("127.0.0.1", 0), db, meta, max_connections=2)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        silent = [socket.create_connection(server.server_address, timeout=5) for _ in range(2)]
        status, body, reply = request(base, "GET", f"/r/{tokens['ann']}")
        assert status == 503 and "too many connections" in body["error"]
        assert reply.getheader("Retry-After") == "5" and reply.getheader("X-Frame-Options") == "DENY"
        silent.pop().close()  # its thread reads the end of the stream and gives its slot back
        for _ in range(100):
            if (status := request(base, "GET", f"/r/{tokens['ann']}")[0]) == 200:
                break
            threading.Event().wait(0.05)
        assert status == 200
    finally:
        [s.close() for s in silent]
        server.shutdown()
        server.server_close()
