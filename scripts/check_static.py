"""Is the GPU path right, before it is timed? The `static` path's decode step replayed from a CUDA
graph against the same loop run eagerly, and its left-padded prefill against a float32 reference.

    python scripts/check_static.py                                  # on a GPU
    python scripts/check_static.py --prompts 3 --max-new-tokens 8   # on a CPU: the prefill check only

1. **Graph == eager**: the same prompts and seeds decoded by `sample_static` with and without the
   graph. A replay runs the kernels the eager step runs, on the same inputs, so the tokens must be
   equal, row by row. A graph that baked in a step's cache position or read a stale input buffer
   gives other tokens from its second step on: the first step that differs is printed per row.
   Needs CUDA; on a CPU there is no graph to check, and it says so.
2. **The padded prefill**: each prompt's next-token logits from the static layout (left padding, the
   4D mask of `prefill_mask`) against the prompt alone through a float32 copy of the model:
   relative error ||out - ref|| / ||ref||. In float32 it checks the layout and mask alone (right:
   near float32 rounding; a row reading padding or a later column: 1e-1 or more); in the model's
   dtype it adds bf16's rounding through every layer (up to ~2e-2).

Prints one `static check:` line (what `scripts/gpu_check.py` reads) and exits 1 when a check fails.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from generate.backends import load_backend
from generate.backends.hf import static
from generate.common.cli import run_cli
from generate.common.config import parse_config
from generate.datasets import load_dataset


@dataclass
class CheckConfig:
    model: str = "smollm2-135m-instruct"
    dataset: str = "default"
    prompts: int = 16
    max_new_tokens: int = 200
    temperature: float = 0.9
    top_p: float = 0.95
    tolerance_fp32: float = 1e-3  # relative error of the padded prefill's logits in float32
    tolerance: float = 5e-2  # the same in the model's dtype: bf16 through 30 layers, up to ~2e-2 seen


def first_difference(a: list[int], b: list[int]) -> int | None:
    """The first step at which two token lists differ (a length counts), None where equal."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None if len(a) == len(b) else min(len(a), len(b))


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """||out - ref|| / ||ref|| in float64; NaN anywhere is infinitely wrong."""
    out, ref = out.double(), ref.double()
    if not torch.isfinite(out).all():
        return float("inf")
    return float((out - ref).norm() / ref.norm())


def chat_prompts(tokenizer, dataset: str, n: int) -> list[list[int]]:
    """n chat-formatted prompts of differing lengths (every other one asks twice: wider padding)."""
    tasks = load_dataset(dataset)
    out = []
    for i in range(n):
        text = tasks[i % len(tasks)].prompt
        text = f"{text}\n\n{text}" if i % 2 else text
        rendered = tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True,
                                                 tokenize=False)
        out.append(tokenizer(rendered, add_special_tokens=False)["input_ids"])
    return out


@torch.inference_mode()
def padded_logits(lm, prompts: list[list[int]], pad_id: int) -> torch.Tensor:
    """(prompts, V): each prompt's next-token logits from the static path's left-padded prefill."""
    ids, real = static.layout(prompts, pad_id, len(prompts), max(map(len, prompts)))
    positions = (real.cumsum(dim=1) - 1).clamp_min(0)
    dev = lm.device
    with static.attention_kernels(dev):  # the kernels `sample_static`'s prefill runs
        return lm(input_ids=ids.to(dev), position_ids=positions.to(dev),
                  attention_mask=static.prefill_mask(real.to(dev), ids.shape[1]), logits_to_keep=1).logits[:, -1]


@torch.inference_mode()
def prefill_errors(lm, prompts: list[list[int]], pad_id: int) -> dict[str, float]:
    """The largest relative error over the prompts of the padded prefill against each prompt alone
    through a float32 copy of the model: in float32 (the layout and mask alone: a right one lands
    near float32 rounding, a wrong one near 1e-1) and in the model's dtype (bf16 rounding through
    every layer: up to ~2e-2 was seen on a CPU)."""
    ref_lm = copy.deepcopy(lm).float()
    refs = [ref_lm(input_ids=torch.tensor([p], device=lm.device), logits_to_keep=1).logits[0, -1] for p in prompts]
    errors = {}
    for name, model in (("float32", ref_lm), ("model", lm)):
        out = padded_logits(model, prompts, pad_id)
        errors[name] = max(rel_error(out[r], ref) for r, ref in enumerate(refs))
    return errors


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_config(CheckConfig, argv, prog="python scripts/check_static.py", description=__doc__.split("\n")[0])
    backend = load_backend(cfg.model, batch_size=cfg.prompts, path="static")
    lm, tok = backend.lm, backend.tokenizer
    prompts = chat_prompts(tok, cfg.dataset, cfg.prompts)
    stop = {tok.eos_token_id, tok.pad_token_id}
    kwargs = {"max_new_tokens": cfg.max_new_tokens, "temperature": cfg.temperature, "top_p": cfg.top_p,
              "seeds": [1000 + i for i in range(len(prompts))], "pad_id": tok.pad_token_id, "stop_ids": stop}
    failed = False
    if lm.device.type == "cuda":
        graphed = static.sample_static(lm, prompts, graphs=True, **kwargs)
        if static.capture_failure():
            graph_part = f"graphs not captured ({static.capture_failure()})"
            failed = True
        else:
            eager = static.sample_static(lm, prompts, graphs=False, **kwargs)
            diffs = [first_difference(g, e) for g, e in zip(graphed, eager)]
            same = sum(d is None for d in diffs)
            steps = sum(len(t) for t in graphed)
            graph_part = f"graph == eager in {same}/{len(prompts)} rows ({steps:,} tokens)"
            if same < len(prompts):
                graph_part += "; first differing step per row: " + ", ".join(
                    str(d) for d in diffs if d is not None)
                failed = True
    else:
        graph_part = "no CUDA: no graph to check"
    errors = prefill_errors(lm, prompts, tok.pad_token_id)
    failed |= errors["float32"] > cfg.tolerance_fp32 or errors["model"] > cfg.tolerance
    dtype = str(lm.dtype).removeprefix("torch.")
    print(f"static check: {graph_part}; padded prefill vs each prompt alone in float32, {len(prompts)} prompts: "
          f"max rel err {errors['float32']:.1e} in float32 (tolerance {cfg.tolerance_fp32:.0e}), "
          f"{errors['model']:.1e} in {dtype} (tolerance {cfg.tolerance:.0e}) -> {'FAILED' if failed else 'ok'}")
    return 1 if failed else 0


if __name__ == "__main__":
    run_cli(main)
