"""A small evaluated study: three stories of two runs, served in-process or as a real process.

The stories' origins carry names no browser may see (`SECRET_NAMES`: run labels, framework,
writer model, story ids); one story is hostile markup, which must show as text.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from eval.rating.server import RatingServer
from eval.rating.study import add_raters, open_study
from tests.view.conftest import browser  # noqa: F401 - the viewer's Chromium fixture
from tests.view.runs import HOSTILE, score, story, write_run

ASPECTS = ["concepts", "logic", "characters", "world_building", "ethics"]
# judge score per story (same on every aspect but concepts, which varies for the hand computation)
JUDGE = {"voice-01": 2.0, "robot-01": 3.0, "mars-01": 4.0}
TEXTS = {"voice-01": "The keeper spoke to the dark.", "robot-01": "The robot painted a grey sea."}
SECRET_NAMES = ["zetarun", "omegarun", "frameworkq", "writer-model-x"]


def write_study_runs(root: Path) -> list[str]:
    """Two evaluated runs (`zetarun`: 2 stories, `omegarun`: 1, hostile), with principle verdicts."""
    specs = []
    for label, prompts in (("zetarun", ["voice-01", "robot-01"]), ("omegarun", ["mars-01"])):
        stories = [story("frameworkq", p, "agent-a", HOSTILE if p == "mars-01" else TEXTS[p],
                         model="writer-model-x") for p in prompts]
        scores = []
        for s in stories:
            row = score(s, JUDGE[s["prompt_id"]])
            row["concepts"] = {"voice-01": 1.0, "robot-01": 5.0, "mars-01": 3.0}[s["prompt_id"]]
            row["principle_good"] = {"voice-01": 0.0, "robot-01": 1.0, "mars-01": 1.0}[s["prompt_id"]]
            scores.append(row)
        write_run(root / label, stories, scores, plot=False)
        specs.append(f"{label}={root / label}")
    return specs


@pytest.fixture
def study(tmp_path):
    """(db path, meta, {rater: token}) of a likert study with raters ann and bob."""
    runs = write_study_runs(tmp_path / "runs")
    db = tmp_path / "ratings.sqlite"
    conn, meta = open_study(db, runs, "likert", seed=7)
    raters = {r.name: r.token for r in add_raters(conn, meta, ["ann", "bob"])}
    conn.close()
    return db, meta, raters


@pytest.fixture
def served(study):
    """The study served in this process: (base URL, db, meta, tokens)."""
    db, meta, tokens = study
    server = RatingServer(("127.0.0.1", 0), db, meta)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", db, meta, tokens
    server.shutdown()
    server.server_close()


def start_server(args: list[str]) -> tuple[subprocess.Popen, dict[str, str]]:
    """`review-lab rate serve ARGS --port 0` as a process: (process, {rater: link})."""
    proc = subprocess.Popen([sys.executable, "-m", "eval.rating", "serve", *args, "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    links = {}
    for line in proc.stdout:
        if m := re.match(r"^\s+(\S+): (http://\S+)$", line):
            links[m[1]] = m[2]
        if line.startswith("serving"):
            return proc, links
    raise AssertionError(f"the server stopped before serving (exit {proc.wait()})")


def page_data(html: str) -> dict:
    raw = html.split('<script type="application/json" id="rate-data">', 1)[1].split("</script>", 1)[0]
    return json.loads(raw)
