"""What the hf backend does differently on an accelerator (checked here as logic; measured on a
lent H200 with `review-lab device-check` and the README's "On a GPU")."""

import torch


def test_decode_steps_on_cuda_never_take_cudnn_attention():
    """cuDNN's SDPA builds a plan per key length, i.e. per decode step (86 ms a step on an H200
    against 27-38 without it); on a CPU the choice stays torch's."""
    from torch.nn.attention import SDPBackend

    from generate.backends.hf.device import decode_sdpa_backends

    assert decode_sdpa_backends("cpu") is None
    allowed = decode_sdpa_backends("cuda:0")
    assert SDPBackend.CUDNN_ATTENTION not in allowed and SDPBackend.EFFICIENT_ATTENTION in allowed


def test_the_static_path_decodes_with_the_backends_kernels_whoever_calls_it(monkeypatch):
    """`scripts/check_static.py` calls the static loop directly, outside the backend: it must check
    (and `bench_engines.py` time) the kernels the backend decodes with, not torch's own choice,
    which on CUDA is cuDNN's attention. Here a CPU stands in for CUDA: the backend's kernels are
    made MATH alone, and every forward of the loop, prefill and steps, must see that choice."""
    from torch.nn.attention import SDPBackend
    from transformers import LlamaConfig, LlamaForCausalLM

    from generate.backends.hf import device, static

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=128)
    lm = LlamaForCausalLM(config).eval()
    monkeypatch.setattr(device, "decode_sdpa_backends", lambda dev: [SDPBackend.MATH])
    seen = []
    lm.register_forward_pre_hook(lambda module, args: seen.append(
        (torch.backends.cuda.cudnn_sdp_enabled(), torch.backends.cuda.mem_efficient_sdp_enabled(),
         torch.backends.cuda.math_sdp_enabled())))
    static.sample_static(lm, [[1, 2, 3], [4, 5]], max_new_tokens=3, temperature=1.0, top_p=1.0, seeds=[0, 1],
                         pad_id=0, stop_ids=set())
    assert len(seen) == 3 and set(seen) == {(False, False, True)}  # the prefill and two steps
    assert torch.backends.cuda.cudnn_sdp_enabled()  # and torch's own choice back after it
