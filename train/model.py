"""Model names in, checkpoints out: resolving the writer and exporting the merged model.

The writer may be named like everywhere else in the project (the alias `smollm2-135m-instruct`,
`hf:<dir>`) or as a plain hub id / directory. After training, the LoRA adapter is merged into a
fresh copy of the base model and saved with its tokenizer in `<output_dir>/merged`, a plain
transformers checkpoint that `review-lab generate --model hf:<output_dir>/merged` loads.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch

from generate.backends import ALIASES, resolve_spec
from generate.common.errors import UsageError

log = logging.getLogger(__name__)

MERGED_DIR = "merged"
# The dtype every compared local writer samples in, trained or not (`heldout`, `story`): a merged
# model is saved in float32 (`export_merged`) because most of its LoRA update is below bf16's rounding
# step, and in bf16 it would round back to the base; the base samples alike, so the two differ by
# their weights alone.
SAMPLING_DTYPE = "float32"


def resolve_model_path(name: str) -> str:
    """A transformers-loadable id or directory for a project model name.

    Aliases (`smollm2-135m-instruct`) and `hf:` specs resolve to their checkpoint (the embedded
    model is converted on first use); anything else is passed through unchanged. No name (a
    recipe without `model_name_or_path`) is bad input.
    """
    if not name:
        raise UsageError("no model to train: the recipe (or --model_name_or_path) names none")
    if name in ALIASES or name.startswith("hf:"):
        kind, path = resolve_spec(name)
        if kind == "hf":
            return path
    return name


IDENTITY = ("revision", "trust_remote_code")  # what picks the base's weights and code, not how it computes


def init_kwargs(model_args: Any, training_args: Any) -> dict[str, Any]:
    """The trainer's `model_init_kwargs`: trl's ModelConfig (dtype, revision, attention) with the
    config's own `trust_remote_code`, the recipe's `model_init_kwargs` winning.

    One helper for the training load and the merge's reload (`base_identity`): the adapter is
    merged into the weights it was trained on, never into another revision of the base.

    Raises:
        UsageError: the recipe asks for a quantized base (`load_in_4bit` / `load_in_8bit`), which
            nothing here loads: it would train the full-precision base while the recipe says
            otherwise, and the merge would not reproduce a quantized training."""
    quantized = [k for k in ("load_in_4bit", "load_in_8bit") if getattr(model_args, k, False)]
    if quantized:
        raise UsageError(f"{', '.join(quantized)}: quantized (QLoRA) training is not supported; remove it from the "
                         "recipe")
    return {"dtype": model_args.dtype, "revision": model_args.model_revision,
            "attn_implementation": model_args.attn_implementation,
            "trust_remote_code": training_args.trust_remote_code, **(training_args.model_init_kwargs or {})}


def base_identity(kwargs: dict[str, Any] | None) -> dict[str, Any]:
    """Of a training load's kwargs, those that choose which base is loaded (`IDENTITY`): the merge
    reloads with them, and in float32 whatever the training dtype."""
    return {k: v for k, v in (kwargs or {}).items() if k in IDENTITY}


def export_merged(output_dir: str | Path, base_model: str, kwargs: dict[str, Any] | None = None) -> Path:
    """Merge the adapter saved in `output_dir` into `base_model` and save it in `output_dir/merged`.

    `kwargs` are the training load's `model_init_kwargs` (`init_kwargs`): the base is reloaded with
    the same revision and trust_remote_code.

    Reloading from disk (rather than unwrapping the trained model) works the same after DDP,
    ZeRO-2 and ZeRO-3, where the in-memory weights may be partitioned across ranks. Without an
    adapter (full fine-tuning) the saved full model is re-saved there, so the path is uniform.
    The merge and the saved weights are float32 whatever the training dtype: merging into bf16
    weights can round a small LoRA update away entirely (loaders may still cast down).
    """
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    output_dir = Path(output_dir)
    target = output_dir / MERGED_DIR
    if (output_dir / "adapter_config.json").is_file():
        base = AutoModelForCausalLM.from_pretrained(base_model, dtype=torch.float32, **base_identity(kwargs))
        model = PeftModel.from_pretrained(base, str(output_dir)).merge_and_unload()
    else:
        model = AutoModelForCausalLM.from_pretrained(str(output_dir), dtype=torch.float32)
    tokenizer = AutoTokenizer.from_pretrained(str(output_dir))
    model.save_pretrained(target)
    tokenizer.save_pretrained(target)
    log.info("merged model saved to %s", target)
    return target
