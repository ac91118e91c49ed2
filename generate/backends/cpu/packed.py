"""Linear layers with their weights packed once into oneDNN's blocked layout (bf16 on CPU).

A decode step multiplies a few rows by every weight of the model. `nn.Linear` hands oneDNN a
plain row-major weight, and oneDNN re-lays it out for its kernel at every call, so a decode step's
products run at a fraction of the memory's bandwidth. The same products on a weight packed once
(`mkldnn._reorder_linear_weight`, what `torch.compile`'s CPU freezing pass does) give bit for bit
the same results, faster: oneDNN runs the same kernel either way, the plain weight only costs its
reorder. Prefill (hundreds of rows per product) runs at the same speed either way.

Only bf16 is packed: in float32 `nn.Linear` takes MKL's GEMM, so a packed weight would move the
logits by ~1e-4 and change what a seed samples.
"""

from __future__ import annotations

import torch
from torch import nn

DECODE_ROWS = 16  # the batch size oneDNN is told to expect: decode steps, where packing pays


def can_pack(dtype: torch.dtype, device: str) -> bool:
    """Packed bf16 weights need a CPU with native bf16 and PyTorch's oneDNN ops."""
    return (dtype == torch.bfloat16 and str(device) == "cpu" and torch.backends.mkldnn.is_available()
            and hasattr(torch.ops.mkldnn, "_linear_pointwise") and torch.ops.mkldnn._is_mkldnn_bf16_supported())


def pack(weight: torch.Tensor) -> torch.Tensor:
    """A bf16 (out, in) weight in oneDNN's blocked layout, for `linear`."""
    return torch.ops.mkldnn._reorder_linear_weight(weight.detach().contiguous(), DECODE_ROWS)


def linear(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
    """x @ weight.T (+ bias) with a weight from `pack`."""
    return torch.ops.mkldnn._linear_pointwise(x, packed, bias, "none", [], "")


class PackedLinear(nn.Module):
    """`nn.Linear` for inference with the weight packed once; same outputs in bf16."""

    def __init__(self, linear: nn.Linear):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        with torch.no_grad():
            self.packed = pack(linear.weight)
        self.bias = None if linear.bias is None else linear.bias.detach()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return linear(x, self.packed, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, packed=oneDNN"


def pack_linears(model: nn.Module) -> int:
    """Replace every bf16 `nn.Linear` of an inference-only model by a `PackedLinear`; returns how
    many. The model can no longer be trained or saved (its linear weights live only packed)."""
    swaps = [(parent, name, child) for parent in model.modules() for name, child in parent.named_children()
             if type(child) is nn.Linear and child.weight.dtype == torch.bfloat16]
    for parent, name, child in swaps:
        setattr(parent, name, PackedLinear(child))
    return len(swaps)
