"""transformers backend: batched, left-padded generation with the model's chat template.

Also offers teacher-forced scoring (`score`), which the surprisal metric needs and which
chat APIs cannot give.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from contextlib import nullcontext
from functools import cache

import torch
from torch.nn.attention import sdpa_kernel
from transformers import GenerationConfig

from generate.backends.base import Backend, ChatRequest, Completion, TokenLogprob
from generate.backends.hf.decode import sample_batch
from generate.backends.hf.device import (decode_sdpa_backends, decode_token_budget, pick_dtype, rounding_warning,
                                         store_budget, store_reserve)
from generate.backends.hf.passes import chunks
from generate.backends.hf.prefix import greedy_with_prefix
from generate.backends.hf.static import sample_static
from generate.backends.hf.store import PrefixStore
from generate.backends.identity import model_identity
from generate.common.errors import UsageError
from generate.common.machine import release_free_memory

log = logging.getLogger(__name__)

# `fast`: our decode loops (`decode.py`: sampled, per-request random streams; `prefix.py`: greedy
# with shared prefixes encoded once), on every device, and on a CPU whatever the CPU folder
# (`generate/backends/cpu/`) speeds up there: packed bf16 weights, attention kernels, a fused
# Llama step. `generate`: transformers' `generate()` on each batch with the model as loaded, kept
# so `scripts/bench_engines.py` can measure the difference. `static`: sampled requests decoded on a
# static cache, the step replayed as a CUDA graph on CUDA (`static.py`), in batches sized by the
# card's memory; greedy requests as in `fast`.
PATHS = ("fast", "generate", "static")
STATIC_ROWS = 512  # requests one batch of the static path may take (its memory splits it further)
SCORE_TOKENS = 16384  # padded tokens per scoring pass: bounds its bf16 logits at a 49k vocabulary


@cache
def _cpu_folder():
    """The CPU folder (`generate.backends.cpu`), or None where it cannot be imported: the backend
    then runs transformers' forward with SDPA, slower, with the same interfaces. Imported once, on
    first use, because it registers an attention implementation with transformers."""
    try:
        from generate.backends import cpu
    except Exception as exc:  # noqa: BLE001 (absent, or broken by a torch/transformers change: SDPA still works)
        log.warning("hf backend: no CPU speed-ups (%s: %s); decoding with transformers' SDPA path",
                    type(exc).__name__, exc)
        return None
    return cpu


def default_path(device: str) -> str:
    """`static` on CUDA, `fast` elsewhere; $REVIEW_LAB_HF_PATH overrides both (a measurement's or a
    workaround's switch, recorded like any path in the backend's `describe()`)."""
    return os.environ.get("REVIEW_LAB_HF_PATH") or ("static" if device.startswith("cuda") else "fast")


def _load(model: str, dtype: torch.dtype, device: str):
    """The tokenizer and model behind `model`, or one `UsageError` line saying why not: no model
    there (a missing, empty or unrelated directory, an unknown hub id) or no chat template (a base
    model: every request and every scored pair is rendered with it, so it would fail at the first
    call, after the run had started writing)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(model, padding_side="left")
        if not tokenizer.chat_template:
            raise UsageError(f"hf model {model!r} has no chat template: the hf backend renders every request "
                             "with it; use an instruct (chat) model")
        lm = AutoModelForCausalLM.from_pretrained(model, dtype=dtype).to(device).eval()
    except (OSError, ValueError) as exc:  # ValueError: a directory holding no tokenizer, no model config
        raise UsageError(f"cannot load hf model {model!r}: {str(exc).strip().splitlines()[0]}") from None
    return tokenizer, lm


def stop_ids(tokenizer, generation_config) -> frozenset[int]:
    """Every token that ends a reply, for every path: the tokenizer's end of sequence and padding,
    and the end-of-sequence ids the checkpoint's `generation_config.json` names (a list for some chat
    models: an end of turn beside an end of text), which `generate()` alone would otherwise stop at."""
    eos = getattr(generation_config, "eos_token_id", None)
    ids = {tokenizer.eos_token_id, tokenizer.pad_token_id, *(eos if isinstance(eos, list) else [eos])}
    return frozenset(int(i) for i in ids if i is not None)


def numerics_fields(accel) -> dict:
    """The manifest's record of what computes a decode step (a `CpuAcceleration`, or None)."""
    return {"packed_linears": bool(accel and accel.packed_linears),
            "decode_attention": "kernel" if accel and accel.decode_kernel else "sdpa",
            "decode_step": "fused" if accel and accel.step else "transformers"}


