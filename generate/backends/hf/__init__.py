"""The transformers backend (`hf:` specs), see `backend.py`; the rest of this folder is its engine.

- `backend.py`: `HFBackend`, the batching, the choice of path (`fast` | `generate`) and scoring;
- `device.py`: the dtype, SDPA kernels and prefix-store budget a device gets;
- `decode.py`: the sampled decode loop; `prefix.py`: greedy decoding with shared prefixes once;
- `passes.py`: the prefill and decode-step forward passes both loops run;
- `cache.py`: a key/value cache with room reserved; `store.py`: the prefix store across calls;
- `sampling.py`: top-p sampling with a random stream per request.

CUDA runs all of this too. The CPU-only speed-ups (packed weights, attention kernels, the fused
Llama step) are `generate/backends/cpu/`, which `backend.py` asks once per model what it can do.
"""

from generate.backends.hf.backend import HFBackend

__all__ = ["HFBackend"]
