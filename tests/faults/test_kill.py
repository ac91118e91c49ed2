"""Kill it anywhere, lose nothing: real commands SIGKILLed at random moments ten times in a row,
restarted with the same command each time (and their JSONL files torn now and then), end with
the outputs of an uninterrupted run: every story and score exactly once, no torn or garbage
line, and every call finished before a kill replayed from the journal with identical text."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from generate.common.jsonl import read_jsonl
from tests.conftest import REPO, private_cache
from tests.faults.conftest import PYTHON, REVIEW, cli_env, eval_flags, flags
from tests.faults.kill import kill_and_resume, records
from tests.faults.proxy import FaultProxy

REVIEW_LAB = str(Path(PYTHON).parent / "review-lab")

pytestmark = [pytest.mark.slow]


def without_timing(stories: list[dict]) -> dict[str, dict]:
    return {s["story_id"]: {k: v for k, v in s.items() if k != "seconds"} for s in stories}


def assert_replayed(run, journal: list[dict]) -> None:
    """Each call journaled once, and every call journaled before a kill kept its text."""
    final = {r["key"]: r["text"] for r in journal}
    assert len(final) == len(journal), "a call was made twice"
    for attempt in run.attempts:
        assert all(final.get(key) == text for key, text in attempt.journal.items()), "a journaled call was redone"


@pytest.mark.server
def test_generate_review_killed_ten_times(llama_server, review_reference, tmp_path):
    out = tmp_path / "run"
    with FaultProxy(llama_server.base_url, upstream_key=llama_server.api_key) as proxy:  # no faults: determinism
        cmd = [PYTHON, "-m", "generate", *flags(REVIEW), "--model", "openai:smollm2", "--base-url", proxy.base_url,
               "--api-key", "any", "--concurrency", "2", "--timeout", "120", "--out", str(out)]
        run = kill_and_resume(cmd, watch=[out / "calls.jsonl", out / "stories.jsonl"], kills=10, seed=1, time_kills=3,
                              env=cli_env(tmp_path), cwd=REPO, journal=out / "calls.jsonl", log_dir=tmp_path / "logs")
    assert run.final.returncode == 0, run.final.stderr[-3000:]
    assert run.kills == 10, run.summary()
    stories, journal = records(out / "stories.jsonl"), records(out / "calls.jsonl")
    assert without_timing(stories) == without_timing(list(read_jsonl(review_reference / "stories.jsonl")))
    assert len(stories) == len(without_timing(stories)) == 4
    assert {r["key"]: r["text"] for r in journal} == {r["key"]: r["text"]
                                                      for r in read_jsonl(review_reference / "calls.jsonl")}
    assert_replayed(run, journal)


@pytest.mark.server
def test_eval_killed_ten_times(llama_server, fault_data, tmp_path):
    clean, out = tmp_path / "clean", tmp_path / "killed"
    env = cli_env(fault_data["root"])  # shares the reference corpus's embedding cache
    with FaultProxy(llama_server.base_url, upstream_key=llama_server.api_key) as proxy:
        base = [PYTHON, "-m", "eval", *eval_flags(fault_data["stories"], fault_data["corpus"]),
                "--base-url", proxy.base_url, "--api-key", "any", "--timeout", "120"]
        done = subprocess.run([*base, "--out", str(clean)], cwd=REPO, env=env, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        # most kills at a random time after start: each restart pays ~10 s of imports and encoder loading
        run = kill_and_resume([*base, "--out", str(out)], watch=[out / "scores.jsonl"], kills=10, seed=2,
                              time_kills=6, env=env, cwd=REPO, log_dir=tmp_path / "logs")
    assert run.final.returncode == 0, run.final.stderr[-3000:]
    assert run.kills == 10, run.summary()
    scores = records(out / "scores.jsonl")
    assert scores == records(clean / "scores.jsonl")
    assert len({s["story_id"] for s in scores}) == len(scores) == 8
    summary = json.loads((out / "summary.json").read_text())
    assert summary == json.loads((clean / "summary.json").read_text())


def test_benchmark_killed_ten_times(tmp_path, fault_data):
    """The benchmark on the hf backend, whose batched sampling depends on the batch: the resumed
    run's texts cannot equal an uninterrupted run's, so its structure and the journal replay are
    checked instead."""
    private_cache(tmp_path / "cache")
    out = tmp_path / "bench"
    cmd = [REVIEW_LAB, "benchmark", "--frameworks", "single", "review", "--limit", "1", "--max-new-tokens", "8",
           "--reference-dir", str(fault_data["corpus"]), "--out", str(out)]
    watch = [out / fw / name for fw in ("single", "review") for name in ("calls.jsonl", "stories.jsonl")]
    watch += [out / fw / "eval" / "scores.jsonl" for fw in ("single", "review")]
    journals = {fw: out / fw / "calls.jsonl" for fw in ("single", "review")}
    run = kill_and_resume(cmd, watch=watch, kills=10, seed=3, time_kills=6, env=cli_env(tmp_path), cwd=REPO,
                          journal=journals["review"], log_dir=tmp_path / "logs", timeout=900)
    assert run.final.returncode == 0, run.final.stderr[-3000:]
    assert run.kills == 10, run.summary()
    for fw, agents in (("single", 1), ("review", 3)):
        stories = records(out / fw / "stories.jsonl")
        ids = [s["story_id"] for s in stories]
        assert len(ids) == len(set(ids)) == agents and all(s["text"] for s in stories)
        scores = records(out / fw / "eval" / "scores.jsonl")
        assert sorted(s["story_id"] for s in scores) == sorted(ids)
        journal = records(journals[fw])
        assert len({r["key"] for r in journal}) == len(journal)
    assert_replayed(run, records(journals["review"]))
    table = (out / "benchmark.md").read_text()
    assert "| single |" in table and "| review |" in table
