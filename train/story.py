"""`review-lab story`, the whole story in one command: does GRPO on the single agent match what LLM
Review gets from interaction, and at what cost? And which reward signal trains the better writer?

    review-lab story --out runs/story                                  # or: make story
    review-lab story --out runs/signals --signals composite rm principle
    review-lab signals                   # the same: those three signals, into runs/signals (make signals)

1. Split the training prompts (by prompt, stratified by aspect; the same split the GRPO recipes
   use). Every evaluation below uses one set of prompts that no training step sees: the held-out
   split (`--eval-dataset heldout`, 4 prompts of the bundled set), or prompts of another dataset
   such as SciFi-100, the paper's benchmark (`--eval-dataset scifi100 --eval-limit 8`: 8 prompts
   from 8 aspects). Wilcoxon's test cannot reject at the 5% level with fewer than 6 prompts, and
   `compare` corrects for the many tests of a comparison: with 8 prompts and every metric tested no
   gain can be called significant (the story says so when it starts). `--eval-limit 11` or more
   makes claims possible, and so do planned claims: `--metrics judge_average surprisal` tests only
   those two metrics, 6 tests instead of 30.
2. Baseline: the base writer as single agent and inside Review, on the evaluation prompts.
3. One GRPO writer per reward signal (`--signals`), all with the same CPU recipe but the reward:
   `composite` (ours: judge + novelty + diversity + length), `rm` (the Bradley-Terry reward model
   trained on multi-agent curated preferences; arXiv 2508.21476 3.1) and `principle` (the
   adversarially optimised principle judge; 3.2). The signals are prepared first
   (`train/signals.py`: candidates on training prompts, curation, reward model, weak
   labels, principle optimisation). Each run gets the story's `--seed`, and its reference rewards
   the evaluation's corpus settings (`--reference-dir`, `--reference-max-chunks`): a writer is
   trained against the corpus sample it is scored on.
4. Each tuned writer as single agent on the evaluation prompts; the composite one also in Review.
5. Evaluate every run with one judge and one surprisal scorer (the base writer, so that surprisal
   is comparable across writers) and, when the signals exist, both signals' verdicts (excellence
   rates, agreement: `eval/signals.py`); compare every run with the base single agent
   (`compare/`), the tuned writer in Review with the base writer in Review (`compare_in_review/`).

Every step is resumable: re-running continues where an interrupted story stopped. `story.json`
records the arguments, the evaluation prompts, the seconds each step's current output took (from
its `step.json`: summed over the invocations that finished it, a redone step's earlier seconds
dropped; `train.steps`) and the signals' excellence rates per run.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from eval.compare import compare, load_run
from eval.compare.report import write_outputs
from eval.multiplicity import attainable
from eval.run import EvalConfig, Evaluator
from eval.signals import agreement, confound_table, principles_record, render_confounds
from eval.view import write_view
from generate.backends import load_model
from generate.common.config import load_yaml, parse_config
from generate.common.errors import UsageError
from generate.common.files import make_dir
from generate.common.manifest import write_manifest
from generate.common.paths import REPO_ROOT
from generate.datasets import Task, load_dataset, spread_over_aspects
from generate.runner import RunConfig, Runner, raise_failures, run_collecting
from rewards import get_reward
from rewards.registry import option_names
from rewards.signal_check import proven
from train import signals as signal_steps
from train.launch import accelerate_command
from train.length_gap import length_gap, render_length_gap
from train.model import SAMPLING_DTYPE, resolve_model_path
from train.split import Split, load_split, plain_prompt, split_tasks
from train.steps import Step, content_hash, step_seconds
from train.story_config import (BASE, EXAMPLE, SELF_GRADED, SIGNALS, SIGNALS_EXAMPLE, SignalsConfig, StoryConfig,
                                runs_of, scored_metrics)

log = logging.getLogger("end_to_end")
__all__ = ["SignalsConfig", "Story", "StoryConfig", "main", "signals_main"]


def weights_hash(writer: str) -> str | None:
    """Content hash of a writer given as `hf:<directory>` (a trained one); None for a bundled alias."""
    return content_hash(writer[3:]) if writer.startswith("hf:") else None


def reward_options(cfg: StoryConfig, signal: str, options: dict | None) -> dict:
    """`options` (None: the recipe's `reward_options`) with the evaluation's settings on every reward
    of the recipe that takes them: `reference_dir`, `max_chunks` (`--reference-max-chunks`) and
    `seed` (`--seed`). The novelty rewards then measure against the corpus sample the evaluation
    scores with, not the recipe's (environment corpus, its own sample and seed 0), and the principle
    judge samples with the seed its principles were optimised with. The config holds the corpus as
    an absolute path (`StoryConfig.absolute_paths`): GRPO runs from the repository root."""
    recipe = load_yaml(REPO_ROOT / SIGNALS[signal])
    merged = {name: dict(opts) for name, opts in (recipe.get("reward_options") or {} if options is None
                                                  else options).items()}
    given = {"reference_dir": cfg.reference_dir,
             "max_chunks": cfg.reference_max_chunks, "seed": cfg.seed}
    for name in recipe.get("reward_funcs") or []:
        takes = {k: v for k, v in given.items() if k in option_names(get_reward(name).func)}
        if takes:
            merged[name] = {**merged.get(name, {}), **takes}
    return merged


def grpo_inputs(cfg: StoryConfig, signal: str, options: dict | None) -> dict:
    """What the GRPO run is given besides its recipe and output directory: the reward options
    (`reward_options`), the step count, the seed (the story's, as every other step's) and, for a
    learned signal, `--allow_weak_signal`. The run's step key holds exactly these, so changing an
    input that reaches the run retrains it and changing one that does not never does."""
    return {"options": reward_options(cfg, signal, options), "max_steps": cfg.max_steps, "seed": cfg.seed,
            "allow_weak_signal": cfg.allow_weak_signal and signal != "composite"}


def grpo_args(signal: str, out: Path, inputs: dict) -> list[str]:
    """train/grpo.py's arguments for `grpo_inputs`."""
    args = ["--config", SIGNALS[signal], "--output_dir", str(out.resolve()), "--seed", str(inputs["seed"]),
            "--reward_options", json.dumps(inputs["options"])]
    if inputs["max_steps"] is not None:
        args += ["--max_steps", str(inputs["max_steps"])]
    if inputs["allow_weak_signal"]:
        args += ["--allow_weak_signal", "true"]
    return args


def train(cfg: StoryConfig, signal: str, out: Path, options: dict | None, upstream: dict | None = None) -> Path:
    """GRPO with `signal`'s recipe into `out`; `options` replace the recipe's reward options.

    Keyed by the recipe's contents, the upstream signal's content hash (`upstream`) and what the run
    is given (`grpo_inputs`: reward options, step count, seed, allow_weak_signal for a learned
    signal): reused only when all are the ones it was trained with, otherwise trained again from
    scratch (an unfinished run with the same inputs resumes from its checkpoint)."""
    merged = out / "merged"
    inputs = grpo_inputs(cfg, signal, options)
    step = Step(out, f"GRPO ({signal})", {"recipe": content_hash(REPO_ROOT / SIGNALS[signal]), "upstream": upstream,
                                          **inputs})
    if step.done and (merged / "config.json").is_file():
        log.info("GRPO (%s) already done with these inputs: %s", signal, merged)
        return merged
    step.start()
    signal_steps.run(accelerate_command("grpo.py", ["--config_file", "configs/accelerate/cpu.yaml"],
                                        grpo_args(signal, out, inputs)), f"GRPO ({signal})")
    step.finish()
    return merged


def evaluation_prompts(spec: str, limit: int | None, train_tasks: list[Task], heldout: list[Task]) -> list[Task]:
    """The prompts every run is evaluated on; none of them may be a training prompt."""
    tasks = spread_over_aspects(heldout if spec == "heldout" else load_dataset(spec), limit)
    seen = {plain_prompt(t.prompt) for t in train_tasks}
    leaked = [t.id for t in tasks if plain_prompt(t.prompt) in seen]
    if leaked:
        raise UsageError(f"--eval-dataset {spec}: {len(leaked)} prompt(s) are also training prompts, e.g. {leaked[0]}")
    if not tasks:
        raise UsageError(f"--eval-dataset {spec}: no prompts")
    return tasks


def write_prompts(tasks: list[Task], path: Path) -> None:
    """Write the evaluation prompts, refusing to mix them with another set's runs in the same --out."""
    text = "".join(json.dumps({"id": t.id, "aspect": t.aspect, "prompt": t.prompt}) + "\n" for t in tasks)
    if path.is_file() and path.read_text() != text:
        raise UsageError(f"{path.parent} was made with other evaluation prompts; use another --out")
    path.write_text(text)


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_config(StoryConfig, argv, prog="review-lab story", description=__doc__.split("\n\n")[0],
                       example=EXAMPLE)
    return Story(cfg).run()


def signals_main(argv: Sequence[str] | None = None) -> int:
    """`review-lab signals`: `story` with `--signals composite rm principle --out runs/signals` as defaults."""
    cfg = parse_config(SignalsConfig, argv, prog="review-lab signals",
                       description="The story with one GRPO writer per reward signal (composite, reward model, "
                                   "principle judge), compared on the same evaluation prompts.",
                       example=SIGNALS_EXAMPLE)
    return Story(cfg).run()


class Story:
    """One invocation of the flow: its evaluation prompts, its runs, the seconds of each step."""

    def __init__(self, cfg: StoryConfig) -> None:
        self.cfg, self.out = cfg, Path(cfg.out)
        self.timings: dict[str, float] = {}
        self.failed: dict[str, dict[str, str]] = {}
        self.runs = runs_of(cfg.signals)
        self.prompts_file = self.out / "eval_prompts.jsonl"

    def run(self) -> int:
        cfg, out = self.cfg, self.out
        make_dir(out)
        write_manifest(out, kind="story", config=asdict(cfg), seed=cfg.seed)
        tasks = load_dataset("default")
        split = split_tasks(tasks, eval_fraction=0.2, seed=0, dataset="default")
        train_tasks = split.select(tasks, "train")
        prompts = evaluation_prompts(cfg.eval_dataset, cfg.eval_limit, train_tasks, split.select(tasks, "eval"))
        write_prompts(prompts, self.prompts_file)
        log.info("evaluating on %d prompts (%s) over %d aspects", len(prompts), cfg.eval_dataset,
                 len({t.aspect for t in prompts}))
        self.warn_if_underpowered(len(prompts))
        for name in ("base", "review"):
            self.generate(name, BASE)
        options, rm_dir, principles = self.prepare_signals(train_tasks, prompts)
        upstream = {"rm": content_hash(rm_dir / "merged", rm_dir / "metrics.json") if rm_dir else None,
                    "principle": content_hash(principles) if principles else None}
        writers = self.train_writers(options, split, upstream)
        for name, (_, writer) in self.runs.items():
            if writer != "base":
                self.generate(name, writers[writer])
        self.evaluate(rm_dir, principles)
        self.report(prompts, signals=bool(rm_dir or principles))
        raise_failures(self.failed)
        return 0

    def tests(self) -> int:
        """How many tests `compare` makes of the runs against the base single agent: each run on each
        planned metric, but not homogenization, which one story per prompt leaves undefined."""
        cfg = self.cfg
        scored = scored_metrics(cfg.signals, cfg.curation_verdict)
        planned = [m for m in scored if not cfg.metrics or m.key in cfg.metrics]
        return (len(self.runs) - 1) * sum(not m.per_prompt for m in planned)

    def warn_if_underpowered(self, n_prompts: int) -> None:
        """Say before the hours of work, not after, when `compare` could call no gain significant
        (Holm-corrected, `eval.multiplicity`)."""
        tests = self.tests()
        power = attainable(n_prompts, tests, "holm", 0.05)
        if not power["possible"]:
            log.warning("%d evaluation prompts are too few for any significant gain: over its %d tests Holm "
                        "needs p < %.2g, and Wilcoxon's test on %d prompts gives none below %s (--eval-limit %s "
                        "or more, or fewer --metrics, makes claims possible)", n_prompts, tests, power["needed_p"],
                        n_prompts, "n/a" if power["min_p"] is None else f"{power['min_p']:.2g}",
                        power["prompts_needed"])

    def timed(self, step: str, fn: Callable[..., Any], *args: Any) -> Any:
        start = time.perf_counter()
        result = fn(*args)
        self.timings[step] = time.perf_counter() - start
        return result

    def generate(self, name: str, writer: str) -> None:
        """Keyed by the writer's weights, the prompts and the settings: a retrained writer's old
        stories (and their evaluation, inside the run directory) are cleared, never reported."""
        cfg = self.cfg
        run = RunConfig(framework=self.runs[name][0], model=writer, dataset=str(self.prompts_file),
                        seed=cfg.seed, max_new_tokens=cfg.max_new_tokens, out=str(self.out / name),
                        dtype=SAMPLING_DTYPE)
        step = Step(self.out / name, f"generate {name}", {
            "framework": run.framework, "writer": writer, "weights": weights_hash(writer), "seed": cfg.seed,
            "prompts": content_hash(self.prompts_file), "max_new_tokens": cfg.max_new_tokens,
            "dtype": run.dtype, "batch_size": run.batch_size})
        step.start()  # generation resumes with the same inputs
        self.timed(f"generate {name}", lambda: run_collecting(Runner(run, model=run.load_model()), self.failed))
        step.finish()

    def prepare_signals(self, train_tasks: list[Task], prompts: list[Task]) -> tuple[dict, Path | None, Path | None]:
        """(each signal's reward options for its recipe, the reward model's directory, the principles)."""
        cfg, out = self.cfg, self.out
        options: dict[str, dict | None] = {"composite": None}
        rm_dir = principles = None
        if "rm" in cfg.signals:
            cands = self.timed("candidates", signal_steps.candidates, out / "candidates", cfg.candidates,
                               train_tasks, prompts, BASE, cfg.max_new_tokens, cfg.seed, self.failed)
            prefs = self.timed("curation", signal_steps.curate, out / "curation", cands, cfg.reference_dir)
            rm_dir = self.timed("reward model", signal_steps.reward_model, out / "rm", prefs, cfg.rm_config)
            options["rm"] = {"reward_model": {"model_dir": str(rm_dir.resolve()), "batch_size": 16}}
        if "principle" in cfg.signals:
            principles = self.timed("principles", signal_steps.principles, out / "principles", cfg.reference_dir,
                                    cfg.principle_iterations, BASE, cfg.seed)
            detector = principles_record(principles)  # judged as the optimisation measured them
            options["principle"] = {"principle_judge": {"principles": str(principles.resolve()), "timeout": 300,
                                                        "mode": detector["mode"], "orders": detector["orders"]}}
        return options, rm_dir, principles

    def train_writers(self, options: dict[str, dict | None], split: Split, upstream: dict[str, str | None]
                      ) -> dict[str, str]:
        """writer name -> model spec: the base writer, then one GRPO writer per signal."""
        writers = {"base": BASE}
        for signal in self.cfg.signals:
            grpo = self.out / ("grpo" if signal == "composite" else f"grpo_{signal}")
            merged = self.timed(f"grpo {signal}", train, self.cfg, signal, grpo, options[signal],
                                {"signal": upstream.get(signal)})
            if set(load_split(grpo).train) - set(split.train):
                raise UsageError(f"the {signal} GRPO run trained on prompts outside our training split")
            writers[signal] = f"hf:{merged.resolve()}"
        return writers

    def evaluate(self, rm_dir: Path | None, principles: Path | None) -> None:
        """Every run with one judge and one surprisal scorer (the base writer), plus the signals' verdicts.

        Keyed by the stories' and the signals' contents: an evaluation made with other ones is
        cleared and redone (the evaluator itself would refuse to resume it)."""
        cfg, out = self.cfg, self.out
        base_model = load_model(BASE)
        signals = {"reward_model": content_hash(rm_dir / "merged", rm_dir / "metrics.json") if rm_dir else None,
                   "principles": content_hash(principles) if principles else None}
        for name in self.runs:
            ecfg = EvalConfig(stories=[str(out / name / "stories.jsonl")], out=str(out / name / "eval"), judge=BASE,
                              scorer=BASE, reference_dir=cfg.reference_dir,
                              reference_max_chunks=cfg.reference_max_chunks, seed=cfg.seed,
                              principles=str(principles) if principles else None,
                              reward_model=str(rm_dir) if rm_dir else None, curation_verdict=cfg.curation_verdict)
            step = Step(out / name / "eval", f"evaluate {name}", {
                "stories": content_hash(out / name / "stories.jsonl"), "signals": signals, "judge": BASE,
                "scorer": BASE, "reference_dir": cfg.reference_dir, "seed": cfg.seed,
                "reference_max_chunks": cfg.reference_max_chunks, "curation_verdict": cfg.curation_verdict})
            step.start()
            self.timed(f"evaluate {name}", lambda: Evaluator(ecfg, models={BASE: base_model}).run())
            step.finish()

    def labels(self, evaluated: set[str]) -> dict[str, str]:
        """Each run's name in the tables, marked where its writer was trained on a weak signal
        (`--allow-weak-signal`: the evidence its GRPO manifest records, judged by today's
        `rewards.signal_check.proven`, so a rule made stricter marks earlier runs too) or is scored
        by its own training signal."""
        out = {}
        for name, (_, writer) in self.runs.items():
            grpo = self.out / ("grpo" if writer == "composite" else f"grpo_{writer}") / "manifest.json"
            manifest = json.loads(grpo.read_text()) if grpo.is_file() else {}
            weak = manifest.get("weak_signal") or any(not proven(e) for e in (manifest.get("signals") or {}).values())
            tags = (["weak signal"] if weak else []) + [f"self-graded by {signal}" for signal, keys
                                                        in SELF_GRADED.get(writer, {}).items()
                                                        if set(keys) & evaluated]
            out[name] = f"{name} [{'; '.join(tags)}]" if tags else name
        return out

    def length_gap(self) -> dict:
        """The learned signals' length gap (`train/length_gap.py`), in the base writer's tokens."""
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(BASE))
        learned = {s: (self.out / f"grpo_{s}", REPO_ROOT / SIGNALS[s], self.out / f"tuned_{s}" / "stories.jsonl")
                   for s in self.cfg.signals if s != "composite"}
        return length_gap(self.out, learned, lambda t: len(tokenizer(t, add_special_tokens=False)["input_ids"]))

    def report(self, prompts: list[Task], signals: bool) -> None:
        """The comparisons, the viewer and story.json (whose seconds add up over resumed invocations)."""
        cfg, out, runs = self.cfg, self.out, self.runs
        scored = {name: load_run(name, out / name) for name in runs}
        labels = self.labels({k for r in scored.values() for row in r.scores for k, v in row.items() if v is not None})
        loaded = {name: load_run(labels[name], out / name) for name in runs}
        planned = cfg.metrics or None
        write_outputs(compare(list(loaded.values()), metrics=planned, seed=cfg.seed), out / "compare")
        if "tuned_review" in loaded:  # homogenization, undefined for one story per prompt, compares here
            write_outputs(compare([loaded["review"], loaded["tuned_review"]], metrics=planned, seed=cfg.seed),
                          out / "compare_in_review")
        write_view([f"{labels[name]}={out / name}" for name in runs], out / "view.html", compare_dir=out / "compare")
        excellence = {labels[name]: agreement(loaded[name].scores) for name in runs} if signals else None
        rows = [{**row, "words": words.get(row.get("story_id"))} for run in loaded.values()
                for words in [{t["story_id"]: len(t.get("text", "").split()) for t in run.stories or []}]
                for row in run.scores]
        confounds = confound_table(rows) if signals else None
        gap = self.length_gap() if signals else None
        path = out / "story.json"
        story = {"config": asdict(cfg), "eval_prompts": [t.id for t in prompts], "seconds": step_seconds(out),
                 "excellence": excellence, "confounds": confounds, "length_gap": gap, "labels": labels}
        path.write_text(json.dumps(story, indent=2) + "\n")
        if confounds:
            log.info("signals' correlation with length and novelty over %d stories:\n%s", len(rows),
                     render_confounds(confounds))
        if gap:
            log.info("lengths each learned signal was fitted on, graded in GRPO and evaluated on (tokens):\n%s",
                     render_length_gap(gap))
        log.info("report: %s (%.0f s this invocation)", out / "compare" / "comparison.md", sum(self.timings.values()))
