"""Offline vLLM engine (GPU only; vLLM has no CPU wheel), imported lazily.

The request/result translation is kept in pure functions so that it is unit-tested on
machines without vLLM.

A prompt longer than the model's context makes `LLM.chat` raise a ValueError for the whole call
("The decoder prompt (length N) is longer than the maximum model length of M"), before anything
is generated. So prompts are measured first, with the engine's tokenizer and the model's chat
template, and one that leaves no room for a token fails alone (`Completion.error`, as the hf
backend refuses it), while the others are generated. Should the engine still refuse a call for
that reason (a tokenizer that cannot be measured by), the error is raised as a RuntimeError,
which `Model` answers by splitting the batch, so that again only the offending request fails.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from generate.backends.base import Backend, ChatRequest, Completion, TokenLogprob
from generate.backends.identity import model_identity
from generate.common.errors import UsageError

log = logging.getLogger(__name__)
TOO_LONG = "longer than the maximum model length"  # vLLM's ValueError for a prompt beyond the context


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
        results: list[Completion | None] = list(self._refused(conversations, prefill))
        todo = [i for i, r in enumerate(results) if r is None]
        if todo:
            params = [self._vllm.SamplingParams(**sampling_kwargs(requests[i])) for i in todo]
            try:
                outputs = self.llm.chat([conversations[i] for i in todo], params, use_tqdm=False,
                                        add_generation_prompt=not prefill, continue_final_message=prefill)
            except ValueError as exc:
                if TOO_LONG not in str(exc):
                    raise
                raise RuntimeError(f"vLLM refused the batch: {exc}") from exc  # `Model` splits it (module doc)
            for i, output in zip(todo, outputs):
                results[i] = to_completion(output, requests[i].logprobs is not None)
        return results  # type: ignore[return-value]

    def _refused(self, conversations: list[list[dict]], prefill: bool) -> list[Completion | None]:
        """A failed Completion for each conversation whose prompt leaves no room in the context,
        None for the others (all None where the prompts cannot be measured: module doc)."""
        try:
            limit = int(self.llm.llm_engine.model_config.max_model_len)
            tokenizer = self.llm.get_tokenizer()
            lengths = [prompt_length(tokenizer, c, prefill) for c in conversations]
        except Exception as exc:  # noqa: BLE001 - measuring is a shortcut; the engine checks anyway
            log.debug("vllm: prompts not measured (%s: %s)", type(exc).__name__, exc)
            return [None] * len(conversations)
        return [Completion(text="", prompt_tokens=n, finish_reason="error",
                           error=f"prompt of {n:,} tokens leaves no room in the model's context of {limit:,} tokens")
                if n >= limit else None for n in lengths]


def prompt_length(tokenizer: Any, conversation: list[dict], prefill: bool) -> int:
    """Tokens of a conversation as `LLM.chat` renders it (the model's chat template)."""
    ids = tokenizer.apply_chat_template(conversation, tokenize=True, add_generation_prompt=not prefill,
                                        continue_final_message=prefill)
    if isinstance(ids, Mapping) or hasattr(ids, "input_ids"):  # a BatchEncoding (transformers 5's default)
        ids = ids["input_ids"]
    return len(ids)
