"""A killed run resumes: no story lost or duplicated, no finished call recomputed."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from generate.common.jsonl import read_jsonl
from tests.conftest import REPO

pytestmark = pytest.mark.slow

ARGS = ["--framework", "review", "--limit", "2", "--rounds", "2", "--max-new-tokens", "8", "--chunk-prompts", "1",
        "--batch-size", "2"]


def test_resume_after_kill(tmp_path):
    out = tmp_path / "run"
    cmd = [sys.executable, "-m", "generate", *ARGS, "--out", str(out)]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    journal = out / "calls.jsonl"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and proc.poll() is None:
        if journal.exists() and len(journal.read_text().splitlines()) >= 6:
            break
        time.sleep(0.2)
    assert proc.poll() is None, "the run finished before it could be killed"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    journaled = len(journal.read_text().splitlines())
    assert 0 < journaled < 24

    again = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    stories = list(read_jsonl(out / "stories.jsonl"))
    assert len(stories) == 6 and len({s["story_id"] for s in stories}) == 6
    keys = [r["key"] for r in read_jsonl(journal)]
    # Each call made exactly once across both runs: 12 protocol calls per prompt, plus a re-ask of
    # any reply that was blank once cleaned (an 8-token reply can be all wrapper: "Sure! Here's").
    calls = sum({s["prompt_id"]: s["prompt_usage"]["calls"] for s in stories}.values())
    assert len(keys) == len(set(keys)) == calls >= 24

    third = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert third.returncode == 0 and "0 to run" in third.stderr
    assert len(list(read_jsonl(out / "stories.jsonl"))) == 6


def test_torn_partial_prompt_is_dropped_and_rerun(tmp_path):
    from generate.runner import finished_prompts

    path = tmp_path / "stories.jsonl"
    rows = [{"prompt_id": "a", "n_stories": 2}, {"prompt_id": "a", "n_stories": 2}, {"prompt_id": "b", "n_stories": 2}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"prompt_id": "b", "n_st')
    assert finished_prompts(path) == {"a"}
    assert len(path.read_text().splitlines()) == 2
