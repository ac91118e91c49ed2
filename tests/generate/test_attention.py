"""The CPU decode-attention kernel: SDPA's result on one query token per row over cache views with
padding, to bf16 rounding; everything else goes to SDPA unchanged."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from generate.backends.attention import decode_attention_forward, kernel

needs_kernel = pytest.mark.skipif(kernel() is None, reason="decode kernel not built here (no AVX-512 or compiler)")


def _inputs(batch, kv_heads, groups, dim, t, q_len=1, room=37, dtype=torch.bfloat16):
    """(module, query, key/value views into a cache with room to spare, bool mask with left padding)."""
    gen = torch.Generator().manual_seed(batch * 100 + dim)
    cache = torch.randn(2, batch, kv_heads, t + room, dim, generator=gen).to(dtype)
    key, value = cache[0, :, :, :t], cache[1, :, :, :t]
    query = (2 * torch.randn(batch, kv_heads * groups, q_len, dim, generator=gen)).to(dtype)
    mask = torch.ones(batch, 1, q_len, t, dtype=torch.bool)
    for row in range(batch):
        mask[row, ..., :(row * 7) % (t // 2)] = False  # each row's own left padding
    module = SimpleNamespace(num_key_value_groups=groups, is_causal=True, training=False)
    return module, query, key, value, mask


@needs_kernel
@pytest.mark.parametrize("batch,kv_heads,groups,dim,t", [(18, 3, 3, 64, 700), (5, 2, 6, 128, 93), (1, 8, 4, 64, 17)])
def test_kernel_equals_sdpa_to_bf16_rounding(batch, kv_heads, groups, dim, t):
    module, query, key, value, mask = _inputs(batch, kv_heads, groups, dim, t)
    ours, _ = decode_attention_forward(module, query, key, value, mask, scaling=dim ** -0.5)
    sdpa, _ = sdpa_attention_forward(module, query, key, value, mask, scaling=dim ** -0.5)
    exact, _ = sdpa_attention_forward(module, query.float(), key.float(), value.float(), mask, scaling=dim ** -0.5)
    assert ours.shape == sdpa.shape and ours.dtype == torch.bfloat16
    # Ours rounds an fp32 sum to bf16 (8 bits of mantissa): within two units of the last place of
    # the fp32 result. SDPA also rounds the probabilities to bf16 before summing the values, so it
    # strays further; ours is never further from it than its own error plus ours.
    ulp = exact.abs().clamp_min(1e-3) * 2 ** -7
    assert ((ours.float() - exact).abs() <= 2 * ulp + 1e-3).all()
    assert ((ours.float() - sdpa.float()).abs() <= (sdpa.float() - exact).abs() + 2 * ulp + 1e-3).all()


@needs_kernel
def test_without_a_mask_every_column_counts():
    module, query, key, value, _ = _inputs(4, 3, 3, 64, 50)
    ours, _ = decode_attention_forward(module, query, key, value, None, scaling=0.125)
    sdpa, _ = sdpa_attention_forward(module, query, key, value, None, scaling=0.125)
    assert torch.allclose(ours.float(), sdpa.float(), atol=2e-2)


@pytest.mark.parametrize("case", ["prefill", "float32", "odd_head_dim"])
def test_everything_but_one_bf16_token_goes_to_sdpa_unchanged(case):
    kwargs = {"prefill": {"q_len": 5}, "float32": {"dtype": torch.float32}, "odd_head_dim": {"dim": 80}}[case]
    args = {"batch": 3, "kv_heads": 3, "groups": 3, "dim": 64, "t": 40} | kwargs
    module, query, key, value, mask = _inputs(**args)
    ours, _ = decode_attention_forward(module, query, key, value, mask, scaling=0.1)
    sdpa, _ = sdpa_attention_forward(module, query, key, value, mask, scaling=0.1)
    assert torch.equal(ours, sdpa)


@needs_kernel
@pytest.mark.slow
def test_fast_engine_decodes_with_the_kernel_within_bf16_noise():
    from generate.backends.embedded import smollm2_dir
    from generate.backends.hf import HFBackend
    from generate.backends.prefix import greedy_with_prefix

    fast = HFBackend(str(smollm2_dir()), dtype="bfloat16", engine="fast")
    assert fast.describe()["decode_attention"] == "kernel"
    sdpa = HFBackend(str(smollm2_dir()), dtype="bfloat16", engine="fast")
    sdpa.lm.set_attn_implementation("sdpa")
    tok = fast.tokenizer
    prompts = [tok(t, add_special_tokens=False)["input_ids"] for t in
               ("Rate this story from 0 to 5. Story: the comet sang. Score:", "A lighthouse keeper on Europa hears")]
    stop = {tok.eos_token_id}
    runs = [greedy_with_prefix(b.lm, prompts, 4, tok.pad_token_id, stop, batch_size=8) for b in (fast, sdpa)]
    for (tokens, dists), (ref_tokens, ref_dists) in zip(*runs):
        assert tokens == ref_tokens
        # The first token comes from prefill (SDPA in both); later ones move by bf16 noise only, as
        # they do with the rows batched beside them (README, "Scores and batch composition").
        assert torch.equal(dists[0], ref_dists[0])
        assert max(abs(float(d.max() - r.max())) for d, r in zip(dists, ref_dists)) < 0.25


def test_a_lock_left_by_a_killed_build_is_cleared_and_a_fresh_one_kept(tmp_path):
    import os
    import time

    from generate.backends.attention import STALE_LOCK_S, _clear_stale_lock

    lock = tmp_path / "lock"
    lock.touch()
    _clear_stale_lock(tmp_path)
    assert lock.exists()  # another process may be building right now
    old = time.time() - STALE_LOCK_S - 1
    os.utime(lock, (old, old))
    _clear_stale_lock(tmp_path)
    assert not lock.exists()
    _clear_stale_lock(tmp_path)  # nothing to clear
