"""The hf backend as a researcher meets it: which models it refuses at load (one line, not a
traceback mid-run), which tokens end a reply, that a request's decoding settings are the only ones
any path applies, and what a greedy call keeps. A one-layer random Llama with SmolLM2's tokenizer
stands in for a checkpoint."""

from __future__ import annotations

import json

import pytest

from generate.backends.base import ChatRequest, SamplingParams
from generate.common.errors import UsageError
from tests.generate.test_model_identity import tiny_model

PROMPT = [{"role": "user", "content": "Tell a story about rain."}]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny") / "model"
    tiny_model(path, seed=0)
    return path


def backend(directory, path: str = "fast"):
    from generate.backends.hf import HFBackend

    return HFBackend(str(directory), batch_size=4, dtype="float32", device="cpu", path=path)


def with_generation_config(tiny, tmp_path, **fields):
    """A copy of the tiny model whose `generation_config.json` also says `fields`."""
    import shutil

    copy = tmp_path / "model"
    shutil.copytree(tiny, copy)
    config = json.loads((copy / "generation_config.json").read_text())
    (copy / "generation_config.json").write_text(json.dumps({**config, **fields}))
    return copy


def greedy(b, n: int = 8, logprobs: int | None = None):
    return b._generate([ChatRequest(PROMPT, SamplingParams(n, 0.0, 1.0), seed=1, logprobs=logprobs)])[0]


def first_token(b) -> int:
    """The token a greedy reply to `PROMPT` starts with."""
    ids = b.tokenizer(b.render(ChatRequest(PROMPT)), add_special_tokens=False, return_tensors="pt")["input_ids"]
    return int(b.lm(ids).logits[0, -1].argmax())


def test_a_directory_without_a_model_is_refused_in_one_line(tmp_path):
    """An empty or unrelated directory made the tokenizer raise a ValueError: a traceback, exit 1."""
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "config.json").write_text("{}")
    for directory in (tmp_path / "empty", tmp_path / "notes"):
        directory.mkdir(exist_ok=True)
        with pytest.raises(UsageError, match="cannot load hf model"):
            backend(directory)


def test_a_model_without_a_chat_template_is_refused_at_load(tiny, tmp_path):
    """Every request is rendered with the chat template: a base model failed at its first call,
    with a traceback, after the run had started writing."""
    import shutil

    base = tmp_path / "base"
    shutil.copytree(tiny, base)
    (base / "chat_template.jinja").unlink()
    with pytest.raises(UsageError, match="has no chat template"):
        backend(base)


@pytest.mark.parametrize("path", ["fast", "generate"])
def test_a_reply_ends_at_every_end_of_sequence_the_checkpoint_names(tiny, tmp_path, path):
    """A chat model's `generation_config.json` may name several ends (an end of turn beside an end of
    text): `generate()` stopped at them, the fast path only at the tokenizer's, writing on past the
    reply's end until `max_new_tokens`."""
    stops = with_generation_config(tiny, tmp_path, eos_token_id=[2, first_token(backend(tiny, path))])
    reply = greedy(backend(stops, path))
    assert (reply.text, reply.completion_tokens, reply.finish_reason) == ("", 0, "stop")


def test_the_checkpoints_own_decoding_defaults_reach_no_path(tiny, tmp_path):
    """Greedy tokens of the `generate` path equal the fast path's on a checkpoint whose generation
    config suppresses the reply's first token and penalises repeats: neither the manifest nor our
    loops know of such settings, and the `generate` path applied them."""
    strict = with_generation_config(tiny, tmp_path, suppress_tokens=[first_token(backend(tiny))],
                                    repetition_penalty=5.0)
    fast, plain = (greedy(backend(strict, path), n=12) for path in ("fast", "generate"))
    assert plain.text == fast.text == greedy(backend(tiny), n=12).text


def test_sampling_keeps_the_whole_nucleus_not_transformers_default_top_50(tiny):
    """`generate()` keeps the 50 most likely tokens unless told otherwise; a sampled request says
    temperature and top_p only (sampled requests with logprobs take that path on every device)."""
    b = backend(tiny)
    req = ChatRequest(PROMPT, SamplingParams(16, 1.0, 1.0), seed=3, logprobs=50)
    tokens = b._generate([req])[0].logprobs
    outside = [t for t in tokens if t.logprob < min(t.top.values())]
    assert len(outside) > len(tokens) // 2  # a random model's next token is close to uniform over 49k


def test_greedy_calls_keep_distributions_only_when_logprobs_are_asked(tiny, monkeypatch):
    """Each kept log-softmax held its step's whole (rows, vocabulary) tensor: greedy stories
    (`--temperature 0`) of 400 tokens at batch 48 held 3.8 GB for nothing."""
    import generate.backends.hf.backend as hf

    kept = []

    def recording(*args, **kwargs):
        outs = real(*args, **kwargs)
        kept.append(sum(len(dists) for _, dists in outs))
        return outs

    real = hf.greedy_with_prefix
    monkeypatch.setattr(hf, "greedy_with_prefix", recording)
    b = backend(tiny)
    plain, scored = greedy(b), greedy(b, logprobs=2)
    assert kept[0] == 0 and kept[1] == len(scored.logprobs) > 0
    assert plain.text == scored.text and plain.logprobs is None


def test_a_token_limit_the_context_cannot_hold_is_refused_not_failed_prompt_by_prompt(tiny):
    """Every prompt failed for good, exit 1, with a message that said to shorten the prompt."""
    b = backend(tiny)  # a context of 256 tokens
    with pytest.raises(UsageError, match="max_new_tokens 256 leaves no room for a prompt"):
        b._generate([ChatRequest(PROMPT, SamplingParams(256, 0.9, 0.9), seed=1)])
    long = [{"role": "user", "content": "rain " * 300}]  # a prompt too long for a limit that fits: refused alone
    refused, ok = b._generate([ChatRequest(long, SamplingParams(8, 0.9, 0.9), seed=1),
                               ChatRequest(PROMPT, SamplingParams(8, 0.9, 0.9), seed=1)])
    assert "exceeds the model's context" in refused.error and ok.error is None
