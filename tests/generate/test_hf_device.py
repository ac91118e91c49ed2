"""What the hf backend does differently on an accelerator (checked here as logic; measured on a
lent H200 with `review-lab device-check` and the README's "On a GPU")."""


def test_decode_steps_on_cuda_never_take_cudnn_attention():
    """cuDNN's SDPA builds a plan per key length, i.e. per decode step (86 ms a step on an H200
    against 27-38 without it); on a CPU the choice stays torch's."""
    from torch.nn.attention import SDPBackend

    from generate.backends.hf.device import decode_sdpa_backends

    assert decode_sdpa_backends("cpu") is None
    allowed = decode_sdpa_backends("cuda:0")
    assert SDPBackend.CUDNN_ATTENTION not in allowed and SDPBackend.EFFICIENT_ATTENTION in allowed
