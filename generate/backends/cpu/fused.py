"""Decode steps (and the sampled path's prefill) for Llama-family models in bf16 on CPU, without
transformers' per-layer overhead.

A decode step runs one token per row through every layer. In transformers' forward each layer is
~40 PyTorch ops (RMSNorm alone is six, rotary ten), plus cache and mask bookkeeping in Python; on a
CPU at decode batch sizes the linear layers are well under half of a step, the rest being small
ops and the Python around them. Here a layer is nine calls:

- the query, key and value projections as one product (their weights stacked and packed once),
  and the gate and up projections as another: the same oneDNN kernel over the same reduction, so
  the same numbers as three (two) separate products, for fewer passes over the activations;
- RMSNorm (with the residual add before it), rotary embedding (with the key/value cache write
  after it) and SwiGLU's gate fused in `csrc/decode_ops.cpp`, rounding to bf16 where
  transformers' ops round;
- attention through the decode kernel (`attention.py`).

The sampled path's prefill goes through the same layers (`encode`; attention by our prefill kernel,
`csrc/prefill_attention.cpp`, where the CPU has AVX512_BF16, else transformers' SDPA): prefill is
compute-bound, but its small ops were still a noticeable share of a pass; the judge's greedy
prefill (`hf/prefix.py`) and teacher-forced scoring keep transformers' forward (their attention
reaches the same kernel through `attention.decode_attention_forward`). Logits equal the
model's own forward up to the order of fp32 sums, and where that rounds a value the other way
they stray no further from an fp32 reference than transformers' bf16 forward does
(`tests/generate/test_fused.py`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from generate.backends.cpu.attention import SHAPES, kernel, prefill_kernel
from generate.backends.cpu.packed import can_pack, linear, pack

if TYPE_CHECKING:  # the hf backend's decode cache, whose buffers a step writes into
    from generate.backends.hf.cache import RoomyCache


def unsupported(lm) -> str | None:
    """Why `lm` cannot take the fused step, or None when it can. The checks run in order and stop
    at the first that fails: the last builds the CPU kernel, which a model on a GPU must not wait for."""
    cfg = lm.config
    checks = {
        "model type is not llama": lambda: cfg.model_type != "llama",
        "not bf16 on a CPU with oneDNN": lambda: not can_pack(lm.dtype, str(lm.device)),
        "biased projections": lambda: bool(getattr(cfg, "attention_bias", False) or getattr(cfg, "mlp_bias", False)),
        "activation is not silu": lambda: getattr(cfg, "hidden_act", None) != "silu",
        "tensor-parallel pretraining slices": lambda: (getattr(cfg, "pretraining_tp", 1) or 1) != 1,
        "head shape outside the kernel's": lambda: (
            getattr(cfg, "head_dim", None) not in SHAPES["head_dim"]
            or cfg.num_attention_heads % cfg.num_key_value_heads
            or cfg.num_attention_heads // cfg.num_key_value_heads not in SHAPES["groups"]),
        "intermediate size not a multiple of 16": lambda: cfg.intermediate_size % 16 != 0,
        "no decode kernel on this machine": lambda: kernel() is None,
    }
    return next((why for why, bad in checks.items() if bad()), None)


class FusedDecoder:
    """`step(tokens, positions, mask, cache) -> logits` for a Llama-family model (see the module
    docstring). Built from the model's plain `nn.Linear` weights, before `pack_linears` replaces
    them; the output, down and vocabulary projections are called through the model's own modules
    (packed by then), so their weights are not held twice."""

    def __init__(self, lm):
        why = unsupported(lm)
        if why:
            raise ValueError(f"no fused decode step for this model: {why}")
        self.lm, self.ext = lm, kernel()
        cfg = lm.config
        self.heads, self.kv_heads, self.dim = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        # Prefill attention through our kernel where it runs (AVX512_BF16, head size 64), else SDPA.
        self.prefill = prefill_kernel() if self.dim == 64 and lm.dtype == torch.bfloat16 else None
        self.eps = cfg.rms_norm_eps
        self.scale = self.dim ** -0.5
        with torch.no_grad():
            self.qkv = [pack(torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight]))
                        for a in (layer.self_attn for layer in lm.model.layers)]
            self.gate_up = [pack(torch.cat([m.gate_proj.weight, m.up_proj.weight]))
                            for m in (layer.mlp for layer in lm.model.layers)]

    @torch.inference_mode()
    def __call__(self, tokens: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor,
                 cache: RoomyCache) -> torch.Tensor:
        """Logits (B, V) of one new token per row.

        Args:
            tokens, positions: (B,) each row's new token and its position.
            mask: (B, T) bool, the columns each row attends to, the new token's column last.
            cache: the rows' keys and values; the new token's are written at its next column.
        """
        ext, model = self.ext, self.lm.model
        batch = tokens.shape[0]
        x = model.embed_tokens(tokens)
        cos, sin = (t[:, 0].contiguous() for t in model.rotary_emb(x[:, None], positions[:, None]))
        h = ext.rms_norm(x, model.layers[0].input_layernorm.weight, self.eps)
        last = len(model.layers) - 1
        for i, layer in enumerate(model.layers):
            slot = cache.layers[i]
            col = slot.extend(1)
            q = ext.rope_store(linear(h, self.qkv[i]), cos, sin, slot._k, slot._v, col, self.heads)
            a = ext.decode_attention(q.view(batch, self.kv_heads, -1, self.dim), slot.keys, slot.values, mask,
                                     self.scale)
            h = ext.add_rms_norm(x, layer.self_attn.o_proj(a.view(batch, -1)), layer.post_attention_layernorm.weight,
                                 self.eps)
            m = layer.mlp.down_proj(ext.silu_mul(linear(h, self.gate_up[i])))
            after = model.norm if i == last else model.layers[i + 1].input_layernorm
            h = ext.add_rms_norm(x, m, after.weight, self.eps)
        return self.lm.lm_head(h)

    @torch.inference_mode()
    def encode(self, ids: torch.Tensor, positions: torch.Tensor, past: list[tuple[torch.Tensor, torch.Tensor]] | None,
               mask: torch.Tensor | None, keep: torch.Tensor) -> tuple[torch.Tensor, list[tuple[torch.Tensor, torch.Tensor]]]:
        """Prefill through the same fused layers (`hf.passes.hf_encode`'s contract): right-padded ids
        and their positions (b, s), each row after its `past` keys and values ((b, Hkv, P, D) per
        layer) or none, `mask` (b, P + s) over past and new columns (None: no past, causal). Returns
        the logits (b, len(keep), V) at the `keep` positions and every layer's keys and values
        (b, Hkv, P + s, D). Attention is our prefill kernel's (`self.prefill`), else SDPA's with the
        mask transformers would build."""
        ext, model = self.ext, self.lm.model
        batch, span = ids.shape
        x = model.embed_tokens(ids).view(batch * span, -1)
        cos, sin = (t.reshape(batch * span, -1) for t in model.rotary_emb(x.view(batch, span, -1), positions))
        allowed = None
        if self.prefill is not None:
            columns = mask.bool() if mask is not None else torch.empty(0, dtype=torch.bool)
        elif mask is not None:
            before = mask.shape[1] - span
            causal = torch.arange(mask.shape[1], device=ids.device) <= before + torch.arange(span, device=ids.device)[:, None]
            allowed = mask.bool()[:, None, None, :] & causal[None, None]
        h = ext.rms_norm(x, model.layers[0].input_layernorm.weight, self.eps)
        layers, last = [], len(model.layers) - 1
        for i, layer in enumerate(model.layers):
            k, v = (x.new_empty(batch, span, self.kv_heads, self.dim) for _ in range(2))  # the rows' tokens as "rows"
            q = ext.rope_store(linear(h, self.qkv[i]), cos, sin, k.view(-1, self.kv_heads, 1, self.dim),
                               v.view(-1, self.kv_heads, 1, self.dim), 0, self.heads)
            k, v = k.transpose(1, 2), v.transpose(1, 2)
            if past is not None:
                k, v = torch.cat([past[i][0], k], dim=2), torch.cat([past[i][1], v], dim=2)
            layers.append((k, v))
            if self.prefill is not None:
                a = self.prefill.prefill_attention(q.view(batch, span, self.kv_heads, -1, self.dim), k, v, columns,
                                                   self.scale)
            else:
                a, _ = sdpa_attention_forward(layer.self_attn, q.view(batch, span, self.heads, self.dim).transpose(1, 2),
                                              k, v, allowed, scaling=self.scale)
            h = ext.add_rms_norm(x, layer.self_attn.o_proj(a.reshape(batch * span, -1)),
                                 layer.post_attention_layernorm.weight, self.eps)
            m = layer.mlp.down_proj(ext.silu_mul(linear(h, self.gate_up[i])))
            after = model.norm if i == last else model.layers[i + 1].input_layernorm
            h = ext.add_rms_norm(x, m, after.weight, self.eps)
        return self.lm.lm_head(h.view(batch, span, -1)[:, keep]), layers
