"""The length cap's name: `max_tokens` to every server, `max_completion_tokens` from the first
refusal on (OpenAI's reasoning models refuse the former), through the real OpenAI client against
the scripted server. Before, such a model stopped every run at its first call."""

from __future__ import annotations

import pytest

from generate.backends import ChatRequest, Model, RetryPolicy, SamplingParams
from generate.backends.openai_backend import OpenAIBackend
from generate.common.errors import UsageError
from tests.faults.stub import reply_text


def ask(text: str) -> ChatRequest:
    return ChatRequest([{"role": "user", "content": text}], SamplingParams(8), seed=1)


def sent(stub, model: str, texts: list[str], concurrency: int = 1) -> tuple[list, list[dict], Model]:
    """(the completions, the request bodies the server got, the model) for `texts` to `model`."""
    before = len(stub.bodies)
    wrapped = Model(OpenAIBackend(model, base_url=stub.base_url, api_key="sk-x", concurrency=concurrency, timeout=5),
                    policy=RetryPolicy(retries=1, backoff=0.01, max_backoff=0.02, budget=5.0))
    out = wrapped.generate([ask(t) for t in texts])
    return out, [b for b in stub.bodies[before:] if b["model"] == model], wrapped


def caps(bodies: list[dict]) -> list[tuple[str, int]]:
    return [(k, b[k]) for b in bodies for k in ("max_tokens", "max_completion_tokens") if k in b]


def test_a_reasoning_model_gets_the_cap_as_max_completion_tokens_from_its_first_refusal(stub):
    texts = ["Write about comets.", "Write about robots.", "Write about moons."]
    out, bodies, model = sent(stub, "reasoning-stub", texts)
    assert [c.text for c in out] == [reply_text([{"role": "user", "content": t}]) for t in texts]
    assert caps(bodies) == [("max_tokens", 8)] + [("max_completion_tokens", 8)] * 3  # one refusal, sent again
    assert not model.stats.retries and not model.stats.failed_calls  # a rename, not a fault


def test_requests_in_flight_when_the_cap_is_renamed_are_each_sent_again_once(stub):
    texts = [f"Write about comet {i}." for i in range(6)]
    out, bodies, model = sent(stub, "reasoning-stub-concurrent", texts, concurrency=6)
    assert all(c.error is None for c in out) and not model.stats.failed_calls
    assert sum(k == "max_completion_tokens" for k, _ in caps(bodies)) == 6


def test_other_servers_keep_max_tokens_and_other_refusals_stay_fatal(stub):
    out, bodies, _ = sent(stub, "stub-plain", ["Write about comets."])
    assert out[0].error is None and caps(bodies) == [("max_tokens", 8)]
    with pytest.raises(UsageError, match="HTTP 400"):
        sent(stub, "reasoning-stub-strict", ["Write about comets. STATUS 400"])
