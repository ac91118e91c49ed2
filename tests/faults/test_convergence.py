"""Recovery converges: under a server failing two of every three chat requests (our fault proxy, a
seeded schedule, in front of the scripted OpenAI-compatible server), `review-lab generate`
(Review), `review-lab eval` and `review-lab benchmark` with an `openai:` model finish every prompt
and story within three re-runs of the same command, each re-run keeping every finished call;
nothing is lost or doubled, the outputs equal a fault-free run's, and the journals hold each
finished call once. The model keeps the default retry count (5) with test-sized backoff, so a
call gives up as often as it would by default ((2/3)**6, about 9%): a Review prompt of 21 calls
usually loses one."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from generate.backends import Model, RetryPolicy, load_backend
from generate.common.cli import run_cli
from generate.common.jsonl import read_jsonl
from tests.faults.conftest import RUBRIC
from tests.faults.proxy import FaultProxy, flaky_schedule

pytestmark = [pytest.mark.slow]

MAX_RUNS = 4  # the first run and at most three re-runs


def fast_model(spec: str, *, retries: int = 5, retry_budget: float = 300.0, **options) -> Model:
    """`load_model` with the default retry count and budget, and backoff at test speed."""
    return Model(load_backend(spec, **options),
                 policy=RetryPolicy(retries=retries, budget=retry_budget, backoff=0.005, max_backoff=0.01))


def until_done(main, argv: list[str], capsys) -> list[tuple[int, str]]:
    """Run the same command until it exits 0 (at most MAX_RUNS times): [(exit code, last line)]."""
    runs: list[tuple[int, str]] = []
    for _ in range(MAX_RUNS):
        with pytest.raises(SystemExit) as exit_info:
            run_cli(main, argv)
        err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        runs.append((exit_info.value.code or 0, err[-1] if err else ""))
        if not runs[-1][0]:
            break
    return runs


def clean_then_flaky(flaky, main, argv, clean: Path, out: Path, seed: int, capsys) -> list[tuple[int, str]]:
    """The command once through a fault-free proxy into `clean` (the reference), then re-run through
    the flaky one into `out` until it exits 0: that run's [(exit code, last line)], which must end
    in 0 after at least one failed invocation (else the schedule tests no recovery)."""
    with flaky(None) as clean_proxy:
        assert until_done(main, argv(clean, clean_proxy.base_url), capsys)[-1][0] == 0
    with flaky(seed) as proxy:
        runs = until_done(main, argv(out, proxy.base_url), capsys)
    assert runs[-1][0] == 0, runs
    assert len(runs) > 1, "nothing gave up: the schedule does not test recovery"
    return runs


def journal_keys(path) -> list[str]:
    return [row["key"] for row in read_jsonl(path)]


def stories(out) -> dict[str, dict]:
    return {s["story_id"]: {k: v for k, v in s.items() if k != "seconds"} for s in read_jsonl(out / "stories.jsonl")}


@pytest.fixture
def flaky(stub, monkeypatch, tmp_path):
    """(proxy factory, environment): `proxy(seed)` fails 2 of 3 requests, `proxy(None)` none."""
    monkeypatch.setattr("generate.backends.load_model", fast_model)
    monkeypatch.setenv("SCIFI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)

    def proxy(seed: int | None) -> FaultProxy:
        schedule = flaky_schedule(seed) if seed is not None else None
        return FaultProxy(stub.base_url, schedule=schedule, max_faults_per_request=1000, lifetime=600)
    return proxy


def review_argv(out, base_url: str) -> list[str]:
    return ["--framework", "review", "--model", "openai:stub", "--base-url", base_url, "--concurrency", "1",
            "--limit", "2", "--max-new-tokens", "16", "--out", str(out)]


def test_generate_review_converges_under_two_of_three_failing(flaky, tmp_path, capsys):
    from generate.cli import main

    runs = clean_then_flaky(flaky, main, review_argv, tmp_path / "clean", tmp_path / "run", 3, capsys)
    for code, last in runs[:-1]:  # every run with prompts left says how many prompts and calls
        assert code == 1 and re.search(r"\d+ prompt\(s\) left to retry .* with \d+ call\(s\) left", last), last
    out, clean = tmp_path / "run", tmp_path / "clean"
    assert stories(out) == stories(clean)  # nothing lost, nothing doubled, the fault-free stories
    keys = journal_keys(out / "calls.jsonl")
    assert len(keys) == len(set(keys)) and sorted(keys) == sorted(journal_keys(clean / "calls.jsonl"))
    failed = list(read_jsonl(out / "failed.jsonl"))
    assert failed and all(f["cause"] == "transient" and f["reseed"] == [] and not f["final"] for f in failed)
    # Progress: the calls a prompt had left only ever went down from one run to the next.
    left = [int(m) for _, last in runs[:-1] for m in re.findall(r"with (\d+) call\(s\) left", last)]
    assert left == sorted(left, reverse=True), runs


def test_eval_converges_under_two_of_three_failing(flaky, fault_data, tmp_path, capsys):
    from eval.cli import main

    def argv(out, base_url: str) -> list[str]:
        return ["--stories", str(fault_data["stories"]), "--judge", "openai:stub", "--judge-mode", "logprob",
                "--rubric", str(RUBRIC), "--no-surprisal", "--reference-dir", str(fault_data["corpus"]),
                "--chunk-stories", "1", "--base-url", base_url, "--concurrency", "1", "--out", str(out)]

    runs = clean_then_flaky(flaky, main, argv, tmp_path / "clean", tmp_path / "eval", 8, capsys)
    for code, last in runs[:-1]:
        assert code == 1 and re.search(r"\d+ stor\(ies\) left to score", last), last
    scores = {r["story_id"]: r for r in read_jsonl(tmp_path / "eval" / "scores.jsonl")}
    clean = {r["story_id"]: r for r in read_jsonl(tmp_path / "clean" / "scores.jsonl")}
    assert len(scores) == len(clean) == 8 and scores == clean
    keys = journal_keys(tmp_path / "eval" / "judge_calls.jsonl")
    assert len(keys) == len(set(keys)) == len(journal_keys(tmp_path / "clean" / "judge_calls.jsonl"))


def test_benchmark_converges_under_two_of_three_failing(flaky, fault_data, tmp_path, capsys):
    from eval.benchmark.run import main

    def argv(out, base_url: str) -> list[str]:
        return ["--model", "openai:stub", "--base-url", base_url, "--concurrency", "1", "--frameworks", "single",
                "review", "--limit", "2", "--max-new-tokens", "16", "--reference-dir", str(fault_data["corpus"]),
                "--out", str(out)]

    runs = clean_then_flaky(flaky, main, argv, tmp_path / "clean", tmp_path / "bench", 7, capsys)
    for code, last in runs[:-1]:  # what is left, never a usage error (exit 2)
        assert code == 1 and re.search(r"prompt\(s\) left|stor\(ies\) left to score", last), last
    for name in ("single", "review"):
        out, clean = tmp_path / "bench" / name, tmp_path / "clean" / name
        assert stories(out) == stories(clean)
        keys = journal_keys(out / "calls.jsonl")
        assert len(keys) == len(set(keys)) == len(journal_keys(clean / "calls.jsonl"))
        scores = list(read_jsonl(out / "eval" / "scores.jsonl"))
        assert sorted(r["story_id"] for r in scores) == sorted(stories(clean))
        by_id = {r["story_id"]: r for r in read_jsonl(clean / "eval" / "scores.jsonl")}
        assert all(json.dumps(r.get("concepts")) == json.dumps(by_id[r["story_id"]].get("concepts")) for r in scores)
