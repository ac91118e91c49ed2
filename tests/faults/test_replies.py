"""Every way a reply can be broken, one at a time, through the real OpenAI client: our fault proxy
in front of a scripted server. Fast; the end-to-end runs on llama.cpp are in test_fault_runs.py."""

from __future__ import annotations

import time

import pytest

from generate.backends import BackendUnavailable, ChatRequest, Model, RetryPolicy, SamplingParams
from generate.backends.base import TransientBackendError
from generate.backends.openai_backend import OpenAIBackend, parse_reply
from generate.common.errors import UsageError
from tests.faults.proxy import CAUSE, FAULTS, FaultProxy
from tests.faults.stub import reply_text

KEY = "sk-stub-4b1d9e0c-secret"
POLICY = RetryPolicy(retries=3, backoff=0.01, max_backoff=0.05, budget=2.0)


def model_via(proxy: FaultProxy, timeout: float = 1.5) -> Model:
    backend = OpenAIBackend("stub", base_url=proxy.base_url, api_key=KEY, concurrency=1, timeout=timeout)
    return Model(backend, policy=RetryPolicy(**vars(POLICY)))


def ask(text: str) -> ChatRequest:
    return ChatRequest([{"role": "user", "content": text}], SamplingParams(8), seed=1)


@pytest.mark.parametrize("fault", sorted(set(FAULTS) - {"429_retry_after_long"}))
def test_each_fault_is_retried_counted_and_survived(stub, fault):
    with FaultProxy(stub.base_url, schedule=[(0, fault)], stall_s=3.0, retry_after=0.2, lifetime=60) as proxy:
        model = model_via(proxy)
        started = time.monotonic()
        (out,) = model.generate([ask("Write about comets.")])
        elapsed = time.monotonic() - started
    assert proxy.injected == [(1, fault)]
    assert out.error is None and out.text == reply_text([{"role": "user", "content": "Write about comets."}])
    assert model.stats.retries == {CAUSE[fault]: 1} and not model.stats.failed_calls
    if fault == "429_retry_after":  # the server's Retry-After is honoured...
        assert model.stats.waited_s == pytest.approx(0.2) and elapsed >= 0.2


def test_a_retry_after_beyond_the_budget_ends_the_call_at_once(stub):
    """Waiting less than the server asked would only be refused again: the call gives up (a
    transient failure, retried by the next run) without waiting, and says why."""
    with FaultProxy(stub.base_url, schedule=[(1, "429_retry_after_long")], lifetime=60) as proxy:
        model = model_via(proxy)
        started = time.monotonic()
        good, bad = model.generate([ask("Write about comets."), ask("Write about robots.")])
        elapsed = time.monotonic() - started
    assert good.error is None and bad.finish_reason == "unavailable" and elapsed < 1.5
    assert "asked to wait 3600s (Retry-After), more than the" in bad.error and "2s --retry-budget" in bad.error
    assert model.stats.waited_s == 0 and model.stats.failed_calls == {"HTTP 429": 1}


@pytest.mark.parametrize("body, what", [
    (b'{"choices": [{"message": {"content": "Once', "not JSON"),
    (b"<html><body>502 Bad Gateway</body></html>", "not JSON"),
    (b"", "not JSON"),
    (b'{"choices": []}', "no choices"),
    (b'{"choices": null}', "no choices"),
    (b'{"error": "overloaded"}', "no choices"),
    (b'{"choices": [{"message": null}]}', "no message"),
    (b'{"choices": [{"message": {"role": "assistant"}}]}', "no content"),
    (b'{"choices": [{"message": {"content": null}}]}', "no content"),
    (b'{"choices": [{"message": {"content": "x"}, "logprobs": {"content": [{"token": "x"}]}}]}', "logprobs"),
    (b'[1, 2]', "no choices"),
])
def test_malformed_bodies_are_transient(body, what):
    with pytest.raises(TransientBackendError, match=what) as info:
        parse_reply(body)
    assert info.value.cause == "malformed reply"


