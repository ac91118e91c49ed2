"""A Review run and an evaluation through our fault proxy, in front of the real llama.cpp server,
on a seeded schedule of every fault class: both complete with every story and score, identical
to runs without faults at the same seeds, and the retries counted (and written to the
manifests) match the faults injected."""

from __future__ import annotations

import json
import logging
import time

import pytest

from generate.common.jsonl import read_jsonl
from tests.faults.conftest import openai_model, run_eval, run_review
from tests.faults.proxy import FAULTS, FaultProxy, expected_retries, seeded_schedule

pytestmark = [pytest.mark.server, pytest.mark.slow]

TIMEOUT = 15.0  # the client's per-request timeout; a `stall` outlasts it
log = logging.getLogger(__name__)


def stories(out) -> dict[str, dict]:
    return {s["story_id"]: {k: v for k, v in s.items() if k != "seconds"} for s in read_jsonl(out / "stories.jsonl")}


def journal(out) -> dict[str, str]:
    return {r["key"]: r["text"] for r in read_jsonl(out / "calls.jsonl")}


# Every fault a retry survives: a Retry-After beyond the retry budget ends its call at once (a
# transient failure that the next run retries: test_convergence.py).
SURVIVED = sorted(set(FAULTS) - {"429_retry_after_long"})


def faulted(llama_server, seed: int, run, max_gap: int = 1):
    """Run `run(model)` through a proxy injecting every survivable fault once; return (proxy, model, seconds)."""
    with FaultProxy(llama_server.base_url, upstream_key=llama_server.api_key,
                    schedule=seeded_schedule(seed, SURVIVED, max_gap=max_gap), stall_s=TIMEOUT + 2,
                    retry_after=1.0) as proxy:
        model = openai_model(proxy.base_url, llama_server.api_key, timeout=TIMEOUT)
        started = time.monotonic()
        run(model)
        return proxy, model, time.monotonic() - started


@pytest.fixture(scope="module")
def review(llama_server, review_reference, tmp_path_factory):
    out = tmp_path_factory.mktemp("review-faulted")
    proxy, model, seconds = faulted(llama_server, 11, lambda model: run_review(out, model))
    log.warning("Review under faults: %d retries %s, %.1fs backoff, %.1fs", sum(model.stats.retries.values()),
                dict(model.stats.retries), model.stats.waited_s, seconds)
    return {"out": out, "proxy": proxy, "model": model}


@pytest.fixture(scope="module")
def evaluation(llama_server, fault_data, tmp_path_factory):
    clean, out = tmp_path_factory.mktemp("eval-clean"), tmp_path_factory.mktemp("eval-faulted")
    with FaultProxy(llama_server.base_url, upstream_key=llama_server.api_key) as proxy:  # no faults
        started = time.monotonic()
        run_eval(clean, fault_data, openai_model(proxy.base_url, "any", timeout=TIMEOUT))
        log.warning("evaluation without faults: %.1fs", time.monotonic() - started)
    # 8 judge calls for 14 faults: no clean request between faults (each request takes up to 2)
    proxy, model, seconds = faulted(llama_server, 12, lambda model: run_eval(out, fault_data, model), max_gap=0)
    log.warning("evaluation under faults: %d retries %s, %.1fs backoff, %.1fs", sum(model.stats.retries.values()),
                dict(model.stats.retries), model.stats.waited_s, seconds)
    return {"clean": clean, "out": out, "proxy": proxy, "model": model}


def test_review_survives_every_fault_with_identical_stories(review, review_reference):
    assert sorted(f for _, f in review["proxy"].injected) == SURVIVED, "the run ended before every fault"
    assert stories(review["out"]) == stories(review_reference)
    assert journal(review["out"]) == journal(review_reference)
    assert not (review["out"] / "failed.jsonl").exists() or not list(read_jsonl(review["out"] / "failed.jsonl"))


def test_review_retries_match_the_schedule_and_the_manifest(review):
    stats = review["model"].stats
    assert stats.retries == expected_retries(review["proxy"])
    assert not stats.failed_calls and stats.waited_s >= 1.0  # a Retry-After wait of 1 s
    manifest = json.loads((review["out"] / "manifest.json").read_text())
    assert manifest["reliability"] == stats.to_json()
    assert 0.05 < manifest["peak_rss_gb"] < 64  # the process's peak memory, in GiB (not KiB or bytes)


def test_evaluation_survives_every_fault_with_identical_scores(evaluation):
    assert sorted(f for _, f in evaluation["proxy"].injected) == SURVIVED
    clean = list(read_jsonl(evaluation["clean"] / "scores.jsonl"))
    assert len(clean) == 8 and sum(r["concepts"] is not None for r in clean) >= 4  # the judge did score
    assert list(read_jsonl(evaluation["out"] / "scores.jsonl")) == clean


def test_evaluation_retries_match_the_schedule_and_the_manifest(evaluation):
    stats = evaluation["model"].stats
    assert stats.retries == expected_retries(evaluation["proxy"]) and not stats.failed_calls
    manifest = json.loads((evaluation["out"] / "manifest.json").read_text())
    assert manifest["reliability"] == {"openai:smollm2": stats.to_json()}
