"""Items beyond a limit fail alone, with a reason naming the limit, and the run goes on: a prompt
longer than the model's context (hf: refused per request; an OpenAI-compatible server: its 400
for that request), a story the judge or the embedder runs out of memory on."""

from __future__ import annotations

import json

import pytest

from eval.run import EvalConfig, Evaluator
from generate.backends import Backend, Completion, Model, RetryPolicy, TokenLogprob
from generate.common.jsonl import read_jsonl
from generate.runner import PromptsFailed, RunConfig, Runner
from tests.embedders import CountingEmbedder
from tests.faults.conftest import RUBRIC, openai_model, write_corpus

HUGE = "word " * 9000  # > 8,192 tokens (SmolLM2's context), > 4,096 (the llama.cpp test server's)


def dataset(path) -> str:
    rows = [{"id": "short-1", "aspect": "Test", "prompt": "Write about a comet."},
            {"id": "huge-1", "aspect": "Test", "prompt": f"Write about this: {HUGE}"},
            {"id": "short-2", "aspect": "Test", "prompt": "Write about a robot."}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def run_single(tmp_path, model, spec: str) -> tuple[PromptsFailed, list[dict]]:
    cfg = RunConfig(framework="single", model=spec, dataset=dataset(tmp_path / "prompts.jsonl"), max_new_tokens=4,
                    out=str(tmp_path / "run"))
    with pytest.raises(PromptsFailed) as info:
        Runner(cfg, model=model).run()
    return info.value, list(read_jsonl(tmp_path / "run" / "failed.jsonl"))


@pytest.mark.slow
def test_hf_prompt_beyond_the_context_fails_alone(tmp_path, default_model):
    failed, lines = run_single(tmp_path, default_model, "hf:smollm2")
    assert list(failed.failed) == ["huge-1"]
    assert "exceeds the model's context of 8,192 tokens" in lines[0]["reason"]
    stories = list(read_jsonl(tmp_path / "run" / "stories.jsonl"))
    assert sorted(s["prompt_id"] for s in stories) == ["short-1", "short-2"]


@pytest.mark.slow
@pytest.mark.server
def test_openai_prompt_beyond_the_context_fails_alone(tmp_path, llama_server):
    model = openai_model(llama_server.base_url, llama_server.api_key)
    failed, lines = run_single(tmp_path, model, "openai:smollm2")
    assert list(failed.failed) == ["huge-1"]
    assert "maximum context length is 4096 tokens" in lines[0]["reason"]
    assert model.stats.retries == {}  # refused once, not retried
    stories = list(read_jsonl(tmp_path / "run" / "stories.jsonl"))
    assert sorted(s["prompt_id"] for s in stories) == ["short-1", "short-2"]


class OutOfMemoryOnHugeStories(Backend):
    """A prefilling judge that scores 1 everywhere, but whose batch dies (like torch's CUDA OOM,
    a RuntimeError) whenever it holds a huge story."""

    batch_size = 8
    supports_prefill = True

    def __init__(self, error: type[BaseException]):
        super().__init__("hf:oom-judge")
        self.error, self.batches = error, []

    async def generate(self, requests):
        self.batches.append(len(requests))
        if any(len(r.messages[-1]["content"]) > 20000 for r in requests):
            raise self.error("CUDA out of memory. Tried to allocate 9.00 GiB")
        return [Completion(" 1", prompt_tokens=10, completion_tokens=1,
                           logprobs=[TokenLogprob(" 1", -0.1, {" 1": -0.1, " 2": -2.4})]) for _ in requests]


class EmbedderOutOfMemory(CountingEmbedder):
    def encode(self, texts, batch_size: int = 32, show_progress: bool = False):
        if any("word word word" in t for t in texts):
            raise RuntimeError("CUDA out of memory")
        return super().encode(texts, batch_size, show_progress)


@pytest.mark.parametrize("error", [RuntimeError, MemoryError])
def test_judge_and_embedder_out_of_memory_on_one_story(tmp_path, monkeypatch, error):
    monkeypatch.setenv("SCIFI_CACHE_DIR", str(tmp_path / "cache"))
    stories = tmp_path / "stories.jsonl"
    texts = ["A comet sang.", HUGE, "Robots dream of rain."]
    stories.write_text("".join(json.dumps({"story_id": f"single/p{i}/w", "prompt_id": f"p{i}", "framework": "single",
                                           "agent": "w", "model": "m", "prompt": "Write.", "text": t}) + "\n"
                               for i, t in enumerate(texts)))
    backend = OutOfMemoryOnHugeStories(error)
    model = Model(backend, policy=RetryPolicy(retries=1, backoff=0.01))
    cfg = EvalConfig(stories=[str(stories)], out=str(tmp_path / "eval"), judge="hf:oom-judge", rubric=str(RUBRIC),
                     no_surprisal=True, chunk_stories=8, reference_dir=str(write_corpus(tmp_path / "corpus")))
    Evaluator(cfg, models={"hf:oom-judge": model}, embedder=EmbedderOutOfMemory()).run()
    scores = {r["story_id"]: r for r in read_jsonl(tmp_path / "eval" / "scores.jsonl")}
    huge = scores["single/p1/w"]
    assert huge["concepts"] is None and "out of memory" in huge["missing"]["concepts"]
    assert huge["novelty_cos"] is None and "out of memory" in huge["missing"]["novelty_cos"]
    assert huge["kl"] is not None  # what needs neither the judge nor the encoder is still there
    for sid in ("single/p0/w", "single/p2/w"):
        assert scores[sid]["concepts"] is not None and scores[sid]["novelty_cos"] is not None
    assert backend.batches[0] == 3 and model.stats.split_batches == 1  # split once, then one by one
    manifest = json.loads((tmp_path / "eval" / "manifest.json").read_text())
    assert manifest["reliability"]["hf:oom-judge"]["failed_calls"] == {error.__name__: 1}
