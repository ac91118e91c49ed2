"""The machine a result was made on: CPU model, cores and the instruction sets the engine picks by.

Speeds depend on the machine, and so do the numbers themselves: the hf backend runs in bf16 where
the CPU has native bf16 (AVX-512 BF16 or AMX) and in float32 elsewhere, and its decode kernels need
AVX-512. Sessions of this project have run on both kinds (an AVX-512 Xeon, an AVX2-only EPYC), so
every manifest records the machine (`describe`) and the backend reads its choices from here, one
reading of /proc/cpuinfo for all of them.
"""

from __future__ import annotations

import os
import platform
from functools import cache
from pathlib import Path

# The instruction sets that change what the engine does (dtype, kernels), in the order shown.
ISA = ("avx2", "fma", "avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512_bf16", "amx_bf16")


@cache
def _cpuinfo() -> tuple[str | None, frozenset[str]]:
    """(model name, flags) of the first CPU; (None, empty) where /proc/cpuinfo cannot be read."""
    try:
        return parse_cpuinfo(Path("/proc/cpuinfo").read_text())
    except OSError:
        return None, frozenset()


def parse_cpuinfo(text: str) -> tuple[str | None, frozenset[str]]:
    """(model name, flags as whole words) of the first CPU listed in /proc/cpuinfo's text."""
    model, flags = None, frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and model is None:
            model = value.strip()
        elif key == "flags" and not flags:
            flags = frozenset(value.split())
    return model, flags


def cpu_has(*flags: str) -> bool:
    """True when the CPU reports every one of `flags` (False where that cannot be read)."""
    have = _cpuinfo()[1]
    return all(f in have for f in flags)


def cpu_supports_bf16() -> bool:
    """bf16 matmuls are fast only with native support (AVX512-BF16 / AMX); elsewhere models run in
    float32 (the hf backend's `auto` dtype, and GRPO's choice of bf16 on a CPU)."""
    return cpu_has("avx512_bf16") or cpu_has("amx_bf16")


def describe() -> dict:
    """What a manifest records about the machine."""
    import torch

    model, flags = _cpuinfo()
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return {"cpu": model or platform.processor() or None, "arch": platform.machine(), "cores": cores,
            "torch_threads": torch.get_num_threads(), "isa": [f for f in ISA if f in flags],
            "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None}


def peak_rss_gb() -> float | None:
    """The process's peak resident memory so far, in GiB (None where the OS does not say): what a
    run needed of the machine's memory, recorded beside its time. In a process that made several
    runs (a benchmark), the peak of all of them so far."""
    try:
        import resource
    except ImportError:
        return None
    kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return round(kib / 2**20, 2)


def memory_bytes() -> int | None:
    """The machine's physical memory in bytes (None where the OS does not say)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def available_bytes() -> int | None:
    """Memory the kernel says a process could still take without swapping (MemAvailable), in bytes;
    None where the OS does not say (not Linux)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def release_free_memory() -> None:
    """Hand the pages of freed heap memory back to the OS (glibc's `malloc_trim`; a no-op elsewhere).

    Tensors below glibc's mmap threshold (up to 32 MB once large blocks have been freed) live on
    the heap, and freeing them keeps the pages resident: a cache that drops thousands of such
    tensors frees nothing the machine can see until the heap is trimmed."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)


@cache
def _libc():
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return libc if hasattr(libc, "malloc_trim") else None
    except OSError:
        return None
