"""Every way a reply can be broken, one at a time, through the real OpenAI client: our fault proxy
in front of a scripted server. Fast; the end-to-end runs on llama.cpp are in test_fault_runs.py."""

from __future__ import annotations

import base64
import json
import time

import pytest

from generate.backends import BackendUnavailable, ChatRequest, Model, RetryPolicy, SamplingParams, load_model
from generate.backends.base import TransientBackendError
from generate.backends.openai_backend import BACKSTOP_S, CONTEXT_EXCEEDED, OpenAIBackend, parse_reply
from generate.common.errors import UsageError
from tests.faults.proxy import BILLED, CAUSE, FAULTS, FaultProxy
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


@pytest.mark.parametrize("message", [
    "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.",  # OpenAI, vLLM
    "The decoder prompt (length 9000) is longer than the maximum model length of 8192.",  # older vLLM
    "the request exceeds the available context size, try increasing it",  # llama.cpp
])
def test_servers_wordings_of_a_prompt_beyond_the_context_are_known(message):
    assert CONTEXT_EXCEEDED.search(message)


def test_a_prompt_the_content_policy_flags_fails_that_request_only(stub):
    short, flagged = stub_model(stub).generate([ask("Write about comets."), ask("STATUS 400 content_filter")])
    assert short.error is None
    assert flagged.text == "" and "content policy refused this prompt (HTTP 400, content_filter)" in flagged.error


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


# --- what a well-formed reply says, a fatal refusal, a slow server, what tries cost ---------------------

def shaped(shape: str, logprobs: int | None = None) -> ChatRequest:
    return ChatRequest([{"role": "user", "content": f"Write about comets. SHAPE {shape}"}], SamplingParams(8, 0.8),
                       seed=1, logprobs=logprobs)


def stub_model(stub, **kw) -> Model:
    backend = OpenAIBackend("stub", base_url=stub.base_url, api_key=KEY, timeout=kw.pop("timeout", 1.5), **kw)
    return Model(backend, policy=RetryPolicy(**vars(POLICY)))


@pytest.mark.parametrize("shape, error", [("content_filter", "content filter stopped the reply"),
                                          ("refusal", "the model refused: I can't help with that.")])
def test_a_filtered_or_refused_reply_fails_its_request_not_counted_complete(stub, shape, error):
    """The provider cut the reply (or the model declined): neither a whole story nor a verdict, so
    the request fails alone with the reason, its tokens counted, and nothing is retried."""
    model = stub_model(stub)
    good, bad = model.generate([ask("Write about robots."), shaped(shape)], reask_blank=False)
    assert good.error is None and good.text
    assert bad.text == "" and error in bad.error and bad.finish_reason == "error"
    assert bad.prompt_tokens == 5 and bad.completion_tokens == 4  # the stub's usage: it was billed
    assert model.stats.retries == {} and not model.stats.failed_calls


def test_a_filtered_story_is_a_failed_prompt_not_a_story(stub, tmp_path):
    from generate.common.jsonl import read_jsonl
    from generate.runner import PromptsFailed, RunConfig, Runner

    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"id": "ok", "aspect": "A", "prompt": "Write about a comet."}\n'
                       '{"id": "cut", "aspect": "A", "prompt": "Write about a comet. SHAPE content_filter"}\n')
    cfg = RunConfig(framework="single", model="openai:stub", dataset=str(prompts), max_new_tokens=8,
                    out=str(tmp_path / "run"))
    with pytest.raises(PromptsFailed):
        Runner(cfg, model=stub_model(stub)).run()
    assert [s["prompt_id"] for s in read_jsonl(tmp_path / "run" / "stories.jsonl")] == ["ok"]
    (failed,) = read_jsonl(tmp_path / "run" / "failed.jsonl")
    assert failed["prompt_id"] == "cut" and "content filter" in failed["reason"] and failed["final"]


def test_a_reply_whose_tokens_all_went_to_reasoning_is_blank_and_cut_not_malformed(stub):
    """content null with finish_reason length: the same request would get the same reply, so
    retrying it as a malformed one (same seed) only spends the retry budget; it is a blank reply
    that hit the cap, which the blank re-asks (new seeds) handle."""
    model = stub_model(stub)
    (out,) = model.generate([shaped("reasoning_length")], reask_blank=False)
    assert out.error is None and out.text == "" and out.finish_reason == "length"
    assert model.stats.retries == {}


def test_a_reply_without_usage_is_counted_as_unreported_not_as_free(stub, caplog):
    model = stub_model(stub)
    with_usage, without = model.generate([ask("Write about robots."), shaped("no_usage")])
    assert with_usage.usage_reported and with_usage.prompt_tokens == 3
    assert not without.usage_reported and without.prompt_tokens == 0 and without.text
    assert model.stats.usage_unreported == 1 and model.stats.to_json()["usage_unreported"] == 1
    assert "say nothing of the tokens they cost" in caplog.text


def test_the_tokens_of_a_malformed_but_billed_reply_are_counted(stub):
    """A 200 without choices whose `usage` says what it cost: the retry's completion carries both."""
    with FaultProxy(stub.base_url, schedule=[(0, "choices_empty_billed")], lifetime=60) as proxy:
        model = model_via(proxy)
        (out,) = model.generate([ask("Write about comets.")])
    assert model.stats.retries == {"malformed reply": 1}
    assert (out.prompt_tokens, out.completion_tokens) == (3 + BILLED["prompt_tokens"], 4 + BILLED["completion_tokens"])