class HFBackend(Backend):
    """Local transformers model; one engine call runs a whole batch."""

    supports_prefill = True
    # What changes the numbers a request gets: the weights (`identity`: a model retrained into the
    # same directory is another model), bf16 or float32 by the CPU (`pick_dtype`), the CPU folder's
    # decode kernel and fused step where they build (within bf16 rounding of transformers, not bit
    # for bit). Packing changes no number.
    NUMERICS = ("dtype", "device", "decode_attention", "decode_step", "identity")
    SAMPLING = ("path",)  # `generate` seeds a batch from its first request, the own loops each request

    def __init__(self, model: str, *, batch_size: int = 8, dtype: str = "auto", device: str | None = None,
                 path: str | None = None):
        super().__init__(model)
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        path = path or default_path(self.device)
        if path not in PATHS:
            raise UsageError(f"unknown hf path {path!r}; choose one of: {', '.join(PATHS)}")
        self.path = path
        self.batch_size = batch_size
        # Sequences later prompts start with (fast path).
        self.store = PrefixStore(store_budget(self.device), store_reserve(self.device))
        self.dtype = pick_dtype(dtype, self.device)
        if warning := rounding_warning(model, dtype, self.dtype):
            log.warning("%s", warning)
        self.tokenizer, self.lm = _load(model, self.dtype, self.device)
        self.identity = model_identity(model)  # of the weights just loaded, whatever replaces them later
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.stop = stop_ids(self.tokenizer, self.lm.generation_config)
        # A request's decoding settings are all there is to its decoding (what manifests record, what
        # our loops apply): the checkpoint's own sampling defaults (a `repetition_penalty`, a `top_k`)
        # would reach the `generate` path alone, so its generation config keeps only the token ids.
        self.lm.generation_config = GenerationConfig(bos_token_id=self.lm.generation_config.bos_token_id,
                                                     eos_token_id=sorted(self.stop),
                                                     pad_token_id=self.tokenizer.pad_token_id)
        # What the CPU folder speeds up for this model (None: nothing, or no folder): it may pack the
        # model's weights and route its attention through its kernels, so it is asked once, here.
        cpu = _cpu_folder() if path == "fast" else None
        self.accel = cpu.accelerate(self.lm) if cpu is not None else None
        self.step = self.accel.step if self.accel else None  # None: transformers' forward (`passes.py`)
        self.encode = self.accel.encode if self.accel else None
        # Positions beyond the trained context give garbage (or an index error) and one huge prompt
        # padded into a batch costs every row its memory: such requests are refused one by one.
        self.context_length: int | None = getattr(self.lm.config, "max_position_embeddings", None)
        self._lock = threading.Lock()  # one forward pass at a time: torch already uses every core

    def describe(self) -> dict:
        return {**super().describe(), "dtype": str(self.dtype).removeprefix("torch."), "device": self.device,
                "batch_size": self.batch_size, "path": self.path, **numerics_fields(self.accel),
                "identity": self.identity}

    def batch_limit(self, request: ChatRequest) -> int:
        """The static path takes a phase's sampled requests whole and splits them by the card's
        memory (`_static`); everything else goes in `batch_size` batches."""
        if self.path == "static" and request.params.temperature > 0 and request.logprobs is None:
            return max(self.batch_size, STATIC_ROWS)
        return self.batch_size

    def counters(self) -> dict[str, int]:
        st = self.store
        return {"prefix_hits": st.hits, "prefix_reused_tokens": st.reused_tokens, "prefix_evicted": st.evicted,
                "prefix_relieved": st.relieved}

    def render(self, req: ChatRequest) -> str:
        text = self.tokenizer.apply_chat_template(req.messages, add_generation_prompt=True, tokenize=False)
        return text + (req.prefill or "")

    async def generate(self, requests: list[ChatRequest]) -> list[Completion]:
        return await asyncio.to_thread(self._generate, requests)

    def _generate(self, requests: list[ChatRequest]) -> list[Completion]:
        texts = [self.render(r) for r in requests]
        lengths = [len(ids) for ids in self.tokenizer(texts, add_special_tokens=False)["input_ids"]]
        budget = requests[0].params.max_new_tokens
        if self.context_length is not None and budget >= self.context_length:
            # No prompt fits: each prompt failing for good would blame the prompts, run after run.
            raise UsageError(f"max_new_tokens {budget:,} leaves no room for a prompt: the model's context is "
                             f"{self.context_length:,} tokens; lower the token limit (--max-new-tokens)")
        fits = [i for i, n in enumerate(lengths) if self.context_length is None or n + budget <= self.context_length]
        results = [Completion(text="", prompt_tokens=n, finish_reason="error",
                              error=f"prompt of {n:,} tokens + {budget} new tokens exceeds the model's context of "
                                    f"{self.context_length:,} tokens") if i not in fits else None
                   for i, n in enumerate(lengths)]
        if fits:
            backends = decode_sdpa_backends(self.device)
            with sdpa_kernel(backends) if backends else nullcontext():
                done = self._generate_batch([texts[i] for i in fits], [requests[i] for i in fits])
            for i, comp in zip(fits, done):
                results[i] = comp
            if self.device == "cpu":
                # A batch frees gigabytes of prefill temporaries and evicted store entries, tensors
                # small enough to live on the heap, whose pages glibc keeps resident: without handing
                # them back, a long multi-round run grows until it is killed for memory.
                release_free_memory()
        return results

    @torch.inference_mode()
    def _generate_batch(self, texts: list[str], requests: list[ChatRequest]) -> list[Completion]:
        if self.path != "generate":
            if requests[0].params.temperature <= 0:
                return self._greedy_shared(texts, requests)
            if requests[0].logprobs is None:
                return self._static(texts, requests) if self.path == "static" else self._sampled(texts, requests)
        params, want = requests[0].params, requests[0].logprobs
        enc = self.tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(self.device)
        kwargs = {"max_new_tokens": params.max_new_tokens, "pad_token_id": self.tokenizer.pad_token_id,
                  "return_dict_in_generate": True, "output_logits": want is not None}
        if params.temperature > 0:  # top_k=0: else transformers' default keeps the 50 most likely tokens only
            kwargs.update(do_sample=True, temperature=params.temperature, top_p=params.top_p, top_k=0)
        else:
            kwargs.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        with self._lock:
            if requests[0].seed is not None:
                torch.manual_seed(requests[0].seed)
            try:
                out = self.lm.generate(**enc, **kwargs)
            except torch.OutOfMemoryError:
                # `Model` retries this batch one request at a time: give it the memory back first.
                if torch.cuda.is_available():
                    torch.cuda.empty_cache()
                raise
        new = out.sequences[:, enc["input_ids"].shape[1]:]
        prompt_lens = enc["attention_mask"].sum(dim=1).tolist()
        logprobs = torch.log_softmax(torch.stack(out.logits, dim=1).float(), dim=-1) if want is not None else None
        results = []
        for i, row in enumerate(new.tolist()):
            n = next((j for j, t in enumerate(row) if t in self.stop), len(row))
            comp = Completion(
                text=self.tokenizer.decode(row[:n], skip_special_tokens=True),
                prompt_tokens=int(prompt_lens[i]), completion_tokens=n,
                finish_reason="stop" if n < len(row) else "length")
            if logprobs is not None:
                comp.logprobs = self._token_logprobs(row[:max(n, 1)], logprobs[i], want)
            results.append(comp)
        return results

    def _sampled(self, texts: list[str], requests: list[ChatRequest]) -> list[Completion]:
        """Sampled requests through our decode loop (`decode.py`): a random stream per request
        (seeded by the request), no vocabulary sort, finished rows leave the batch."""
        prompts = [self.tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
        params = requests[0].params
        with self._lock:
            outs = sample_batch(self.lm, prompts, max_new_tokens=params.max_new_tokens,
                                temperature=params.temperature, top_p=params.top_p, seeds=[r.seed for r in requests],
                                pad_id=self.tokenizer.pad_token_id, stop_ids=self.stop, store=self.store,
                                step=self.step, encode=self.encode)
        return self._completions(prompts, outs)

    def _static(self, texts: list[str], requests: list[ChatRequest]) -> list[Completion]:
        """Sampled requests on the static path (`static.py`), in groups of similar length whose
        decode caches fit the card's memory (one group on a CPU)."""
        prompts = [self.tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
        params = requests[0].params
        budget = decode_token_budget(self.lm, self.device)
        groups = (chunks([len(p) + params.max_new_tokens for p in prompts], budget, STATIC_ROWS) if budget
                  else [list(range(len(prompts)))])
        outs: list[list[int]] = [[] for _ in prompts]
        with self._lock:
            for group in groups:
                done = sample_static(self.lm, [prompts[i] for i in group], max_new_tokens=params.max_new_tokens,
                                     temperature=params.temperature, top_p=params.top_p,
                                     seeds=[requests[i].seed for i in group], pad_id=self.tokenizer.pad_token_id,
                                     stop_ids=self.stop)
                for i, tokens in zip(group, done):
                    outs[i] = tokens
        return self._completions(prompts, outs)

    def _completions(self, prompts: list[list[int]], outs: list[list[int]]) -> list[Completion]:
        results = []
        for ids, tokens in zip(prompts, outs):
            n = next((j for j, t in enumerate(tokens) if t in self.stop), len(tokens))
            results.append(Completion(text=self.tokenizer.decode(tokens[:n], skip_special_tokens=True),
                                      prompt_tokens=len(ids), completion_tokens=n,
                                      finish_reason="stop" if n < len(tokens) else "length"))
        return results

    def _greedy_shared(self, texts: list[str], requests: list[ChatRequest]) -> list[Completion]:
        """Greedy requests (the judge's logprob mode) with every shared prompt prefix encoded once
        (`prefix.py`): the same tokens and, up to float noise, the same logprobs
        as `generate()`, for a fraction of the prefill."""
        prompts = [self.tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
        want = requests[0].logprobs
        with self._lock:
            outs = greedy_with_prefix(self.lm, prompts, requests[0].params.max_new_tokens, self.tokenizer.pad_token_id,
                                      self.stop, self.batch_size, store=self.store, step=self.step,
                                      dists=want is not None)
        results = []
        for ids, (tokens, dists) in zip(prompts, outs):
            n = next((j for j, t in enumerate(tokens) if t in self.stop), len(tokens))
            comp = Completion(text=self.tokenizer.decode(tokens[:n], skip_special_tokens=True),
                              prompt_tokens=len(ids), completion_tokens=n,
                              finish_reason="stop" if n < len(tokens) else "length")
            if want is not None and tokens:
                comp.logprobs = self._token_logprobs(tokens[:max(n, 1)], torch.stack(dists), want)
            results.append(comp)
        return results

    def _token_logprobs(self, ids: list[int], lp: torch.Tensor, k: int) -> list[TokenLogprob]:
        out = []
        for t, tok in enumerate(ids):
            top = {}
            if k:
                vals, idx = lp[t].topk(k)
                top = {self.tokenizer.decode([j]): float(v) for v, j in zip(vals.tolist(), idx.tolist())}
            out.append(TokenLogprob(self.tokenizer.decode([tok]), float(lp[t, tok]), top))
        return out

    @torch.inference_mode()
    def score(self, pairs: list[tuple[list[dict[str, str]], str]],
              batch_size: int | None = None) -> list[list[float] | None]:
        """Teacher-forced log-probabilities of each continuation's tokens after its chat prompt.

        Args:
            pairs: (messages, continuation) tuples; the continuation is scored as the assistant reply.
            batch_size: sequences per forward pass (default: the backend's batch size).

        Returns:
            One list of natural-log token probabilities per pair; None for a pair longer than the
            model's context (`context_length`), which is left out of every batch.
        """
        size = batch_size or self.batch_size
        results: list[list[float] | None] = [[] for _ in pairs]
        encoded = []
        for messages, cont in pairs:
            prompt = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
            p_ids = self.tokenizer(prompt, add_special_tokens=False)["input_ids"]
            c_ids = self.tokenizer(cont, add_special_tokens=False)["input_ids"]
            encoded.append((p_ids, c_ids))
        limit = self.context_length
        too_long = {i for i, (p, c) in enumerate(encoded) if limit is not None and len(p) + len(c) > limit}
        for i in too_long:
            results[i] = None
        fits = [i for i in range(len(pairs)) if i not in too_long]
        pad = self.tokenizer.pad_token_id
        for group in chunks([len(encoded[i][0]) + len(encoded[i][1]) for i in fits], SCORE_TOKENS, max_rows=size):
            idx = [fits[g] for g in group]
            seqs = [encoded[i][0] + encoded[i][1] for i in idx]
            width = max(len(s) for s in seqs)
            ids = torch.full((len(idx), width), pad, dtype=torch.long)
            for r, s in enumerate(seqs):  # right padding: positions stay aligned with the prompt
                ids[r, :len(s)] = torch.tensor(s)
            # Only positions that predict a continuation token go through the vocabulary projection
            # (`logits_to_keep`: from the shortest prompt's last token on). No mask: with right
            # padding a real token never attends to padding, so SDPA takes its causal fast path.
            first = min(len(encoded[i][0]) for i in idx) - 1
            with self._lock:
                logits = self.lm(input_ids=ids.to(self.device),
                                 logits_to_keep=torch.arange(first, width - 1, device=self.device)).logits
            for r, i in enumerate(idx):
                p_len, c_len = len(encoded[i][0]), len(encoded[i][1])
                if c_len == 0:
                    continue
                # log_softmax at the target only (logit - logsumexp, one row's fp32 copy at a time):
                # a whole batch's fp32 log-probabilities over 49k tokens cost gigabytes of traffic.
                rows = logits[r, p_len - 1 - first:p_len + c_len - 1 - first].float()
                tgt = ids[r, p_len:p_len + c_len].to(rows.device)
                lp = rows.gather(-1, tgt[:, None]).squeeze(-1) - torch.logsumexp(rows, dim=-1)
                results[i] = lp.tolist()
        return results

    def close(self) -> None:
        self.lm = None

