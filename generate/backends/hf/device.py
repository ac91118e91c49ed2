"""What the hf backend picks by device: the dtype, the SDPA kernels of its decode loops, and the
memory its prefix store may keep."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch.nn.attention import SDPBackend

from generate.backends.options import DTYPES
from generate.common.errors import UsageError
from generate.common.machine import cpu_supports_bf16, memory_bytes


def pick_dtype(dtype: str, device: str) -> torch.dtype:
    """`dtype` by name, or for "auto": bf16 on an accelerator and on a CPU with native bf16, else
    float32 (bf16 emulated on a CPU is slower than float32)."""
    if dtype not in DTYPES:
        raise UsageError(f"unknown dtype {dtype!r}; choose one of: {', '.join(DTYPES)}")
    if dtype != "auto":
        return getattr(torch, dtype)
    if device.startswith("cuda"):
        return torch.bfloat16
    return torch.bfloat16 if cpu_supports_bf16() else torch.float32


def stored_dtype(model: str) -> str | None:
    """The dtype a local checkpoint's `config.json` says its weights are saved in (None: not a
    directory, or not said)."""
    path = Path(model) / "config.json"
    try:
        config = json.loads(path.read_text()) if path.is_file() else {}
    except (OSError, ValueError):
        return None  # loading the model says what is wrong with it
    stored = (config.get("dtype") or config.get("torch_dtype")) if isinstance(config, dict) else None
    return stored if isinstance(stored, str) else None


def rounding_warning(model: str, dtype: str, picked: torch.dtype) -> str | None:
    """What to tell a user whose `auto` dtype loads float32 weights in a narrower dtype: a trained
    writer's merged model is saved in float32 because most of its LoRA update is below bf16's
    rounding step, and loaded in bf16 it is mostly the base model again (`docs/train.md`)."""
    if dtype != "auto" or picked == torch.float32 or stored_dtype(model) != "float32":
        return None
    name = str(picked).removeprefix("torch.")
    return (f"hf model {model}: its weights are saved in float32 and load in {name} here (--dtype auto); a "
            f"trained writer's small update rounds away in {name}: --dtype float32 keeps it")


def store_budget(device: str) -> int:
    """Bytes of keys and values the prefix store may keep: 30% of the machine's memory on a CPU, 2 GiB
    on an accelerator (or where the memory is unknown). A round of `make benchmark-full` carries 96
    conversations to the next, tens of megabytes each after round two: more than 2 GiB holds, and
    conversations that do not fit re-encode their whole histories."""
    total = memory_bytes() if device == "cpu" else None
    return int(0.3 * total) if total else 2 << 30


def store_reserve(device: str) -> int:
    """Bytes of memory the prefix store keeps available on the machine (`PrefixStore`'s
    `reserve_bytes`): a quarter of it on a CPU, room for the next batch's decode cache and prefill;
    0 (no check) on an accelerator, whose memory the OS's MemAvailable does not describe."""
    total = memory_bytes() if device == "cpu" else None
    return total // 4 if total else 0


def decode_sdpa_backends(device: str) -> list[SDPBackend] | None:
    """The SDPA kernels our decode loops may use on `device` (None: torch's choice).

    On CUDA, torch picks cuDNN's attention for our masked decode steps, and cuDNN builds a plan for
    every new key length, that is at every step: the host's time then goes to planning, not to the
    GPU. The memory-efficient kernel takes the same masks without a plan per shape."""
    if not device.startswith("cuda"):
        return None
    return [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


def kv_bytes_per_token(config, dtype: torch.dtype) -> int:
    """Bytes of keys and values one token of one sequence holds in a decode cache."""
    heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    return 2 * config.num_hidden_layers * heads * head_dim * torch.finfo(dtype).bits // 8


def decode_token_budget(lm, device: str, share: float = 0.5) -> int | None:
    """Cache tokens (rows x columns) one decode batch may hold on CUDA: `share` of the card's free
    memory, so a phase's calls go in as few batches as fit; None on a CPU, where the batch size
    alone bounds a batch."""
    if not device.startswith("cuda"):
        return None
    free, _ = torch.cuda.mem_get_info(torch.device(device))
    return int(share * free) // kv_bytes_per_token(lm.config, lm.dtype)
