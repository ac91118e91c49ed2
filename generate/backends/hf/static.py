"""Sampled decoding for a GPU: one static cache per batch and, on CUDA, the decode step replayed
as a CUDA graph, so that a step costs the card's time and not the host's.

On an H200 the `fast` loop (`decode.py`) gave the bundled 135M writer about 600 completion
tokens/s, in batches of 48: tens of milliseconds a step for a model whose arithmetic takes well
under one, so the step's time goes to the host (transformers' modules launched kernel by kernel,
a growing mask, rows leaving the batch; inferred, not profiled there). Here every tensor of a step
has a fixed shape for the whole batch:

- **A static cache** (transformers' `StaticCache`) laid out once: prompts left-padded to one
  width W, room for the reply after it. Every row decodes until the last one is done (a finished
  row's tokens are ignored): shapes never change, so the step can be captured once.
- **A 4D boolean mask over the cache's columns**, updated in place: the prompt's real columns,
  then one more column per step. Columns not yet written hold nothing the mask lets through.
- **The step as a CUDA graph** (`torch.cuda.CUDAGraph`): captured once per batch after one warm-up
  step, then replayed with the step's token, positions and mask written into its input buffers.
  On a CPU the same loop runs eagerly (no graph): the tests check its tokens there.
- **Sampling** is the `fast` loop's (`sampling.sample`): a random stream per request, so a
  request's tokens depend on its seed, not on its neighbours.
- **Attention kernels**: the hf backend's decode kernels (`device.decode_sdpa_backends`: no cuDNN
  on CUDA), set by the loop itself, so whoever calls it (the backend, `scripts/check_static.py`)
  checks and times the kernels the backend runs, never torch's own choice.

No prefix store: a GPU prefills a batch's prompts in a fraction of its decode time.
"""

from __future__ import annotations

import logging
from contextlib import nullcontext

import torch
from torch.nn.attention import sdpa_kernel
from transformers import StaticCache

from generate.backends.hf import device as hf_device
from generate.backends.hf.sampling import generators, sample

log = logging.getLogger(__name__)
_GRAPHS_FAILED: str | None = None  # why a capture failed in this process: later batches decode eagerly
ROW_MULTIPLE = 8  # batch rows are padded to a multiple of this (fewer distinct graph shapes)
LENGTH_MULTIPLE = 64  # cache columns likewise


def capture_failure() -> str | None:
    """Why a CUDA graph capture failed in this process (later batches then decode eagerly); None
    if none has: what a benchmark reports beside the static path's speed."""
    return _GRAPHS_FAILED


def round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def attention_kernels(device: torch.device | str):
    """A context that lets SDPA use only the backend's decode kernels on `device` (none on a CPU:
    torch's choice there, as in the backend)."""
    backends = hf_device.decode_sdpa_backends(str(device))
    return sdpa_kernel(backends) if backends else nullcontext()


