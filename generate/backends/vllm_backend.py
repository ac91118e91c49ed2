"""Offline vLLM engine (GPU only; vLLM has no CPU wheel), imported lazily.

The request/result translation is kept in pure functions so that it is unit-tested on
machines without vLLM.
"""

from __future__ import annotations

import asyncio
from typing import Any

from generate.backends.base import Backend, ChatRequest, Completion, TokenLogprob
from generate.backends.identity import model_identity
from generate.common.errors import UsageError


def sampling_kwargs(req: ChatRequest) -> dict[str, Any]:
    """Keyword arguments for `vllm.SamplingParams` equivalent to our request."""
    kw: dict[str, Any] = {"max_tokens": req.params.max_new_tokens, "temperature": req.params.temperature,
                          "top_p": req.params.top_p if req.params.temperature > 0 else 1.0, "seed": req.seed}
    if req.logprobs is not None:
        kw["logprobs"] = max(req.logprobs, 1)
    return kw


def chat_messages(req: ChatRequest) -> list[dict[str, str]]:
    """The conversation to send; a prefill becomes a final assistant turn that vLLM continues."""
    if req.prefill is None:
        return req.messages
    return [*req.messages, {"role": "assistant", "content": req.prefill}]


def to_completion(output: Any, want_logprobs: bool) -> Completion:
    """Translate one `vllm.RequestOutput` into our Completion."""
    gen = output.outputs[0]
    comp = Completion(text=gen.text, prompt_tokens=len(output.prompt_token_ids or []),
                      completion_tokens=len(gen.token_ids), finish_reason=gen.finish_reason)
    if want_logprobs and gen.logprobs is not None:
        comp.logprobs = []
        for tok_id, alternatives in zip(gen.token_ids, gen.logprobs):
            chosen = alternatives[tok_id]
            top = {lp.decoded_token: lp.logprob for lp in alternatives.values()}
            comp.logprobs.append(TokenLogprob(chosen.decoded_token, chosen.logprob, top))
    return comp


class VLLMBackend(Backend):
    """All requests of a phase go to `LLM.generate` at once; vLLM schedules them itself."""

    batch_size = 1 << 20
    supports_prefill = True
    # The weights: a local directory by its content hash (read once, as vLLM reads it to load), a
    # hub id by its name only.
    NUMERICS = ("identity",)

    def __init__(self, model: str, **engine_kwargs: Any):
        super().__init__(model)
        try:
            import vllm
        except ImportError:
            raise UsageError("the vllm backend needs vLLM on a GPU machine: pip install -e '.[gpu]'") from None
        self._vllm = vllm
        self.llm = vllm.LLM(model=model, **engine_kwargs)
        self.identity = model_identity(model)  # of the weights just loaded, whatever replaces them later

    def describe(self) -> dict:
        return {**super().describe(), "identity": self.identity}

    async def generate(self, requests: list[ChatRequest]) -> list[Completion]:
        return await asyncio.to_thread(self._generate, requests)

    def _generate(self, requests: list[ChatRequest]) -> list[Completion]:
        # `Model` never mixes prefilled and plain requests in one call.
        prefill = requests[0].prefill is not None
        conversations = [chat_messages(r) for r in requests]
        params = [self._vllm.SamplingParams(**sampling_kwargs(r)) for r in requests]
        outputs = self.llm.chat(conversations, params, use_tqdm=False,
                                add_generation_prompt=not prefill, continue_final_message=prefill)
        return [to_completion(o, r.logprobs is not None) for o, r in zip(outputs, requests)]
