"""The vLLM backend's translation to and from vLLM's documented offline API (`LLM.chat`,
`SamplingParams`, `RequestOutput`), on a stand-in engine: vLLM itself needs a GPU."""

from __future__ import annotations

import sys
from types import SimpleNamespace

import pytest

from generate.backends import ChatRequest, Model, RetryPolicy, SamplingParams
from generate.backends.vllm_backend import VLLMBackend, sampling_kwargs, to_completion

CONTEXT = 40  # the stand-in model's max_model_len, in (whitespace) tokens


def logprob(token: str, value: float) -> SimpleNamespace:
    return SimpleNamespace(logprob=value, rank=1, decoded_token=token)


def output(prompt_ids: list[int], text: str, finish: str = "stop", logprobs: bool = False) -> SimpleNamespace:
    """A `vllm.RequestOutput` as vLLM documents it: per position, a dict token id -> Logprob that
    holds the top-k and the chosen token."""
    ids = list(range(100, 100 + len(text.split())))
    lps = [{t: logprob(w, -0.1), 7: logprob(" 1", -2.0)} for t, w in zip(ids, text.split())] if logprobs else None
    gen = SimpleNamespace(text=text, token_ids=ids, logprobs=lps, finish_reason=finish)
    return SimpleNamespace(prompt_token_ids=prompt_ids, outputs=[gen])


class Tokenizer:
    def apply_chat_template(self, conversation, tokenize, add_generation_prompt, continue_final_message):
        assert tokenize and add_generation_prompt != continue_final_message
        return list(range(sum(len(m["content"].split()) for m in conversation)))


class FakeLLM:
    """`vllm.LLM`: refuses a whole call holding a prompt beyond its context, as vLLM does."""

    def __init__(self, model: str, **kwargs):
        self.calls: list[tuple[list, list, dict]] = []
        self.llm_engine = SimpleNamespace(model_config=SimpleNamespace(max_model_len=CONTEXT))
        self.measure = True

    def get_tokenizer(self):
        if not self.measure:
            raise AttributeError("no tokenizer to measure by")
        return Tokenizer()

    def chat(self, messages, sampling_params, use_tqdm, add_generation_prompt, continue_final_message):
        self.calls.append((messages, sampling_params, {"add_generation_prompt": add_generation_prompt,
                                                       "continue_final_message": continue_final_message}))
        lengths = [sum(len(m["content"].split()) for m in c) for c in messages]
        if max(lengths) >= CONTEXT:
            raise ValueError(f"The decoder prompt (length {max(lengths)}) is longer than the maximum model length "
                             f"of {CONTEXT}. Make sure that `max_model_len` is no smaller than the number of text "
                             "tokens.")
        return [output(list(range(n)), f"tale {n}", logprobs=vars(p).get("logprobs") is not None)
                for n, p in zip(lengths, sampling_params)]


@pytest.fixture
def vllm(monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", SimpleNamespace(LLM=FakeLLM, SamplingParams=SimpleNamespace))
    return VLLMBackend("org/model")


def ask(words: int, **kw) -> ChatRequest:
    return ChatRequest([{"role": "user", "content": " ".join(["w"] * words)}], SamplingParams(16, 0.8, 0.95), seed=3,
                       **kw)


def test_the_settings_asked_are_the_ones_sent():
    assert sampling_kwargs(ask(2)) == {"max_tokens": 16, "temperature": 0.8, "top_p": 0.95, "seed": 3}
    greedy = ChatRequest([{"role": "user", "content": "x"}], SamplingParams(2, 0.0, 0.5), logprobs=5)
    assert sampling_kwargs(greedy) == {"max_tokens": 2, "temperature": 0.0, "top_p": 1.0, "seed": None, "logprobs": 5}


def test_an_output_becomes_a_completion_with_its_tokens_and_logprobs():
    comp = to_completion(output([1, 2, 3], "a b", finish="length", logprobs=True), want_logprobs=True)
    assert (comp.text, comp.prompt_tokens, comp.completion_tokens, comp.finish_reason) == ("a b", 3, 2, "length")
    assert [t.token for t in comp.logprobs] == ["a", "b"] and comp.logprobs[0].top == {"a": -0.1, " 1": -2.0}


def test_a_prompt_beyond_the_context_fails_alone_and_the_others_are_generated(vllm):
    model = Model(vllm, policy=RetryPolicy(retries=0))
    short, huge, other = model.generate([ask(3), ask(CONTEXT + 5), ask(4)])
    assert short.text == "tale 3" and other.text == "tale 4" and short.error is None
    assert huge.text == "" and "prompt of 45 tokens leaves no room in the model's context of 40 tokens" in huge.error
    assert huge.finish_reason == "error" and huge.prompt_tokens == 45
    (messages, _, _), = vllm.llm.calls
    assert len(messages) == 2  # the engine never saw the prompt it would refuse


def test_an_engine_refusal_the_measure_missed_still_fails_only_that_request(vllm):
    vllm.llm.measure = False
    model = Model(vllm, policy=RetryPolicy(retries=0))
    short, huge = model.generate([ask(3), ask(CONTEXT + 5)])
    assert short.text == "tale 3"
    assert huge.text == "" and "longer than the maximum model length of 40" in huge.error
    assert model.stats.split_batches == 1


def test_a_prefilled_request_continues_the_assistant_turn(vllm):
    req = ask(3, prefill="Score:", logprobs=5)
    (out,) = Model(vllm, policy=RetryPolicy(retries=0)).generate([req])
    (messages, params, flags), = vllm.llm.calls
    assert messages[0][-1] == {"role": "assistant", "content": "Score:"}
    assert flags == {"add_generation_prompt": False, "continue_final_message": True}
    assert params[0].logprobs == 5 and out.logprobs