def layout(prompts: list[list[int]], pad_id: int, rows: int, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids (rows, width) left-padded, real (rows, width) bool: the prompts' real columns). Rows
    past the prompts are all padding, with their first column marked real so they attend to
    something (an all-masked query row gives NaN, which would reach the cache)."""
    ids = torch.full((rows, width), pad_id, dtype=torch.long)
    real = torch.zeros((rows, width), dtype=torch.bool)
    for r, p in enumerate(prompts):
        ids[r, width - len(p):] = torch.tensor(p)
        real[r, width - len(p):] = True
    real[len(prompts):, 0] = True
    return ids, real


def prefill_mask(real: torch.Tensor, columns: int) -> torch.Tensor:
    """(rows, 1, W, columns) bool on `real`'s device: causal over the prompt, real keys only, plus
    each query's own column (a padding query attends to itself alone: finite values, never read by
    a real one). Written in place, so a phase of hundreds of long prompts needs the mask's own
    bytes (rows x W x columns) and one W x W causal block beside them; built where it is used (on
    a GPU, not on the host and then copied)."""
    rows, width = real.shape
    out = torch.zeros((rows, 1, width, columns), dtype=torch.bool, device=real.device)
    square = out[:, 0, :, :width]  # a strided view, written through by `out=`
    causal = torch.ones((width, width), dtype=torch.bool, device=real.device).tril()
    torch.logical_and(real[:, None, :], causal[None], out=square)
    square.diagonal(dim1=1, dim2=2).fill_(True)
    return out


class Step:
    """One decode step on fixed buffers: eager, or replayed from a CUDA graph.

    `run(tokens, positions)` writes its inputs into the buffers and returns the logits (rows, V);
    the caller has set the mask's new column first. The graph is captured on the first call after
    one eager warm-up step, whose cache writes the real step then overwrites (the cache's write
    position is reset to where the warm-up found it)."""

    def __init__(self, lm, cache: StaticCache, mask: torch.Tensor, graphs: bool):
        self.lm, self.cache, self.mask = lm, cache, mask
        rows = mask.shape[0]
        self.tokens = torch.zeros((rows, 1), dtype=torch.long, device=mask.device)
        self.positions = torch.zeros((rows, 1), dtype=torch.long, device=mask.device)
        self.graphs, self.graph, self.logits = graphs, None, None

    def _forward(self) -> torch.Tensor:
        return self.lm(input_ids=self.tokens, position_ids=self.positions, attention_mask=self.mask,
                       past_key_values=self.cache, use_cache=True).logits[:, -1]

    def run(self, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        self.tokens.copy_(tokens[:, None])
        self.positions.copy_(positions[:, None])
        if self.graphs and self.graph is None:
            self._capture()
        if not self.graphs:
            return self._forward()
        self.graph.replay()
        return self.logits

    def _capture(self) -> None:
        """Warm up, then capture the step; a model whose forward cannot be captured (a host sync
        inside, say) is decoded eagerly from then on, with one warning."""
        global _GRAPHS_FAILED
        lengths = [layer.cumulative_length.clone() for layer in self.cache.layers]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            self._forward()  # warm-up: lazy kernels and workspaces, outside the capture
        torch.cuda.current_stream().wait_stream(side)
        self._rewind(lengths)
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                self.logits = self._forward()
        except RuntimeError as exc:
            _GRAPHS_FAILED = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            log.warning("hf static path: the decode step cannot be captured as a CUDA graph (%s); decoding "
                        "eagerly", _GRAPHS_FAILED)
            self.graphs = False
            self._rewind(lengths)
            return
        self._rewind(lengths)  # the capture recorded the step's writes; it did not run them
        self.graph = graph

    def _rewind(self, lengths: list[torch.Tensor]) -> None:
        for layer, n in zip(self.cache.layers, lengths):
            layer.cumulative_length.copy_(n)


@torch.inference_mode()
def sample_static(lm, prompts: list[list[int]], *, max_new_tokens: int, temperature: float, top_p: float,
                  seeds: list[int | None], pad_id: int, stop_ids: set[int], graphs: bool | None = None
                  ) -> list[list[int]]:
    """Sampled continuations of the prompts, decoded together on a static cache (see the module).

    `graphs`: replay the step as a CUDA graph (default: on CUDA). Returns per prompt the generated
    tokens, a stop token (if reached) last, as `decode.sample_batch` does."""
    with attention_kernels(lm.device):
        return _sample_static(lm, prompts, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p,
                              seeds=seeds, pad_id=pad_id, stop_ids=stop_ids, graphs=graphs)


def _sample_static(lm, prompts: list[list[int]], *, max_new_tokens: int, temperature: float, top_p: float,
                   seeds: list[int | None], pad_id: int, stop_ids: set[int], graphs: bool | None) -> list[list[int]]:
    device = lm.device
    graphs = device.type == "cuda" and _GRAPHS_FAILED is None if graphs is None else graphs
    n, width = len(prompts), max(len(p) for p in prompts)
    rows, columns = round_up(n, ROW_MULTIPLE), round_up(width + max_new_tokens, LENGTH_MULTIPLE)
    ids, real = layout(prompts, pad_id, rows, width)
    cache = StaticCache(config=lm.config, max_cache_len=columns)
    positions = (real.cumsum(dim=1) - 1).clamp_min(0)
    logits = lm(input_ids=ids.to(device), position_ids=positions.to(device),
                attention_mask=prefill_mask(real.to(device), columns), past_key_values=cache, use_cache=True,
                logits_to_keep=1).logits[:, -1]
    mask = torch.zeros((rows, 1, 1, columns), dtype=torch.bool)
    mask[:, 0, 0, :width] = real
    mask = mask.to(device)
    step = Step(lm, cache, mask, graphs)
    streams = generators(seeds)
    next_pos = positions[:, -1].to(device) + 1
    tokens: list[list[int]] = [[] for _ in prompts]
    live = set(range(n))
    chosen = torch.full((rows,), pad_id, dtype=torch.long, device=device)
    for i in range(max_new_tokens):
        chosen[:n] = sample(logits[:n], temperature, top_p, streams)
        for r, t in enumerate(chosen[:n].tolist()):
            if r in live:
                tokens[r].append(t)
                if t in stop_ids or i == max_new_tokens - 1:
                    live.discard(r)
        if not live:
            break
        mask[:, 0, 0, width + i] = True
        logits = step.run(chosen, next_pos)
        next_pos += 1
    return tokens
