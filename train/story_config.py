"""The story's settings: which reward signals exist and their recipes, the options of `review-lab
story` and `review-lab signals`, the runs a story makes, and the metrics its evaluation scores
(checked against `--metrics` before any work). The flow itself is `train/story.py`.

Every path option is made absolute once, when the config is built (`StoryConfig.absolute_paths`):
the story's steps run commands from the repository root (`train/signals.py`), its evaluation from
where it was started, and a step's key records the paths it was given, so each must see the same
file whatever the directory it runs from."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from eval.corpus.resolve import ENV as REFERENCE_ENV
from eval.corpus.resolve import reference_dir_option
from eval.metrics.catalog import MetricSpec
from eval.rubric import load_rubric
from eval.signals import CURATION_METRICS, PRINCIPLE_METRICS, RM_METRICS
from generate.common.config import load_yaml
from generate.common.errors import UsageError
from generate.common.paths import REPO_ROOT
from generate.common.ranges import AT_LEAST_1, NON_NEGATIVE, checked, in_range
from generate.datasets import NAMED, check_dataset

BASE = "smollm2-135m-instruct"
SIGNALS = {"composite": "configs/grpo/smollm2_cpu.yaml", "rm": "configs/grpo/smollm2_cpu_rm.yaml",
           "principle": "configs/grpo/smollm2_cpu_principle.yaml"}
# The metrics that grade a writer with the signal it was trained on.
SELF_GRADED = {"rm": {"RM": ("rm_good", "rm_score")}, "principle": {"principles": ("principle_good", "principle_p")}}
EXAMPLE = "review-lab story --out runs/story --eval-dataset heldout --max-steps 4"
SIGNALS_EXAMPLE = "review-lab signals --eval-dataset scifi100 --eval-limit 8"


def scored_metrics(signals: Sequence[str], curation_verdict: bool) -> list[MetricSpec]:
    """What the story's evaluation scores, in `compare`'s default order: the judge average, the
    rubric's aspects, the rule metrics, then the verdicts of the signals the story prepares (in the
    order `eval.signals` adds them)."""
    verdicts = ((PRINCIPLE_METRICS if "principle" in signals else ()) + (RM_METRICS if "rm" in signals else ())
                + (CURATION_METRICS if curation_verdict else ()))
    return load_rubric().catalog().extended(verdicts).with_judge_average()


def absolute(path: str | Path) -> str:
    """`path` made absolute against the directory the command was started from."""
    return str(Path(path).resolve())


def check_eval_dataset(spec: str) -> None:
    """`heldout` (the training run's own held-out split), else a dataset that loads."""
    if spec != "heldout":
        check_dataset(spec)


@dataclass
class StoryConfig:
    out: str = "runs/story"
    signals: list[str] = field(default_factory=lambda: ["composite"],
                               metadata={"help": f"reward signals to train a writer with: {', '.join(SIGNALS)}"})
    max_steps: int | None = field(default=None, metadata=in_range(AT_LEAST_1, help="override the recipes' GRPO steps"))
    max_new_tokens: int = field(default=160, metadata=in_range(AT_LEAST_1))
    eval_dataset: str = field(default="heldout", metadata=checked(
        check_eval_dataset,
        help="evaluation prompts: 'heldout' (the held-out split) or a dataset disjoint from training"))
    eval_limit: int | None = field(default=None, metadata=in_range(
        AT_LEAST_1, help="at most N evaluation prompts, across aspects"))
    metrics: list[str] = field(default_factory=list, metadata={
        "help": "the planned claims: the only metrics the comparisons test (default: every scored metric; "
                "fewer tests let fewer prompts carry a claim)"})
    reference_dir: str | None = reference_dir_option()
    reference_max_chunks: int = field(default=2000, metadata=in_range(AT_LEAST_1))
    curation_verdict: bool = field(default=False, metadata={
        "help": "score every run with Signal-1, the curation agents' verdict (several calls a story)"})
    candidates: list[str] = field(default_factory=list, metadata={
        "help": "stories.jsonl runs to curate (default: the base writer on training prompts)"})
    rm_config: str = "configs/rm/smollm2_cpu.yaml"
    principle_iterations: int = field(default=2, metadata=in_range(NON_NEGATIVE))
    seed: int = 0
    allow_weak_signal: bool = field(default=False, metadata={
        "help": "train writers on signals whose held-out interval includes chance (GRPO's --allow_weak_signal); "
                "every table marks them"})

    def __post_init__(self) -> None:
        unknown = sorted(set(self.signals) - set(SIGNALS))
        if unknown or not self.signals:
            raise UsageError(f"unknown signal(s) {', '.join(unknown) or '(none)'}; choose from {', '.join(SIGNALS)}")
        # Checked here, before the hours of work, not by `compare` at the end.
        known = [m.key for m in scored_metrics(self.signals, self.curation_verdict)]
        unplanned = [m for m in self.metrics if m not in known]
        if unplanned:
            raise UsageError(f"--metrics: this story scores no {', '.join(unplanned)}; choose from {', '.join(known)}")
        self.absolute_paths()
        self.check_signal_inputs()

    def check_signal_inputs(self) -> None:
        """Read the files the reward model's signal reads hours later (after the baselines are
        written) now: a missing `--candidates` run or an `--rm-config` that is not a recipe stops
        the story before any work, not after it."""
        if "rm" not in self.signals:
            return
        load_yaml(self.rm_config)
        for path in self.candidates:
            if not Path(path).is_file():
                raise UsageError(f"--candidates {path}: no such file (a run's stories.jsonl)")

    def absolute_paths(self) -> None:
        """Make every path option absolute, so every step, step key and subprocess sees one path.

        A corpus given by `$SCIFI_REFERENCE_DIR` becomes the `reference_dir` (the commands the steps
        run would read a relative one from the repository root); an empty one is not given. A
        relative `--rm-config` is the user's file where it exists, else the repository's (where the
        default recipe lives). An `--eval-dataset` naming a file is made absolute too, where the file
        exists: a missing one is left as given, so its refusal quotes what the user typed."""
        given = self.reference_dir or os.environ.get(REFERENCE_ENV) or None
        self.reference_dir = absolute(given) if given else None
        self.out = absolute(self.out)
        self.candidates = [absolute(p) for p in self.candidates]
        rm_config = Path(self.rm_config)
        self.rm_config = absolute(self.rm_config if rm_config.exists() or rm_config.is_absolute()
                                  else REPO_ROOT / rm_config)
        if self.eval_dataset not in ("heldout", "scifi100", *NAMED) and Path(self.eval_dataset).exists():
            self.eval_dataset = absolute(self.eval_dataset)


@dataclass
class SignalsConfig(StoryConfig):
    """`review-lab signals`: the story with one writer per signal, in its own directory."""

    out: str = "runs/signals"
    signals: list[str] = field(default_factory=lambda: list(SIGNALS),
                               metadata={"help": f"reward signals to train a writer with: {', '.join(SIGNALS)}"})
    # Signal-1 grades every writer from outside: no writer here is trained on it.
    curation_verdict: bool = field(default=True, metadata={
        "help": "score every run with Signal-1, the curation agents' verdict (several calls a story)"})


def runs_of(signals: list[str]) -> dict[str, tuple[str, str]]:
    """run name -> (framework, writer name): the baselines, then each signal's tuned writer."""
    runs = {"base": ("single", "base"), "review": ("review", "base")}
    for signal in signals:
        suffix = "" if signal == "composite" else f"_{signal}"
        runs[f"tuned{suffix}"] = ("single", signal)
        if signal == "composite":
            runs["tuned_review"] = ("review", signal)
    return runs
