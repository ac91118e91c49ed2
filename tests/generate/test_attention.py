"""The CPU decode-attention kernel: SDPA's result on one query token per row over cache views with
padding, to bf16 rounding; everything else goes to SDPA unchanged."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from generate.backends.cpu.attention import decode_attention_forward, kernel, prefill_kernel

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


@needs_kernel
def test_the_kernels_split_their_work_over_torchs_threads():
    # Built without OpenMP, `at::parallel_for` runs its whole range on the calling thread: until
    # this was checked, every kernel of the extension used one core of two (decode attention at
    # 23 GB/s of 46, prefill attention at 135 GFLOPS of ~260).
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        assert kernel().parallel_threads() == 2
        torch.set_num_threads(1)
        assert kernel().parallel_threads() == 1
    finally:
        torch.set_num_threads(before)


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
def test_fast_path_decodes_with_the_kernel_within_bf16_noise():
    from generate.backends.embedded import smollm2_dir
    from generate.backends.hf import HFBackend
    from generate.backends.hf.prefix import greedy_with_prefix

    fast = HFBackend(str(smollm2_dir()), dtype="bfloat16", path="fast")
    assert fast.describe()["decode_attention"] == "kernel"
    sdpa = HFBackend(str(smollm2_dir()), dtype="bfloat16", path="fast")
    sdpa.lm.set_attn_implementation("sdpa")
    tok = fast.tokenizer
    prompts = [tok(t, add_special_tokens=False)["input_ids"] for t in
               ("Rate this story from 0 to 5. Story: the comet sang. Score:", "A lighthouse keeper on Europa hears")]
    stop = {tok.eos_token_id}
    runs = [greedy_with_prefix(b.lm, prompts, 4, tok.pad_token_id, stop, batch_size=8) for b in (fast, sdpa)]
    for (tokens, dists), (ref_tokens, ref_dists) in zip(*runs):
        assert tokens == ref_tokens
        # The first token comes from prefill: SDPA in both, or our prefill kernel (AVX512_BF16) in the
        # fast one; every token moves by bf16 noise only, as it does with the rows batched beside it
        # (README, "Scores and batch composition").
        if prefill_kernel() is None:
            assert torch.equal(dists[0], ref_dists[0])
        assert max(abs(float(d.max() - r.max())) for d, r in zip(dists, ref_dists)) < 0.25


def test_a_build_lock_of_a_killed_process_is_cleared_at_once_and_a_live_build_waited_for(tmp_path):
    """torch's `lock` file, left by a process killed during a load (any age: the one a kill test left
    was 9 s old), stalled every later process forever; a live holder of the build is waited for."""
    import subprocess
    import sys
    import threading

    from generate.backends.cpu.attention import build_lock

    (tmp_path / "lock").touch()  # torch's, as a live builder holds it while building
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from filelock import FileLock; "
                               f"held = FileLock({str(tmp_path / 'build.flock')!r}); held.acquire(); print(1, flush=True); "
                               "time.sleep(60)"], stdout=subprocess.PIPE, text=True)
    entered = threading.Event()

    def load() -> None:
        with build_lock(tmp_path):
            entered.set()

    try:
        assert holder.stdout.readline().strip() == "1"
        waiter = threading.Thread(target=load, daemon=True)
        waiter.start()
        assert not entered.wait(1.0) and (tmp_path / "lock").exists()  # the build is live: waited for
        holder.kill()  # killed mid-build: its flock goes with it, its torch lock file stays
        holder.wait()
        assert entered.wait(30.0) and not (tmp_path / "lock").exists()
    finally:
        holder.kill()
    with build_lock(tmp_path):  # nothing to clear
        pass


def test_each_checkout_builds_the_kernel_in_a_folder_of_its_own(tmp_path, monkeypatch):
    """ninja rebuilds when the sources' paths change: two checkouts sharing one build folder would
    rebuild it at every switch, so the folder is per source folder (and reused by every run of one)."""
    from generate.backends.cpu import attention

    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    here = attention.build_dir()
    assert here.parent == tmp_path and attention.build_dir() == here
    monkeypatch.setattr(attention, "SOURCES", [tmp_path / "other-checkout" / "csrc" / "decode_ops.cpp"])
    assert attention.build_dir() != here


needs_prefill = pytest.mark.skipif(prefill_kernel() is None, reason="prefill kernel needs AVX512_BF16 (and a compiler)")


@needs_prefill
@pytest.mark.parametrize("batch,seq,past,kv_heads,groups,padded,strided", [
    (2, 37, 0, 3, 3, False, False),  # a first prompt: causal, no mask
    (3, 100, 70, 3, 3, True, False),  # after a reused past, with left padding of the past
    (2, 65, 129, 3, 3, True, True),  # keys and values as transposed views (the no-past layout)
    (1, 5, 40, 2, 4, True, False),  # fewer queries than a tile
    (2, 33, 31, 1, 1, True, False),  # one head
])
def test_prefill_kernel_is_as_close_to_fp32_as_sdpa(batch, seq, past, kv_heads, groups, padded, strided):
    """Each query position i attends to the columns c <= past + i that the mask keeps; padded new
    columns (right padding) are masked too. Ours and SDPA both round probabilities to bf16 before the
    value products, so ours may stray from fp32 about as far as SDPA does, no further."""
    gen, dim, t = torch.Generator().manual_seed(batch * 1000 + seq), 64, past + seq
    query = torch.randn(batch, seq, kv_heads, groups, dim, generator=gen).bfloat16()
    shape = (batch, t, kv_heads, dim) if strided else (batch, kv_heads, t, dim)
    key, value = (2 * torch.randn(shape, generator=gen)).bfloat16(), torch.randn(shape, generator=gen).bfloat16()
    if strided:
        key, value = key.transpose(1, 2), value.transpose(1, 2)
    mask = torch.ones(batch, t, dtype=torch.bool)
    if padded:
        mask[0, :past // 3] = False
        mask[-1, t - 5:] = False
    allowed = mask[:, None, None, :] & (torch.arange(t) <= past + torch.arange(seq)[:, None])[None, None]

    def sdpa(q, k, v):  # (B, S, Hkv, G, D) through SDPA, every query head against its key/value head
        out = torch.nn.functional.scaled_dot_product_attention(
            q.reshape(batch, seq, -1, dim).transpose(1, 2), k.repeat_interleave(groups, 1),
            v.repeat_interleave(groups, 1), attn_mask=allowed, scale=dim ** -0.5)
        return out.transpose(1, 2).reshape(q.shape).float()

    ours = prefill_kernel().prefill_attention(query, key, value, mask if padded else torch.empty(0, dtype=torch.bool),
                                              dim ** -0.5)
    assert ours.shape == query.shape and ours.dtype == torch.bfloat16
    exact, theirs = sdpa(query.float(), key.float(), value.float()), sdpa(query, key, value)
    ours_err, sdpa_err = (ours.float() - exact).abs().max(), (theirs - exact).abs().max()
    assert ours_err <= 1.25 * sdpa_err + 1e-4, (ours_err, sdpa_err)


@needs_prefill
@pytest.mark.parametrize("past", [0, 48])
def test_a_causal_pass_through_transformers_goes_to_the_prefill_kernel(past):
    """A prefill through transformers' attention interface (the judge's and scoring's passes): a mask
    of padded columns and causal queries goes to the prefill kernel and agrees with SDPA; a mask of
    any other form goes to SDPA unchanged."""
    module, query, key, value, _ = _inputs(3, 3, 3, 64, past + 20, q_len=20)
    t = key.shape[2]
    columns = torch.ones(3, t, dtype=torch.bool)
    columns[1, :5] = False  # left padding
    causal = torch.arange(t) <= past + torch.arange(20)[:, None]
    mask = columns[:, None, None, :] & causal[None, None]
    ours, _ = decode_attention_forward(module, query, key, value, mask, scaling=0.125)
    sdpa, _ = sdpa_attention_forward(module, query, key, value, mask, scaling=0.125)
    exact, _ = sdpa_attention_forward(module, query.float(), key.float(), value.float(), mask, scaling=0.125)
    assert ours.shape == sdpa.shape
    real = columns[:, past:]  # rows' padding queries see nothing: their outputs are never read
    err = lambda a: (a.float() - exact.float())[real].abs().max()  # noqa: E731
    assert err(ours) <= 1.25 * err(sdpa) + 1e-4
    assert not torch.equal(ours, sdpa)  # it did not go to SDPA
    other = mask.clone()
    other[0, 0, -1, 0] = False  # not of the causal form: SDPA, bit for bit
    ours, _ = decode_attention_forward(module, query, key, value, other, scaling=0.125)
    sdpa, _ = sdpa_attention_forward(module, query, key, value, other, scaling=0.125)
    assert torch.equal(ours, sdpa)
