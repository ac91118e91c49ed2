"""The fused decode step: each fused op against the transformers code it replaces, and whole steps
of the real model against its own forward, to bf16 noise."""

from __future__ import annotations

from functools import partial

import pytest
import torch
from transformers.models.llama.modeling_llama import LlamaRMSNorm, apply_rotary_pos_emb

from generate.backends.cpu.attention import kernel

needs_kernel = pytest.mark.skipif(kernel() is None, reason="decode kernels not built here (no AVX-512 or compiler)")
BF16_ULP = 2 ** -7  # relative spacing of bf16 numbers: one unit in the last place, at most


def _bf16(*shape, seed=0, scale=1.0):
    return (scale * torch.randn(*shape, generator=torch.Generator().manual_seed(seed))).bfloat16()


def _ulps(ours, ref):
    """|ours - ref| in units of bf16's last place at ref's magnitude."""
    return ((ours.float() - ref.float()).abs() / (ref.float().abs().clamp_min(1e-6) * BF16_ULP)).max().item()


@needs_kernel
def test_rms_norm_and_residual_add_round_as_transformers():
    x, r = _bf16(7, 576, seed=1, scale=3), _bf16(7, 576, seed=2)
    norm = LlamaRMSNorm(576, eps=1e-5).bfloat16()
    norm.weight.data = _bf16(576, seed=3)
    with torch.no_grad():
        assert _ulps(kernel().rms_norm(x, norm.weight, 1e-5), norm(x)) <= 1  # fp32 sums in another order
        stream = x.clone()
        normed = kernel().add_rms_norm(stream, r, norm.weight, 1e-5)
        assert torch.equal(stream, x + r)  # the residual stream is updated in place, rounded as in bf16
        assert _ulps(normed, norm(x + r)) <= 1


@needs_kernel
def test_rotary_embedding_and_cache_write_equal_transformers_bit_for_bit():
    batch, heads, kv_heads, dim, col = 5, 9, 3, 64, 11
    qkv = _bf16(batch, (heads + 2 * kv_heads) * dim, seed=4, scale=2)
    positions = torch.tensor([3, 40, 41, 700, 2])
    inv = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
    angles = torch.cat([positions[:, None] * inv] * 2, dim=-1)
    cos, sin = angles.cos().bfloat16(), angles.sin().bfloat16()
    k_cache, v_cache = torch.zeros(2, batch, kv_heads, 20, dim, dtype=torch.bfloat16)
    q = kernel().rope_store(qkv, cos, sin, k_cache, v_cache, col, heads)
    q_ref, k_ref = apply_rotary_pos_emb(qkv[:, :heads * dim].view(batch, heads, 1, dim),
                                        qkv[:, heads * dim:(heads + kv_heads) * dim].view(batch, kv_heads, 1, dim),
                                        cos[:, None], sin[:, None], unsqueeze_dim=1)
    assert torch.equal(q, q_ref[:, :, 0])
    assert torch.equal(k_cache[:, :, col], k_ref[:, :, 0])
    assert torch.equal(v_cache[:, :, col], qkv[:, (heads + kv_heads) * dim:].view(batch, kv_heads, dim))
    assert not k_cache[:, :, :col].any() and not k_cache[:, :, col + 1:].any()  # no other column touched


@needs_kernel
def test_swiglu_gate_rounds_as_transformers():
    gate_up = _bf16(6, 2 * 1536, seed=5, scale=4)
    gate_up[0, :4] = torch.tensor([0.0, -90.0, 90.0, -1e-3])  # where a naive exp would overflow
    ref = torch.nn.functional.silu(gate_up[:, :1536]) * gate_up[:, 1536:]
    assert _ulps(kernel().silu_mul(gate_up), ref) <= 1


@pytest.fixture(scope="module")
def fast_backend():
    from generate.backends.embedded import smollm2_dir
    from generate.backends.hf import HFBackend

    return HFBackend(str(smollm2_dir()), dtype="bfloat16", path="fast")


@needs_kernel
def test_fast_path_takes_the_fused_step_only_where_it_applies(fast_backend):
    from transformers import AutoModelForCausalLM

    from generate.backends.cpu.fused import unsupported

    assert fast_backend.describe()["decode_step"] == "fused"
    config = fast_backend.lm.config.to_dict() | {"num_hidden_layers": 1}

    def why(dtype=torch.bfloat16, **changes):
        model = AutoModelForCausalLM.from_config(type(fast_backend.lm.config)(**config | changes), dtype=dtype)
        return unsupported(model)

    assert why() is None
    assert why(dtype=torch.float32) == "not bf16 on a CPU with oneDNN"
    assert why(attention_bias=True) == "biased projections"
    assert why(hidden_act="gelu") == "activation is not silu"
    assert why(head_dim=80) == "head shape outside the kernel's"