def test_a_server_that_trickles_its_reply_is_timed_out_by_the_whole_call(stub):
    """One byte every 0.2 s never trips the client's per-read timeout; the call's own bound does,
    and the retry succeeds. Through `load_model`, as every command builds its model."""
    with FaultProxy(stub.base_url, schedule=[(0, "trickle")], stall_s=30.0, lifetime=60) as proxy:
        model = load_model("openai:stub", base_url=proxy.base_url, api_key=KEY, timeout=0.5, retries=2)
        model.policy.backoff = 0.01
        started = time.monotonic()
        (out,) = model.generate([ask("Write about comets.")])
        elapsed = time.monotonic() - started
    assert out.error is None and model.stats.retries == {"timeout": 1}
    assert elapsed < 0.5 + BACKSTOP_S + 3


def test_the_timeout_asked_is_the_clients(stub):
    """`--timeout` reaches the client (it was left at 120 s: a slower server could not be waited for)."""
    model = load_model("openai:stub", base_url=stub.base_url, api_key=KEY, timeout=300.0, concurrency=3)
    assert model.backend._request_timeout == 300.0 and model.timeout == 300.0 + BACKSTOP_S
    assert model.concurrency == 3


@pytest.mark.parametrize("status, code", [(401, None), (404, None), (400, None), (429, "insufficient_quota")])
def test_a_fatal_refusal_sends_no_further_calls(stub, status, code):
    """A wrong key, an unknown model, a spent quota: the calls in flight finish, and none of the
    phase's other calls is sent (they were, one refused request each, before the run stopped)."""
    model = stub_model(stub, concurrency=4)
    before = stub.requests
    suffix = f" {code}" if code else ""
    with pytest.raises(UsageError, match=f"HTTP {status}"):
        model.generate([ask(f"STATUS {status}{suffix} #{i}") for i in range(40)])
    assert stub.requests - before <= 4
    assert model.stats.retries == {}


def test_logprobs_a_server_never_sends_stop_the_run_in_one_line(stub):
    model = stub_model(stub, concurrency=1)
    with pytest.raises(UsageError, match="sends no logprobs though asked.*logprob-mode judge"):
        model.generate([shaped("no_logprobs", logprobs=5) for _ in range(6)])
    assert model.stats.retries == {"malformed reply": 1}  # one retry, in case a proxy dropped them


def test_logprobs_dropped_once_by_a_server_that_sends_them_are_retried():
    backend = OpenAIBackend("stub", base_url="http://127.0.0.1:9/v1", api_key=KEY)
    with_lp = parse_reply(b'{"choices": [{"message": {"content": "4"}, "logprobs": {"content": '
                          b'[{"token": "4", "logprob": -0.1, "top_logprobs": []}]}}]}')
    without = parse_reply(b'{"choices": [{"message": {"content": "4"}}]}')
    backend._check_logprobs(with_lp)
    for _ in range(3):
        with pytest.raises(TransientBackendError, match="no logprobs") as info:
            backend._check_logprobs(without)
        assert info.value.cause == "malformed reply"
    backend._check_logprobs(parse_reply(b'{"choices": [{"message": {"content": ""}}]}'))  # blank: nothing to read


@pytest.mark.parametrize("url", ["localhost:8000/v1", "127.0.0.1:8000/v1", "ftp://127.0.0.1/v1", "http://",
                                 "http://127.0.0.1:port/v1"])
def test_a_server_url_the_client_cannot_use_is_refused_at_once(url):
    with pytest.raises(UsageError, match="bad server URL"):
        OpenAIBackend("stub", base_url=url, api_key=KEY)


def test_a_key_in_the_server_url_is_in_no_message_or_description(stub, caplog):
    """`https://user:KEY@host`: httpx sends it as Basic authorization, which an echoing server quotes
    back base64-encoded; neither form reaches an error, a log line or the manifest's description."""
    url_key = "sk-url-7f3a9c1e5b"
    host = stub.base_url.split("//", 1)[1]
    backend = OpenAIBackend("stub", base_url=f"http://alice:{url_key}@{host}", api_key=KEY, timeout=1.5)
    assert url_key not in json.dumps(backend.describe())
    with pytest.raises(UsageError) as info:
        Model(backend, policy=RetryPolicy(**vars(POLICY))).generate([ask("STATUS 401 please")])
    basic = base64.b64encode(f"alice:{url_key}".encode()).decode()
    for text in (str(info.value), caplog.text):
        assert url_key not in text and basic not in text
    assert "Basic <redacted>" in str(info.value)


def test_the_settings_asked_are_the_ones_sent(stub):
    model = stub_model(stub)
    sampled = ChatRequest([{"role": "user", "content": "Write about comets."}], SamplingParams(37, 0.65, 0.85),
                          seed=1234)
    greedy = ChatRequest([{"role": "user", "content": "Score it."}], SamplingParams(12, 0.0, 1.0), logprobs=5)
    before = len(stub.bodies)
    model.generate([sampled, greedy])
    sent = {b["messages"][0]["content"]: b for b in stub.bodies[before:]}
    assert {k: v for k, v in sent["Write about comets."].items() if k != "messages"} == {
        "model": "stub", "max_tokens": 37, "temperature": 0.65, "top_p": 0.85, "seed": 1234}
    assert {k: v for k, v in sent["Score it."].items() if k != "messages"} == {
        "model": "stub", "max_tokens": 12, "temperature": 0.0, "top_p": 1.0, "logprobs": True, "top_logprobs": 5}


def test_no_more_requests_are_in_flight_than_the_concurrency(stub):
    model = load_model("openai:stub", base_url=stub.base_url, api_key=KEY, concurrency=3)
    stub.most_at_once = 0
    outs = model.generate([ask(f"SLOW story {i}") for i in range(12)])
    assert all(o.error is None for o in outs) and 1 < stub.most_at_once <= 3
