"""Held-out reward before vs after GRPO: the evidence that training learned something.

Each model writes `--samples` stories for every held-out prompt of a training run's split (the
prompts GRPO never saw), with the recipe's decoding settings and the same per-story seeds for
every model, so the models differ only in their weights. Every story is scored with the recipe's
composite reward (same reward functions, options, gate and weights as training) and a table of
per-reward means and the weighted total is printed, with each model's paired difference from the
first model (per-prompt means, so a prompt's samples count once; +- is the standard error over
prompts).

Usage:
    python scripts/heldout_reward.py --config configs/grpo/smollm2_cpu.yaml \
        --split runs/grpo/smollm2_cpu/split.json --samples 8 \
        --model base=smollm2-135m-instruct --model grpo=hf:runs/grpo/smollm2_cpu/merged \
        --out runs/grpo/smollm2_cpu/heldout.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from trl import GRPOConfig

from generate.backends import ChatRequest, SamplingParams, load_model
from generate.common.errors import UsageError
from generate.common.cli import run_cli
from generate.common.config import load_yaml
from generate.datasets import load_dataset
from generate.journal import derive_seed
from generate.prompts import load_prompts
from rewards import build_rewards
from rewards.composite import score_batch
from train.args import ScriptArguments
from train.split import load_split

log = logging.getLogger("heldout_reward")


def recipe_settings(config: dict) -> tuple[ScriptArguments, dict]:
    """The recipe's reward arguments and decoding settings (GRPOConfig defaults where unset)."""
    names = {f.name for f in dataclasses.fields(ScriptArguments)}
    script = ScriptArguments(**{k: v for k, v in config.items() if k in names})
    defaults = {f.name: f.default for f in dataclasses.fields(GRPOConfig)}
    decoding = {k: config.get(k, defaults[k]) for k in ("max_completion_length", "temperature", "top_p", "seed")}
    weights = config.get("reward_weights") or [1.0] * len(script.reward_funcs)
    return script, {**decoding, "reward_weights": weights}


def write_stories(spec: str, tasks, samples: int, decoding: dict) -> list[str]:
    """`samples` stories per task, seeded by (seed, task, sample) so every model gets the same seeds."""
    prompt_set = load_prompts()
    params = SamplingParams(decoding["max_completion_length"], decoding["temperature"], decoding["top_p"])
    requests = [ChatRequest(prompt_set.writer_messages(t.prompt), params, seed=derive_seed(decoding["seed"], t.id, k))
                for t in tasks for k in range(samples)]
    options = {} if spec.startswith(("openai:", "vllm:")) else {"dtype": "float32", "batch_size": 8}
    model = load_model(spec, **options)
    try:
        return [c.text for c in model.generate(requests, desc=spec)]
    finally:
        model.close()


def paired_difference(per_prompt: np.ndarray, base: np.ndarray) -> tuple[float, float]:
    """Mean and standard error over prompts of (model - base) per-prompt means."""
    diff = per_prompt - base
    sem = float(diff.std(ddof=1) / math.sqrt(len(diff))) if len(diff) > 1 else float("nan")
    return float(diff.mean()), sem


def table(results: dict[str, dict[str, list]], n_prompts: int, samples: int) -> str:
    """Per-reward means and the total, plus each model's paired total difference from the first."""
    names = list(next(iter(results.values()))["values"])
    header = ["model"] + names + ["total", "diff vs " + next(iter(results))]
    rows, base = [], None
    for label, res in results.items():
        totals = np.array([np.nan if t is None else t for t in res["totals"]], dtype=float)
        per_prompt = np.nanmean(totals.reshape(n_prompts, samples), axis=1)
        base = per_prompt if base is None else base
        cells = [label] + [f"{_mean(res['values'][n]):.4f}" for n in names] + [f"{np.nanmean(totals):.4f}"]
        diff, sem = paired_difference(per_prompt, base)
        cells.append("-" if per_prompt is base else f"{diff:+.4f} +- {sem:.4f}")
        rows.append(cells)
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in [header] + rows)


def _mean(values: list) -> float:
    present = [v for v in values if v is not None and math.isfinite(v)]
    return sum(present) / len(present) if present else float("nan")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", required=True, help="the GRPO recipe the models were trained with")
    parser.add_argument("--split", required=True, help="split.json of the training run (or its directory)")
    parser.add_argument("--model", action="append", required=True, help="label=spec (or a spec); first = baseline")
    parser.add_argument("--samples", type=int, default=4, help="stories per held-out prompt and model")
    parser.add_argument("--out", help="write stories, values and the table as JSON here")
    args = parser.parse_args(argv)
    script, settings = recipe_settings(load_yaml(args.config))
    split = load_split(args.split)
    tasks = split.select(load_dataset(split.dataset or script.dataset), "eval")
    if not tasks:
        raise UsageError("the split holds no held-out prompt")
    funcs = build_rewards(script.reward_funcs, script.reward_options, script.reward_gate)
    prompt_set = load_prompts()
    prompts = [prompt_set.writer_messages(t.prompt) for t in tasks for _ in range(args.samples)]
    columns = {"prompt_id": [t.id for t in tasks for _ in range(args.samples)],
               "task_prompt": [t.prompt for t in tasks for _ in range(args.samples)]}

    results: dict[str, dict[str, list]] = {}
    for item in args.model:
        label, _, spec = item.rpartition("=") if "=" in item else (item, "", item)
        stories = write_stories(spec, tasks, args.samples, settings)
        completions = [[{"role": "assistant", "content": s}] for s in stories]
        values, totals = score_batch(funcs, prompts, completions, settings["reward_weights"], **columns)
        results[label] = {"spec": spec, "stories": stories, "values": values, "totals": totals}
    report = table(results, len(tasks), args.samples)
    print(f"held-out prompts: {len(tasks)} x {args.samples} samples\n{report}")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps({"config": args.config, "split": args.split, "samples": args.samples,
                                              "prompt_ids": [t.id for t in tasks], "results": results,
                                              "table": report}, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    run_cli(main)
