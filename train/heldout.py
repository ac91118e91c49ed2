"""`review-lab heldout`: held-out reward before vs after GRPO, the evidence that training learned
something.

Each model writes `--samples` stories for every held-out prompt of a training run's split (the
prompts GRPO never saw), with the training's decoding settings and the same per-story seeds for
every model, so the models differ only in their weights. Every story (cleaned as generation cleans
a writer's reply) is scored with the training's composite reward (same reward functions, options,
gate and weights) and a table of per-reward means and the weighted total is printed, with each
model's paired difference from the first model (per-prompt means, so a prompt's samples count once;
+- is the standard error over prompts). A reward's mean is over the values it gave; a failed value
(None) is filled with its prompt group's mean for the total, as training fills it, and counted
beside the mean ("2 filled"), never averaged in as if it were measured. `heldout.json` holds the
values as given (`values`, null where one failed), the counts (`filled`) and the totals.

Local (hf) models sample in float32 (`SAMPLING_DTYPE`), also where the training ran in bf16 (the CPU
recipe on a CPU with native bf16). Not for determinism: for the trained weights. A trained writer
is its merged model (`train.model.export_merged`), saved in float32 because its LoRA update is
mostly smaller than bf16's rounding step: loaded in bf16, the merged weights round back to the
base's. On the CPU recipe's 40-step run (`runs/story/grpo`, trained in bf16 on a CPU with AMX),
70% of the weights the training changed are the base's again in bf16, and the update keeps 69%
relative error: its median size is 0.13% of the weight it changes, and bf16's step is 0.4 to 0.8%
of a weight, so a change under half a step rounds away.
The training itself never rounded the update into the weights (peft adds the adapter's output to
the bf16 base's), so the policy it trained is W x + dW x up to bf16 rounding of activations: the
float32 merged model computes that, bf16 loading of it would not. Sampling the trained model as it
ran (the bf16 base with the adapter beside it) would need the hf backend to load adapters
unmerged; the baseline then differs from the training's starting policy only by activation
rounding too, the same for every model compared.

"The training's" settings are the ones the run's `manifest.json` records (`train/grpo.py`: the
script arguments and the training arguments, command-line overrides included: `review-lab story`
gives its writers their own reward model, corpus and seed), over the recipe. Without that manifest
the recipe alone is used, and refused (exit 2) where the run's `step.json` shows that training was
given other reward options.

Usage:
    review-lab heldout --config configs/grpo/smollm2_cpu.yaml \
        --split runs/grpo/smollm2_cpu/split.json --samples 8 \
        --model base=smollm2-135m-instruct --model grpo=hf:runs/grpo/smollm2_cpu/merged \
        --out runs/grpo/smollm2_cpu/heldout
    review-lab heldout --options heldout.yaml --samples 4   # YAML + overrides
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
from trl import GRPOConfig

from eval.stats import summarize
from generate.backends import ChatRequest, SamplingParams, backend_options, check_spec, load_model
from generate.common.config import add_dataclass_args, build_config, load_yaml, new_parser
from generate.common.errors import UsageError
from generate.common.files import make_dir
from generate.common.manifest import write_manifest
from generate.common.ranges import AT_LEAST_1, check_options, checked, in_range
from generate.datasets import load_dataset
from generate.journal import derive_seed
from generate.prompts import load_prompts
from rewards import RewardContext, build_rewards
from rewards.composite import combine, reward_weights, run_rewards
from rewards.text import completion_text
from train.args import ScriptArguments
from train.model import SAMPLING_DTYPE
from train.split import load_split
from train.steps import STEP_FILE

log = logging.getLogger("heldout_reward")
DECODING = ("max_completion_length", "temperature", "top_p", "seed")
# trl's other sampling settings: held-out stories cannot be sampled with them, so only their defaults pass.
UNREPRODUCED = ("top_k", "min_p", "repetition_penalty", "generation_kwargs")
TRAINING = ("reward_weights", *DECODING, *UNREPRODUCED)  # what heldout reads of the recorded training arguments
EXAMPLE = ("review-lab heldout --config configs/grpo/smollm2_cpu.yaml --split runs/grpo/smollm2_cpu --samples 4 "
           "--model base=smollm2-135m-instruct --model grpo=hf:runs/grpo/smollm2_cpu/merged")


def recipe_settings(config: dict) -> tuple[ScriptArguments, dict]:
    """The recipe's reward arguments and decoding settings (GRPOConfig defaults where unset).

    Raises:
        UsageError: the training sampled with a setting the held-out stories cannot be sampled
            with (`UNREPRODUCED` away from trl's default): they would come from another policy."""
    names = {f.name for f in dataclasses.fields(ScriptArguments)}
    script = ScriptArguments(**{k: v for k, v in config.items() if k in names})
    defaults = {f.name: f.default for f in dataclasses.fields(GRPOConfig)}
    other = sorted(k for k in UNREPRODUCED if config.get(k, defaults[k]) != defaults[k])
    if other:
        raise UsageError(f"training sampled with {', '.join(f'{k}={config[k]!r}' for k in other)}, which held-out "
                         "stories cannot be sampled with (only max_completion_length, temperature, top_p, seed)")
    decoding = {k: config.get(k, defaults[k]) for k in DECODING}
    weights = reward_weights(config.get("reward_weights"), script.reward_funcs)
    return script, {**decoding, "reward_weights": weights}


def trained_config(split: str | Path, recipe: dict) -> tuple[dict, str]:
    """(the recipe as the run holding `split` was trained with, where that came from).

    The run's GRPO manifest records its script arguments and training arguments after every
    override; those win over the recipe, so the held-out rewards are the training's. Without it,
    the recipe alone, unless the run's `step.json` (`review-lab story`'s GRPO step) records reward
    options other than the recipe's: scoring with the recipe would then report another reward.

    Raises:
        UsageError: no manifest, and the step record shows training used other reward options."""
    run = Path(split) if Path(split).is_dir() else Path(split).parent
    manifest = _json(run / "manifest.json")
    if manifest and manifest.get("kind") == "grpo":
        recorded = manifest.get("config") or {}
        script, training = recorded.get("script") or {}, recorded.get("training") or {}
        trained = {**recipe, **script, **{k: training[k] for k in TRAINING if k in training}}
        changed = sorted(k for k in recipe if trained[k] != recipe[k])
        if changed:
            log.info("scoring as %s was trained, not as the recipe says: %s", run, ", ".join(changed))
        return trained, str(run / "manifest.json")
    step = _json(run / STEP_FILE) or {}
    options = step.get("inputs", {}).get("options")
    if options is not None and options != (recipe.get("reward_options") or {}):
        raise UsageError(f"{run} has no GRPO manifest.json, and its {STEP_FILE} says training had other reward "
                         "options than the recipe's; finish the training (its manifest records them) first")
    log.warning("%s has no GRPO manifest.json: scoring with the recipe's options alone", run)
    return recipe, "recipe"


def _json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def write_stories(spec: str, tasks, samples: int, decoding: dict) -> list[str]:
    """`samples` stories per task, seeded by (seed, task, sample) so every model gets the same seeds,
    each cleaned as the rewards read a completion (`rewards.text.completion_text`, generation's own
    cleaning): the story the evaluation would score."""
    prompt_set = load_prompts()
    params = SamplingParams(decoding["max_completion_length"], decoding["temperature"], decoding["top_p"])
    requests = [ChatRequest(prompt_set.writer_messages(t.prompt), params, seed=derive_seed(decoding["seed"], t.id, k))
                for t in tasks for k in range(samples)]
    model = load_model(spec, **backend_options(spec, batch_size=8, dtype=SAMPLING_DTYPE))
    try:
        return [completion_text(c.text) for c in model.generate(requests, desc=spec)]
    finally:
        model.close()


def paired_difference(per_prompt: np.ndarray, base: np.ndarray) -> str:
    """Mean +- standard error over prompts of (model - base) per-prompt means (`eval.stats`), over
    the prompts both models have a total for: a prompt whose every sample failed is left out and
    counted, never a NaN that hides the other prompts' difference."""
    diff = summarize(list(per_prompt - base))
    if diff.mean is None:
        return "n/a (no prompt with both totals)"
    cell = f"{diff.mean:+.4f} +- {'n/a' if diff.se is None else f'{diff.se:.4f}'}"
    return cell if diff.n == len(base) else f"{cell} ({diff.n} of {len(base)} prompts)"


def table(results: dict[str, dict[str, list]], n_prompts: int, samples: int) -> str:
    """Per-reward means over the values each reward gave (with the number filled for the total,
    when any), the total, and each model's paired total difference from the first."""
    names = list(next(iter(results.values()))["values"])
    header = ["model"] + names + ["total", "diff vs " + next(iter(results))]
    rows, base = [], None
    for label, res in results.items():
        totals = np.array([np.nan if t is None else t for t in res["totals"]], dtype=float)
        by_prompt = totals.reshape(n_prompts, samples)
        answered = np.isfinite(by_prompt).any(axis=1)
        per_prompt = np.full(n_prompts, np.nan)
        per_prompt[answered] = np.nanmean(by_prompt[answered], axis=1)
        base = per_prompt if base is None else base
        filled = res.get("filled") or {}
        cells = [label] + [f"{_mean(res['values'][n]):.4f}" + (f" ({filled[n]} filled)" if filled.get(n) else "")
                           for n in names] + [f"{_mean(list(totals)):.4f}"]
        cells.append("-" if per_prompt is base else paired_difference(per_prompt, base))
        rows.append(cells)
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in [header] + rows)


