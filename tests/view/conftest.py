"""A real browser for the viewer's tests: Debian's Chromium driven by Playwright for Python.

Playwright's own browser download cannot work here, so the system Chromium is launched by its
path (`make test` installs it; the tests skip, saying so, only when it is absent). Each page is
opened from its file, with every other request recorded and aborted, and with its console
messages, page errors and dialogs recorded, so a test can assert that nothing ran or loaded.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import pytest

CHROMIUM = Path(os.environ.get("CHROMIUM", "/usr/bin/chromium"))
# No background traffic: the machine's closed network refuses it, noisily.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@dataclass
class Opened:
    """A page and everything it did that it should not have."""

    page: object
    url: str
    console: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    def assert_clean(self) -> None:
        assert self.dialogs == [], self.dialogs
        assert self.errors == [], self.errors
        assert [c for c in self.console if c.startswith(("error", "warning"))] == [], self.console
        assert [r for r in self.requests if r != self.url] == [], self.requests

    def rows(self) -> list[str]:
        """The prompt ids of the overview's rows, in order."""
        return self.page.locator("#prompt-rows tr td:first-child").all_inner_texts()


# Module scope: while Playwright's sync API is up, its event loop runs in this thread and
# `asyncio.run` (the model backends) refuses to start here, so it must not outlive a module.
@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.is_file():
        pytest.skip(f"Chromium not found at {CHROMIUM} (`make browser` installs Debian's chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        # Playwright gives each launch a fresh, empty user-data dir of its own.
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=FLAGS)
        yield chromium
        chromium.close()


@pytest.fixture
def open_view(browser):
    """open_view(path) -> Opened: the viewer file loaded and rendered in a new page."""
    opened: list[Opened] = []

    def _open(path: Path) -> Opened:
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        o = Opened(page, Path(path).resolve().as_uri())
        page.on("console", lambda m: o.console.append(f"{m.type}: {m.text}"))
        page.on("pageerror", lambda e: o.errors.append(str(e)))
        page.on("dialog", lambda d: (o.dialogs.append(d.message), d.dismiss()))
        page.on("request", lambda r: o.requests.append(r.url))
        page.route("**/*", lambda route: route.continue_() if route.request.url == o.url else route.abort())
        page.goto(o.url)
        page.wait_for_selector("html[data-render-ms]")
        opened.append(o)
        return o

    yield _open
    for o in opened:
        o.page.close()