def test_a_model_the_step_cannot_take_never_builds_the_kernel(monkeypatch):
    """On a GPU (here: float32, which fails the same check) the reason comes before the CPU
    kernel is built: that build took a CUDA machine's process a minute for nothing."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from generate.backends.cpu import fused

    def build():
        raise AssertionError("the kernel was built")

    monkeypatch.setattr(fused, "kernel", build)
    config = LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                         num_attention_heads=1, num_key_value_heads=1, head_dim=64)
    assert fused.unsupported(LlamaForCausalLM(config).float()) == "not bf16 on a CPU with oneDNN"


@needs_kernel
@pytest.mark.slow
def test_fused_steps_are_as_close_to_fp32_as_the_models_own_bf16_forward(fast_backend):
    """Most rows match transformers' bf16 forward bit for bit; where an fp32 sum taken in another
    order rounds one value the other way, the difference carries on through later steps. What
    matters is that it is noise: against the model in fp32, ours strays no further than
    transformers' bf16 forward does (over the 50 most likely tokens)."""
    from transformers import AutoModelForCausalLM

    from generate.backends.embedded import smollm2_dir
    from generate.backends.hf.passes import hf_step, prefill
    from generate.backends.hf.store import NOTHING

    lm, step = fast_backend.lm, fast_backend.step
    fp32 = AutoModelForCausalLM.from_pretrained(smollm2_dir(), dtype=torch.float32).eval()
    gen = torch.Generator().manual_seed(0)
    prompts = [torch.randint(100, 40000, (n,), generator=gen).tolist() for n in (90, 61, 75)]  # left padding
    width = max(map(len, prompts))
    with torch.inference_mode():
        caches = [prefill(model, prompts, [NOTHING] * 3, 0, 8)[0] for model in (lm, lm, fp32)]
        mask = torch.tensor([[c >= width - len(p) for c in range(width)] for p in prompts])
        positions = torch.tensor([len(p) for p in prompts])
        identical = 0
        for _ in range(6):
            tokens = torch.randint(100, 40000, (3,), generator=gen)
            mask = torch.cat([mask, torch.ones(3, 1, dtype=torch.bool)], dim=1)
            ours, bf16, exact = (torch.log_softmax(run(tokens, positions, mask, cache).float(), dim=-1)
                                 for run, cache in zip((step, partial(hf_step, lm), partial(hf_step, fp32)), caches))
            positions = positions + 1
            assert torch.equal(ours.argmax(-1), bf16.argmax(-1))
            top = exact.topk(50, dim=-1).indices
            our_err, their_err = ((t.gather(-1, top) - exact.gather(-1, top)).abs().max() for t in (ours, bf16))
            assert our_err <= 1.5 * their_err + 0.02
            identical += int(torch.equal(ours, bf16))
        for a, b in zip(caches[0].layers, caches[1].layers):  # the prompts' columns untouched
            assert a.keys.shape == b.keys.shape == (3, 3, width + 6, 64)
            assert torch.equal(a.keys[:, :, :width], b.keys[:, :, :width])
        # The new tokens' keys and values went to the same columns: in the first layer (before any
        # difference can accumulate) they agree to bf16 rounding.
        first, ref = caches[0].layers[0], caches[1].layers[0]
        for ours, theirs in ((first.keys, ref.keys), (first.values, ref.values)):
            assert torch.allclose(ours[:, :, width:].float(), theirs[:, :, width:].float(), rtol=2 ** -6, atol=1e-2)


@needs_kernel
@pytest.mark.slow
@pytest.mark.parametrize("reused", [False, True])
def test_fused_prefill_is_as_close_to_fp32_as_the_models_own_bf16_forward(fast_backend, reused):
    """Prefill through the fused layers (`FusedDecoder.encode`), with and without a reused prefix
    (the masked and the causal path), against transformers' bf16 and fp32 forwards."""
    from transformers import AutoModelForCausalLM

    from generate.backends.embedded import smollm2_dir
    from generate.backends.hf.passes import hf_encode, prefill
    from generate.backends.hf.store import NOTHING, Reuse

    lm, fused = fast_backend.lm, fast_backend.step
    fp32 = AutoModelForCausalLM.from_pretrained(smollm2_dir(), dtype=torch.float32).eval()
    gen = torch.Generator().manual_seed(1)
    base = torch.randint(100, 40000, (70,), generator=gen).tolist()
    prompts = [base + torch.randint(100, 40000, (n,), generator=gen).tolist() for n in (30, 11, 52)]
    with torch.inference_mode():
        runs = []
        for model, encode in ((lm, fused.encode), (lm, partial(hf_encode, lm)), (fp32, partial(hf_encode, fp32))):
            reuse = [NOTHING] * 3
            if reused:
                head, _ = prefill(model, [base + [5]], [NOTHING], 0, 0)
                reuse = [Reuse(70, [(layer.keys[0, :, :70], layer.values[0, :, :70]) for layer in head.layers])] * 3
            runs.append(prefill(model, prompts, reuse, 0, 4, encode))
    (ours, our_logits), (theirs, their_logits), (_, exact) = runs
    assert torch.equal(our_logits.argmax(-1), their_logits.argmax(-1))
    assert torch.equal(ours.layers[0].keys, theirs.layers[0].keys)  # first layer: no fp32 sum before it
    logp = [torch.log_softmax(t.float(), dim=-1) for t in (our_logits, their_logits, exact)]
    top = exact.topk(50, dim=-1).indices
    our_err, their_err = ((t.gather(-1, top) - logp[2].gather(-1, top)).abs().max() for t in logp[:2])
    assert our_err <= 1.5 * their_err + 0.02
