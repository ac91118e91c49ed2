"""CPU attention kernels for the hf backend's `fast` path, registered with transformers.

A decode step attends one new token per row over the whole cache. PyTorch's CPU SDPA kernel is
built for long queries, and on this one-token case it took most of a decode step.
`csrc/decode_attention.cpp` does the one-token case in one pass over the cache, with the same
accuracy against an fp32 reference; `csrc/prefill_attention.cpp` takes causal prefill passes where
the CPU has AVX512_BF16. Everything else (other dtypes, devices, masks or shapes) goes to
transformers' SDPA.

The kernels are compiled on first use, in one extension with the fused small ops of `fused.py`
(`csrc/decode_ops.cpp`), by `torch.utils.cpp_extension` (g++ and ninja, once per machine, Python
and torch version and checkout; cached under `$TORCH_EXTENSIONS_DIR`, default
`~/.cache/torch_extensions`, in `build_dir()`).
Without a compiler or AVX-512 the backend keeps SDPA and transformers' forward, and says so once
in the log: slower, never wrong.
"""

from __future__ import annotations

import hashlib
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path

import torch
from filelock import FileLock
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from generate.common.machine import cpu_has

log = logging.getLogger(__name__)

NAME = "scifi_decode"  # the attention implementation's name in transformers' registries
SOURCES = [Path(__file__).with_name("csrc") / name
           for name in ("decode_ops.cpp", "decode_attention.cpp", "prefill_attention.cpp")]
# -fopenmp: `at::parallel_for` splits work over threads only where the extension is compiled with
# OpenMP (torch's own runtime, libgomp, already loaded, is the one it then uses); without it every
# kernel here ran on one core whatever `torch.get_num_threads()` said.
FLAGS = ["-O3", "-mavx512f", "-mavx512bw", "-mavx512dq", "-mavx512vl", "-mfma", "-fopenmp"]
SHAPES = {"groups": (1, 2, 3, 4, 6, 8), "head_dim": (64, 128)}  # what the kernel is compiled for


def build_dir() -> Path:
    """Where the compiled kernel lives, under torch's own extensions folder, so every run and test
    of a checkout shares it: one folder per Python and torch version (the extension is tied to both)
    and per source folder. ninja rebuilds whenever the compile command changes, and the command
    holds the sources' absolute paths: two checkouts sharing one folder (a worktree, an older copy
    for a comparison) would rebuild it at every switch from one to the other."""
    root = Path(os.environ.get("TORCH_EXTENSIONS_DIR") or Path.home() / ".cache" / "torch_extensions")
    where = hashlib.sha256(str(SOURCES[0].parent.resolve()).encode()).hexdigest()[:8]
    path = root / (f"scifi_decode_kernels-py{sys.version_info.major}{sys.version_info.minor}"
                   f"-torch{torch.__version__}-{where}")
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextmanager
def build_lock(path: Path) -> Iterator[None]:
    """Hold the build folder for torch's `load`. torch guards it with a plain lock file (`lock`)
    that it takes at every load, built or not, and waits on forever: a process killed while holding
    it (Ctrl-C mid-build, or a kill during the few milliseconds of an up-to-date check) left every
    later process waiting (torch issue 189245; newer torch takes an flock itself). This flock is
    released by the OS when its holder dies, and every process takes it before torch's: whoever
    holds it knows a `lock` file there is a dead process's."""
    with FileLock(str(path / "build.flock")):
        baton = path / "lock"
        if baton.exists():
            baton.unlink(missing_ok=True)
            log.warning("decode attention: removed the build lock %s of a process that died", baton)
        yield


def _cpu_has_avx512() -> bool:
    return cpu_has("avx512f", "avx512bw", "avx512dq", "avx512vl")


@cache
def kernel():
    """The compiled extension, or None (logged once) where it cannot be built or run."""
    if not _cpu_has_avx512():
        log.info("decode attention: no AVX-512 on this CPU; decode steps use SDPA")
        return None
    try:
        from torch.utils.cpp_extension import load

        path = build_dir()
        with build_lock(path):
            return load("scifi_decode_kernels", sources=[str(s) for s in SOURCES], extra_cflags=FLAGS,
                        extra_ldflags=["-fopenmp"], build_directory=str(path), verbose=False)
    except Exception as exc:  # noqa: BLE001 (no compiler, no ninja, a failed build: SDPA still works)
        log.warning("decode attention: cannot build %s (%s); decode steps use SDPA", SOURCES[0].parent,
                    str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__)
        return None


