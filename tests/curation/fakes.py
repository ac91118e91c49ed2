"""Scripted curation agents for testing our own logic (protocol, ablations, batching, resume),
never a stand-in for a model's judgement in an end-to-end test."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path

from generate.backends import Backend, ChatRequest, Completion, Model, RetryPolicy, TokenLogprob

STORY = re.compile(r"<<<STORY-\w+\n(.*?)\nSTORY-\w+>>>", re.DOTALL)
GOOD_DIGIT = re.compile(r"Answer (\d) if the story is good")
STANDS_DIGIT = re.compile(r"Answer (\d) if the decision stands")


def story_of(request: ChatRequest) -> str:
    match = STORY.search(request.messages[-1]["content"])
    return match.group(1) if match else ""


def verdict_reply(p_one: float, prefilled: bool = True) -> Completion:
    """A logprob-mode verdict with P("1") = p_one over {0, 1}. Like SmolLM2 after a prefilled
    "Score:", it first emits a space whose top alternatives hold an improbable "1"."""
    digit = "1" if p_one >= 0.5 else "0"
    top = {"1": math.log(max(p_one, 1e-9)), "0": math.log(max(1 - p_one, 1e-9))}
    tokens = [TokenLogprob(" ", -0.01, {" ": -0.01, "1": -8.0}), TokenLogprob(digit, top[digit], top)]
    if not prefilled:
        tokens = [TokenLogprob("Score", -0.1, {}), TokenLogprob(":", -0.1, {})] + tokens
    return Completion(text=f" {digit}", prompt_tokens=50, completion_tokens=2, logprobs=tokens)


class CurationBackend(Backend):
    """Answers each agent by a rule on the story it reads.

    Args:
        good: P(the judge calls the story good), from the story text.
        stands: P(the reflect agent lets the decision stand), from the story text.
        lists: the reply (after the prefilled "1.") of the Positive / Negative agent, from
            (agent, story).
        sample: answer verdicts with a sampled-style reply ("... Score: d") instead of logprobs.
    """

    batch_size = 64

    def __init__(self, good: Callable[[str], float] = lambda s: 0.9 if "brilliant" in s else 0.1,
                 stands: Callable[[str], float] = lambda s: 0.9,
                 lists: Callable[[str, str], str] | None = None, sample: bool = False, prefill: bool = True):
        super().__init__("scripted-curator")
        self.good, self.stands, self.sample = good, stands, sample
        self.lists = lists or (lambda agent, story: " Vivid images.\n2. A fresh idea.\n3. Tight plot."
                               if agent == "positive" else " Clichéd ending.\n2. Flat hero.")
        self.supports_prefill = prefill
        self.requests: list[ChatRequest] = []
        self.batches: list[int] = []

    async def generate(self, requests: list[ChatRequest]) -> list[Completion]:
        self.requests.extend(requests)
        self.batches.append(len(requests))
        return [self.answer(r) for r in requests]

    def answer(self, r: ChatRequest) -> Completion:
        text, story = r.messages[-1]["content"], story_of(r)
        for agent, cue in (("positive", "looking for what works"), ("negative", "looking for what fails")):
            if cue in text:
                return Completion(text=self.lists(agent, story), prompt_tokens=40, completion_tokens=12)
        if match := GOOD_DIGIT.search(text):
            p_yes = self.good(story)
        elif match := STANDS_DIGIT.search(text):
            p_yes = self.stands(story)
        else:
            raise AssertionError(f"unexpected request: {text[:200]}")
        p_one = p_yes if match.group(1) == "1" else 1 - p_yes
        if self.sample:
            digit = int(p_one >= 0.5)
            return Completion(text=f"It reads well enough.\nScore: {digit}", prompt_tokens=50, completion_tokens=9)
        return verdict_reply(p_one, self.supports_prefill)


def model_of(backend: Backend) -> Model:
    return Model(backend, policy=RetryPolicy(retries=0, empty_retries=0))


def save_tiny_reward_model(run: Path, max_positions: int = 96) -> Path:
    """A 1-layer Llama reward head with SmolLM2's tokenizer, saved like a trained run (`run/merged/`)."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForSequenceClassification

    from train.model import resolve_model_path

    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path("smollm2-135m-instruct"))
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=max_positions,
                         num_labels=1, pad_token_id=tokenizer.pad_token_id)
    LlamaForSequenceClassification(config).save_pretrained(run / "merged")
    tokenizer.save_pretrained(run / "merged")
    return run