def _mean(values: list) -> float:
    present = [v for v in values if v is not None and math.isfinite(v)]
    return sum(present) / len(present) if present else float("nan")


def check_labelled_specs(items: list[str]) -> None:
    """Each `label=spec` (or bare spec) names a model the registry knows."""
    for item in items:
        check_spec(item.rpartition("=")[2])


@dataclass
class HeldoutConfig:
    config: str = field(default="", metadata={"help": "the GRPO recipe the models were trained with"})
    split: str = field(default="", metadata={"help": "split.json of the training run (or its directory)"})
    model: list[str] = field(default_factory=list, metadata=checked(
        check_labelled_specs, help="label=spec (or a spec); first = baseline"))
    samples: int = field(default=4, metadata=in_range(AT_LEAST_1, help="stories per held-out prompt and model"))
    out: str | None = field(default=None, metadata={"help": "directory for heldout.json and manifest.json"})

    def __post_init__(self) -> None:
        if not self.config or not self.split or not self.model:
            raise UsageError("--config (the GRPO recipe), --split and at least one --model are required")
        check_options(self)


def main(argv: Sequence[str] | None = None) -> int:
    # The GRPO recipe is this script's input, so its own options file is --options (not --config).
    cfg = parse_options(argv)
    split = load_split(cfg.split)
    trained, source = trained_config(cfg.split, load_yaml(cfg.config))
    script, settings = recipe_settings(trained)
    tasks = split.select(load_dataset(split.dataset or script.dataset), "eval")
    if not tasks:
        raise UsageError("the split holds no held-out prompt")
    if cfg.samples < 2 and "group_diversity" in script.reward_funcs:  # no sibling: no value, a total without it
        raise UsageError("group_diversity compares a story with its siblings: --samples must be at least 2")
    funcs = build_rewards(script.reward_funcs, script.reward_options, script.reward_gate, RewardContext())
    prompt_set = load_prompts()
    prompts = [prompt_set.writer_messages(t.prompt) for t in tasks for _ in range(cfg.samples)]
    columns = {"prompt_id": [t.id for t in tasks for _ in range(cfg.samples)],
               "task_prompt": [t.prompt for t in tasks for _ in range(cfg.samples)]}

    results: dict[str, dict[str, list]] = {}
    for item in cfg.model:
        label, _, spec = item.rpartition("=") if "=" in item else (item, "", item)
        stories = write_stories(spec, tasks, cfg.samples, settings)
        completions = [[{"role": "assistant", "content": s}] for s in stories]
        values = run_rewards(funcs, prompts, completions, **columns)
        _, filled, totals = combine(values, prompts, settings["reward_weights"], **columns)
        results[label] = {"spec": spec, "stories": stories, "values": values, "filled": filled, "totals": totals}
    report = table(results, len(tasks), cfg.samples)
    print(f"held-out prompts: {len(tasks)} x {cfg.samples} samples\n{report}")
    if cfg.out:
        out = Path(cfg.out)
        make_dir(out)
        (out / "heldout.json").write_text(json.dumps({"recipe": cfg.config, "split": cfg.split, "samples": cfg.samples,
                                                      "settings_from": source, "prompt_ids": [t.id for t in tasks],
                                                      "results": results, "table": report}, indent=2) + "\n",
                                          encoding="utf-8")
        write_manifest(out, kind="heldout_reward", config=asdict(cfg), seed=settings["seed"],
                       templates=prompt_set.texts(), extra={"recipe": load_yaml(cfg.config), "trained_with": trained,
                                                            "settings_from": source, "sampling_dtype": SAMPLING_DTYPE})
    return 0


def parse_options(argv: Sequence[str] | None) -> HeldoutConfig:
    """`--options FILE` (YAML) plus one flag per `HeldoutConfig` field; `--config` is the recipe."""
    parser = new_parser("review-lab heldout", __doc__.split("\n\n")[0], EXAMPLE)
    parser.add_argument("--options", help="YAML file of this script's options; flags override it")
    add_dataclass_args(parser, HeldoutConfig)
    args = vars(parser.parse_args(argv))
    return build_config(HeldoutConfig, args.pop("options"), args)