def prefill_kernel():
    """The extension where its prefill attention can run (`csrc/prefill_attention.cpp`: AVX512_BF16
    dot products, head size 64), else None: prefill attention then goes to SDPA."""
    ext = kernel()
    return ext if ext is not None and cpu_has("avx512_bf16") else None


def decode_attention_forward(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None,
                             **kwargs):
    """transformers' attention signature: on CPU in bf16, the decode kernel for one query token per
    row and the prefill kernel for a causal pass (`_prefill_columns`), SDPA otherwise. query (B, H,
    S, D), key/value (B, Hkv, T, D), attention_mask bool (B, 1, S, T) or None."""
    batch, heads, q_len, dim = query.shape
    groups = heads // key.shape[1]
    ext = kernel() if (q_len == 1 and query.device.type == "cpu" and query.dtype == torch.bfloat16
                       and key.dtype == torch.bfloat16 and key.stride(-1) == 1 and value.stride(-1) == 1
                       and groups in SHAPES["groups"] and dim in SHAPES["head_dim"] and not dropout
                       and kwargs.get("softcap") is None and kwargs.get("position_bias") is None
                       and (attention_mask is None or attention_mask.dtype == torch.bool)) else None
    if ext is None:
        columns = _prefill_columns(query, key, value, attention_mask, dropout, kwargs)
        if columns is None:
            return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                          **kwargs)
        out = prefill_kernel().prefill_attention(query.transpose(1, 2).reshape(batch, q_len, heads // groups, groups, dim),
                                                 key, value, columns, scaling if scaling is not None else dim ** -0.5)
        return out.view(batch, q_len, heads, dim), None
    t = key.shape[2]
    mask = (torch.ones((batch, t), dtype=torch.bool) if attention_mask is None
            else attention_mask[:, 0, -1, -t:].expand(batch, t))
    scale = scaling if scaling is not None else dim ** -0.5
    out = ext.decode_attention(query.reshape(batch, heads // groups, groups, dim), key, value, mask, scale)
    return out.reshape(batch, heads, 1, dim).transpose(1, 2), None


_verdict: list = [None, None]  # the last mask checked by `_prefill_columns` and what it found


def _prefill_columns(query, key, value, attention_mask, dropout, kwargs) -> torch.Tensor | None:
    """For a prefill pass (several bf16 query tokens a row, head size 64, CPU) that the prefill kernel
    can take: the (B, T) columns each row may attend to (empty: all), the rest being causal with the
    queries as the last tokens. None sends the pass to SDPA: any other mask (checked element by
    element, once per mask: every layer of a pass gets the same one), dtype, device or option."""
    batch, heads, q_len, dim = query.shape
    t = key.shape[2]
    if (q_len == 1 or dim != 64 or t < q_len or query.device.type != "cpu" or query.dtype != torch.bfloat16
            or key.dtype != torch.bfloat16 or value.dtype != torch.bfloat16 or key.stride(-1) != 1
            or value.stride(-1) != 1 or heads % key.shape[1] or dropout or prefill_kernel() is None
            or any(kwargs.get(k) is not None for k in ("softcap", "position_bias", "sliding_window", "sinks"))):
        return None
    if attention_mask is None:
        return torch.empty(0, dtype=torch.bool) if t == q_len else None
    if _verdict[0] is attention_mask:
        return _verdict[1]
    columns = None
    if attention_mask.dtype == torch.bool and attention_mask.dim() == 4 and attention_mask.shape[1] == 1:
        mask = attention_mask[:, 0, :, -t:]
        cols = mask[:, -1, :]  # the last query may see every column before it: exactly the valid ones
        causal = torch.arange(t) <= (t - q_len) + torch.arange(q_len)[:, None]
        if mask.shape[1] == q_len and torch.equal(mask, cols[:, None, :] & causal[None]):
            columns = cols.expand(batch, t).contiguous()
    _verdict[:] = [attention_mask, columns]
    return columns


AttentionInterface.register(NAME, decode_attention_forward)
AttentionMaskInterface.register(NAME, sdpa_mask)  # masks are built as for SDPA, which takes the rest


def use_decode_kernel(lm) -> bool:
    """Route `lm`'s decode steps through the kernel where it builds; True if it does."""
    if kernel() is None:
        return False
    lm.set_attn_implementation(NAME)
    return True
