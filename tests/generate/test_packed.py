"""Linear weights packed once for oneDNN: the same numbers as `nn.Linear`, so the fast path
samples the same tokens and the judge reads the same logprobs as on the model as loaded."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from generate.backends.cpu.packed import PackedLinear, can_pack, pack_linears

needs_bf16 = pytest.mark.skipif(not can_pack(torch.bfloat16, "cpu"), reason="no oneDNN bf16 on this CPU")


@needs_bf16
@pytest.mark.parametrize("bias", [False, True])
@pytest.mark.parametrize("shape", [(1, 576), (18, 1, 576), (3, 37, 576)])
def test_packed_linear_equals_linear_bit_for_bit(bias, shape):
    torch.manual_seed(0)
    linear = nn.Linear(576, 1536, bias=bias).to(torch.bfloat16)
    x = torch.randn(*shape, dtype=torch.bfloat16)
    with torch.inference_mode():
        assert torch.equal(PackedLinear(linear)(x), linear(x))


def test_only_bf16_linears_are_packed():
    model = nn.Sequential(nn.Linear(8, 8), nn.Sequential(nn.Linear(8, 8).to(torch.bfloat16)))
    if not can_pack(torch.bfloat16, "cpu"):
        pytest.skip("no oneDNN bf16 on this CPU")
    assert pack_linears(model) == 1
    assert type(model[0]) is nn.Linear and isinstance(model[1][0], PackedLinear)
    assert not can_pack(torch.float32, "cpu") and not can_pack(torch.bfloat16, "cuda")


@needs_bf16
@pytest.mark.slow
def test_packed_model_samples_the_same_tokens_and_logprobs():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from generate.backends.embedded import smollm2_dir
    from generate.backends.hf.decode import sample_batch
    from generate.backends.hf.prefix import greedy_with_prefix

    tok = AutoTokenizer.from_pretrained(smollm2_dir())
    plain = AutoModelForCausalLM.from_pretrained(smollm2_dir(), dtype=torch.bfloat16).eval()
    packed = copy.deepcopy(plain)
    assert pack_linears(packed) == 7 * plain.config.num_hidden_layers + 1  # every projection and the head
    prompts = [tok(t, add_special_tokens=False)["input_ids"] for t in
               ("A lighthouse keeper on Europa hears", "Write about a city that dreams.", "The last robot")]
    stop = {tok.eos_token_id}
    sampled = [sample_batch(lm, prompts, max_new_tokens=24, temperature=0.9, top_p=0.9, seeds=[1, 2, 3],
                            pad_id=tok.pad_token_id or 0, stop_ids=stop) for lm in (plain, packed)]
    assert sampled[0] == sampled[1]
    greedy = [greedy_with_prefix(lm, prompts, 6, tok.pad_token_id or 0, stop, batch_size=8) for lm in (plain, packed)]
    for (t0, d0), (t1, d1) in zip(*greedy):
        assert t0 == t1
        assert all(torch.equal(a, b) for a, b in zip(d0, d1))


@needs_bf16
def test_only_the_fast_path_packs():
    from generate.backends.embedded import smollm2_dir
    from generate.backends.hf import HFBackend

    fast = HFBackend(str(smollm2_dir()), dtype="bfloat16", path="fast")
    lockstep = HFBackend(str(smollm2_dir()), dtype="bfloat16", path="generate")
    assert fast.describe()["packed_linears"] and isinstance(fast.lm.lm_head, PackedLinear)
    assert not lockstep.describe()["packed_linears"] and type(lockstep.lm.lm_head) is nn.Linear


def _tiny_llama(dtype: torch.dtype):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                         num_attention_heads=1, num_key_value_heads=1, head_dim=64)
    return LlamaForCausalLM(config).to(dtype).eval()


def test_the_seam_leaves_a_model_it_cannot_speed_up_as_loaded():
    """float32 (as on a CPU without native bf16, or a GPU): nothing applies, the hf backend keeps
    transformers' forward with SDPA."""
    from generate.backends.cpu import accelerate

    model = _tiny_llama(torch.float32)
    assert accelerate(model) is None
    assert type(model.lm_head) is nn.Linear and model.config._attn_implementation != "scifi_decode"


@needs_bf16
def test_the_seam_says_what_it_set_up_for_a_bf16_model():
    from generate.backends.cpu import accelerate
    from generate.backends.cpu.attention import kernel

    model = _tiny_llama(torch.bfloat16)
    accel = accelerate(model)
    assert accel.packed_linears and isinstance(model.lm_head, PackedLinear)
    assert accel.decode_kernel == (kernel() is not None)
    assert (accel.step is not None) == (kernel() is not None) and (accel.encode is None) == (accel.step is None)