def test_a_request_that_keeps_failing_fails_alone(stub):
    """After its retries, a call fails by itself (Completion.error); the batch goes on."""
    with FaultProxy(stub.base_url, lifetime=60) as proxy:
        model = model_via(proxy)
        good, bad = model.generate([ask("Write about comets."), ask("STATUS 503 always")])
    assert good.error is None and good.text
    assert bad.text == "" and "HTTP 503" in bad.error and "still failing after 3 retries" in bad.error
    assert model.stats.retries == {"HTTP 503": 3} and model.stats.failed_calls == {"HTTP 503": 1}


def test_the_retry_budget_in_seconds_ends_a_call_before_its_count(stub):
    """Retries are bounded by time as well as count: a 503 that lasts longer than the budget gives
    up when the seconds run out, and the error says which budget it was and how it meets --timeout."""
    policy = RetryPolicy(retries=50, backoff=0.1, max_backoff=0.1, budget=0.5)
    with FaultProxy(stub.base_url, lifetime=60) as proxy:
        backend = OpenAIBackend("stub", base_url=proxy.base_url, api_key=KEY, concurrency=1, timeout=1.5)
        model = Model(backend, policy=policy)
        started = time.monotonic()
        good, bad = model.generate([ask("Write about comets."), ask("STATUS 503 always")])
        elapsed = time.monotonic() - started
    assert good.error is None and bad.finish_reason == "unavailable"
    assert "the 0.5s --retry-budget ran out" in bad.error and "--timeout" in bad.error
    assert 2 <= model.stats.retries["HTTP 503"] < 50 and elapsed < 2.5


def test_a_flaky_server_that_answered_before_fails_the_call_not_the_run(stub):
    """A lone call that gives up on a server that did answer is a transient failure of that call
    (its item is retried by the next run); only a server that never answered stops the run."""
    with FaultProxy(stub.base_url, lifetime=60) as proxy:
        model = model_via(proxy)
        model.generate([ask("Write about comets.")])
        (bad,) = model.generate([ask("STATUS 502 now")])
    assert bad.finish_reason == "unavailable" and "still failing after 3 retries" in bad.error


def test_a_server_that_fails_every_call_stops_the_run(stub):
    with FaultProxy(stub.base_url, lifetime=60) as proxy, pytest.raises(BackendUnavailable, match="every call failed"):
        model_via(proxy).generate([ask("STATUS 502 a"), ask("STATUS 504 b")])


@pytest.mark.parametrize("status", [400, 401, 404])
def test_client_errors_fail_at_once_in_one_line_without_the_key(stub, status):
    with FaultProxy(stub.base_url, api_key=KEY, echo_headers=True, lifetime=60) as proxy:
        model = model_via(proxy)
        before = stub.requests
        with pytest.raises(UsageError, match=f"HTTP {status}") as info:
            model.generate([ask(f"STATUS {status} please")])
    assert stub.requests - before == 1  # no retry
    message = str(info.value)
    assert "\n" not in message and KEY not in message and "<redacted>" in message


def test_a_prompt_beyond_the_context_fails_that_request_only(stub):
    with FaultProxy(stub.base_url, lifetime=60) as proxy:
        short, long = model_via(proxy).generate([ask("Write about comets."), ask("word " * 1000)])
    assert short.error is None
    assert long.text == "" and "context" in long.error and "maximum context length is 2000 tokens" in long.error


def test_echoed_key_never_reaches_the_logs(stub, caplog):
    with FaultProxy(stub.base_url, schedule=[(0, "503"), (0, "429")], api_key=KEY, echo_headers=True,
                    lifetime=60) as proxy:
        (out,) = model_via(proxy).generate([ask("Write about comets.")])
    assert out.error is None
    assert "retry 2/3" in caplog.text and "authorization: Bearer <redacted>" in caplog.text  # the echo, logged...
    assert KEY not in caplog.text  # ...without the key
