"""CPU-only speed-ups for the hf backend, behind one seam: `accelerate(lm)`.

- `packed.py`: linear weights packed once for oneDNN (bf16; the same numbers as `nn.Linear`);
- `attention.py` + `csrc/`: C++ attention kernels (a decode step's one token per row; causal
  prefill), compiled on first use and registered with transformers' attention registries;
- `fused.py`: a Llama-family decode step and prefill pass in nine calls a layer.

These call private torch ops (`torch.ops.mkldnn`) and hook into transformers' internals, so a
torch or transformers upgrade may break them: the hf backend asks this folder once per model what
it can do and, where the folder cannot be imported, runs transformers' forward with SDPA instead
(slower, the same interfaces, and the numbers of the SDPA path). Nothing outside this folder
imports its modules; `tests/generate/test_without_cpu.py` runs generation and evaluation with it
blocked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from generate.backends.cpu.attention import use_decode_kernel
from generate.backends.cpu.fused import FusedDecoder, unsupported
from generate.backends.cpu.packed import can_pack, pack_linears

__all__ = ["CpuAcceleration", "accelerate"]


@dataclass(frozen=True)
class CpuAcceleration:
    """What `accelerate` set up for a model.

    Attributes:
        step: one decode step (`hf.passes.hf_step`'s contract, without the model), or None for
            transformers' forward.
        encode: one prefill pass (`hf.passes.hf_encode`'s contract), or None.
        packed_linears: the model's bf16 linear weights are packed for oneDNN (same numbers).
        decode_kernel: the model's attention goes through our kernels (`attention.py`).
    """

    step: Callable | None
    encode: Callable | None
    packed_linears: bool
    decode_kernel: bool


def accelerate(lm) -> CpuAcceleration | None:
    """Speed up an inference-only model in place where this machine allows; None where nothing
    applies (not a CPU, not bf16, no oneDNN bf16, no AVX-512): the caller keeps transformers' path.

    The fused step takes the plain weights, so it is built before the linears are packed; the
    attention kernel takes bf16 only, as packing does."""
    decoder = FusedDecoder(lm) if unsupported(lm) is None else None
    packed = can_pack(lm.dtype, str(lm.device)) and pack_linears(lm) > 0
    kernel = packed and use_decode_kernel(lm)
    if decoder is None and not packed and not kernel:
        return None
    return CpuAcceleration(decoder, decoder.encode if decoder is not None else None, packed, kernel)
