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
from eval.rating.study import open_study
from generate.common.errors import UsageError
from tests.rating.conftest import ASPECTS, SECRET_NAMES, page_data, start_server, write_study_runs


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
