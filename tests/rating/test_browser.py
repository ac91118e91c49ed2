"""The rating app in Debian's Chromium: two raters at once, a reload that resumes, a server killed
with SIGKILL between two submissions and restarted, hostile story text shown as text."""

from __future__ import annotations

import os
import re
import signal

import pytest
from playwright.sync_api import expect

from eval.rating import store
from eval.rubric import judged_text
from tests.rating.conftest import ASPECTS, HOSTILE, start_server, write_study_runs

pytestmark = pytest.mark.browser


class Rater:
    """One rater's page in its own browser context, with everything it did that it should not."""

    def __init__(self, browser, link: str, init_script: str | None = None):
        self.context = browser.new_context()
        if init_script:
            self.context.add_init_script(init_script)
        self.page = self.context.new_page()
        self.problems: list[str] = []
        self.page.on("pageerror", lambda e: self.problems.append(f"error: {e}"))
        self.page.on("dialog", lambda d: (self.problems.append(f"dialog: {d.message}"), d.dismiss()))
        self.page.on("request", lambda r: r.url.startswith(self.origin) or self.problems.append(f"request: {r.url}"))
        self.open(link)

    def open(self, link: str) -> None:
        self.origin = re.match(r"^http://[^/]+/", link)[0]  # the server's: the only place the page may reach
        self.page.goto(link)
        self.page.wait_for_selector("html[data-ready]")

    def progress(self) -> str:
        return self.page.locator("#progress").inner_text()

    def rate(self, value: int, done: int) -> None:
        """Rate the story on screen `value` on every aspect, save, wait until the server said saved."""
        for aspect in ASPECTS:
            self.page.check(f"input[name={aspect}][value='{value}']")
        with self.page.expect_response(lambda r: r.url.endswith("/rate")) as reply:
            self.page.click("#save")
        assert reply.value.status == 200
        expect(self.page.locator("#progress")).to_contain_text(f": {done} of")  # CSP: no string eval

    def texts(self) -> list[str]:
        out = []
        for i in range(self.page.locator("#queue button").count()):
            self.page.click(f"#queue button[data-index='{i}']")
            out.append(self.page.locator(".story-text").text_content())
        return out


def current(db) -> dict[str, dict[str, int]]:
    conn = store.connect(db)
    out: dict[str, dict[str, int]] = {}
    for r in store.current(conn):
        out.setdefault(r["rater"], {})[f"{r['sid']}:{r['aspect']}"] = r["value"]
    conn.close()
    return out


def test_two_raters_at_once_and_a_reload_resumes(browser, served):
    base, db, _, tokens = served
    ann, bob = (Rater(browser, f"{base}/r/{tokens[n]}") for n in ("ann", "bob"))
    assert ann.progress() == "ann: 0 of 3 rated" and bob.progress() == "bob: 0 of 3 rated"
    ann.rate(1, done=1)
    bob.rate(5, done=1)
    ann.rate(2, done=2)
    ann.open(f"{base}/r/{tokens['ann']}")  # leaves and comes back: resumes at her third story
    assert ann.progress() == "ann: 2 of 3 rated"
    assert ann.page.locator("#queue button[aria-current=true]").inner_text() == "3"
    bob.rate(4, done=2)
    ann.rate(3, done=3)
    bob.rate(3, done=3)
    ratings = current(db)
    assert sorted(ratings["ann"].values()) == [1] * 5 + [2] * 5 + [3] * 5
    assert sorted(ratings["bob"].values()) == [3] * 5 + [4] * 5 + [5] * 5
    # a changed rating replaces the old one; the page says it was saved before
    ann.page.click("#queue button[data-index='0']")
    assert ann.page.locator("#status").inner_text() == "Saved earlier"
    assert ann.page.locator("input[name=concepts][value='1']").is_checked()
    ann.rate(0, done=3)
    assert sorted(current(db)["ann"].values()) == [0] * 5 + [2] * 5 + [3] * 5
    assert judged_text(HOSTILE) in ann.texts()  # the hostile story, as text
    assert ann.page.locator(".story-text script, .story-text img").count() == 0
    assert ann.problems == [] and bob.problems == []


def test_a_killed_server_loses_no_submitted_rating(browser, tmp_path):
    db = tmp_path / "ratings.sqlite"
    proc, links = start_server([*write_study_runs(tmp_path / "runs"), "--db", str(db), "--rater", "ann", "--seed", "5"])
    try:
        ann = Rater(browser, links["ann"])
        ann.rate(4, done=1)
        os.kill(proc.pid, signal.SIGKILL)  # between two submissions
        proc.wait(timeout=10)
        for aspect in ASPECTS:
            ann.page.check(f"input[name={aspect}][value='2']")
        ann.page.click("#save")  # the server is gone: the page says so and keeps the choice
        ann.page.wait_for_selector("#status[data-state=error]")
        assert "Not saved" in ann.page.locator("#status").inner_text()
        proc, again = start_server(["--db", str(db)])  # resumes the study from the database alone
        assert list(again) == ["ann"] and again["ann"].split("/r/")[1] == links["ann"].split("/r/")[1]
        ann.open(again["ann"])
        assert ann.progress() == "ann: 1 of 3 rated"
        ann.rate(2, done=2)
        assert sorted(current(db)["ann"].values()) == [2] * 5 + [4] * 5
        assert ann.problems == []
    finally:
        proc.kill()
        proc.wait(timeout=10)


# What a plain-http origin other than localhost (a lab network, `--host 0.0.0.0`) lacks: the
# browser exposes crypto.randomUUID to secure contexts only.
INSECURE_CONTEXT = "delete Crypto.prototype.randomUUID;"


def test_saving_works_outside_a_secure_context(browser, served):
    base, db, _, tokens = served
    ann = Rater(browser, f"{base}/r/{tokens['ann']}", init_script=INSECURE_CONTEXT)
    assert ann.page.evaluate("typeof crypto.randomUUID") == "undefined"
    ann.rate(3, done=1)
    assert sorted(current(db)["ann"].values()) == [3] * 5
    assert ann.problems == []
