"""The one retry/timeout/batching wrapper, on scripted backends."""

import asyncio

import pytest

from generate.backends import BackendUnavailable, ChatRequest, Model, RetryPolicy, SamplingParams, load_backend
from generate.common.errors import UsageError
from tests.generate.fakes import Flaky, RecordingEcho, Scripted

FAST = RetryPolicy(retries=3, backoff=0.01)


def req(text: str, max_new_tokens: int = 8) -> ChatRequest:
    return ChatRequest([{"role": "user", "content": text}], SamplingParams(max_new_tokens=max_new_tokens), seed=1)


def test_transient_errors_are_retried_then_succeed():
    backend = Flaky(failures=2)
    out = Model(backend, policy=FAST).generate([req("a")])
    assert out[0].text == "ok 1" and backend.attempts == 3


def test_gives_up_after_bounded_retries_with_clear_error():
    backend = Flaky(failures=10)
    model = Model(backend, policy=FAST)
    with pytest.raises(BackendUnavailable, match="still failing after 3 retries"):
        model.generate([req("a")])
    assert backend.attempts == 4
    assert model.stats.retries == {"HTTP 503": 3} and model.stats.failed_calls == {"HTTP 503": 1}


def test_a_hung_call_times_out_and_is_retried():
    backend = Flaky(failures=1, hang=True)
    out = Model(backend, policy=FAST, timeout=0.2).generate([req("a")])
    assert out[0].text == "ok 1" and backend.attempts == 2


def test_blank_completion_is_asked_again_with_a_new_seed():
    backend = Flaky(failures=0, blank=1)
    out = Model(backend, policy=FAST).generate([req("a")])
    assert out[0].text.startswith("ok ") and out[0].text != "ok 1"


def test_a_reasked_blank_completion_carries_the_blank_attempts_tokens():
    """The blank attempt was paid for: its tokens are in the completion that replaces it."""
    blanks = iter([" "])  # scripted: 10 prompt tokens, 1 completion token; echo: 10 and 3
    backend = Scripted(lambda r: next(blanks, None))
    (out,) = Model(backend, policy=FAST).generate([req("a")])
    assert out.text.startswith("Tale") and len(backend.requests) == 2
    assert (out.prompt_tokens, out.completion_tokens) == (20, 4)


def test_a_caller_that_reasks_blanks_itself_gets_the_blank_back():
    backend = Scripted(lambda r: " ")
    (out,) = Model(backend, policy=FAST).generate([req("a")], reask_blank=False)
    assert out.text == " " and len(backend.requests) == 1


def test_batches_respect_batch_size_and_keep_request_order():
    backend = RecordingEcho()
    requests = [req("x" * n) for n in (9, 1, 5, 3, 7, 2)] + [req("short", max_new_tokens=4)]
    out = Model(backend).generate(requests)
    assert len(out) == 7
    assert sorted(backend.batches) == [1, 2, 4]  # the 4-token request never shares a batch
    by_text = {r.messages[0]["content"]: o.text for r, o in zip(requests, out)}
    again = Model(RecordingEcho()).generate([requests[2]])
    assert by_text["x" * 5] == again[0].text


def test_a_backend_may_batch_some_requests_by_its_own_measure():
    """The hf backend's static path takes a phase's sampled requests whole (its memory splits
    them) while greedy ones keep `batch_size`: the Model asks the backend per kind of request."""

    class Wide(RecordingEcho):
        def batch_limit(self, request):
            return 64 if request.params.temperature > 0 else self.batch_size

    backend = Wide()
    greedy = [ChatRequest([{"role": "user", "content": f"g{i}"}], SamplingParams(4, 0.0, 1.0)) for i in range(6)]
    Model(backend).generate([req(f"s{i}") for i in range(10)] + greedy)
    assert sorted(backend.batches) == [2, 4, 10]


def test_the_hf_static_path_takes_sampled_requests_whole_and_greedy_ones_in_batch_size():
    from generate.backends.hf.backend import STATIC_ROWS, HFBackend

    def backend(path):  # the method alone: no model to load
        b = object.__new__(HFBackend)
        b.path, b.batch_size = path, 16
        return b

    sampled, greedy = req("s"), ChatRequest([{"role": "user", "content": "g"}], SamplingParams(2, 0.0, 1.0), logprobs=5)
    assert backend("static").batch_limit(sampled) == STATIC_ROWS and backend("static").batch_limit(greedy) == 16
    assert backend("fast").batch_limit(sampled) == 16


@pytest.mark.parametrize("spec", ["nope:model", "hf:", "gpt-4o", ""])
def test_unknown_model_spec_is_a_usage_error(spec):
    with pytest.raises(UsageError, match="unknown model"):
        load_backend(spec)


def test_vllm_spec_without_vllm_says_how_to_install():
    with pytest.raises(UsageError, match="vLLM"):
        load_backend("vllm:meta-llama/Llama-3.2-1B-Instruct")


def test_greedy_blank_is_not_asked_again():
    backend = Flaky(failures=0, blank=1)
    greedy = ChatRequest([{"role": "user", "content": "a"}], SamplingParams(8, temperature=0.0), seed=1)
    (out,) = Model(backend, policy=FAST).generate([greedy])
    assert out.text.strip() == "" and backend.attempts == 1


class RefusesBad(RecordingEcho):
    """Refuses "bad" for good (a wrong key, an unknown model) once "good" is in flight beside it."""

    batch_size = 1

    async def generate(self, requests):
        await asyncio.sleep(0.05 if requests[0].messages[0]["content"] == "bad" else 0.2)
        if requests[0].messages[0]["content"] == "bad":
            raise UsageError("HTTP 401")
        return await super().generate(requests)


def test_a_fatal_refusal_lets_the_calls_in_flight_finish_and_sends_no_other():
    """The calls in flight when a call is refused for good finish and are saved (a resumed run does
    not ask them again); the calls not started are not sent: each would only be refused in turn."""
    saved = []
    backend = RefusesBad()
    requests = [req("bad"), req("good"), *(req(f"later {i}") for i in range(8))]
    with pytest.raises(UsageError, match="401"):
        Model(backend, concurrency=2).generate(requests, on_done=lambda idx, outs: saved.extend(idx))
    assert saved == [1] and [r.messages[0]["content"] for r in backend.requests] == ["good"]
