"""`review-lab`: the one command, a subcommand per job (`review-lab --help` lists them).

It lives in `train/` because `train` is the top layer: the only package allowed to reach every
other one (generate <- eval <- rewards <- train), so the dispatcher adds no arrow pointing up.
Each job is a `main(argv)` in the package that does the work; the registry names it by module
path and imports it only when that job runs, so `review-lab --help` starts at once and one job's
heavy imports (torch, trl) never slow another's. Every job runs under `run_cli`: bad input is one
`error:` line and exit 2, a job that finished with failed items exit 1.

    review-lab --help
    review-lab generate --framework review --limit 4 --out runs/review
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence

from generate.common.cli import run_cli
from generate.common.errors import UsageError

# job -> ("module" or "module:function", one line for the overview); the function defaults to `main`.
COMMANDS: dict[str, tuple[str, str]] = {
    "generate": ("generate.cli", "generate stories with one framework (stories.jsonl)"),
    "eval": ("eval.cli", "score stories: LLM judge, surprisal, reference-corpus novelty (scores.jsonl)"),
    "view": ("eval.view.cli", "write the run viewer, one self-contained HTML page"),
    "compare": ("eval.compare.cli", "compare evaluated runs with a baseline: paired gains, p-values, cost"),
    "benchmark": ("eval.benchmark.run", "the main job: every framework, evaluated, one table with cost"),
    "sweep": ("eval.sweep", "vary one setting at a time (rounds, agents, top_p, temperature) and plot"),
    "story": ("train.story", "baseline -> GRPO -> tuned writer alone and in Review -> comparison"),
    "signals": ("train.story:signals_main", "the story with one GRPO writer per reward signal"),
    "curate": ("rewards.curate", "curate preference pairs from candidate stories with five agents"),
    "principles": ("rewards.principles.cli", "weak labels and the adversarial principle optimisation"),
    "reward-model": ("train.launch:reward_model_main", "train the Bradley-Terry reward model (accelerate)"),
    "train": ("train.launch:grpo_main", "GRPO on creativity rewards (accelerate launch train/grpo.py)"),
    "heldout": ("train.heldout", "held-out reward before vs after GRPO"),
    "plot-rewards": ("train.plot_rewards", "plot a GRPO run's reward curves"),
    "rate": ("eval.rating.cli", "blind human rating of stories in the browser; export for align"),
    "align": ("eval.alignment", "judge-human alignment per aspect (ICC, Bland-Altman, Pearson r)"),
    "corpus": ("eval.corpus", "fetch the classic science-fiction reference corpus into the cache"),
    "device-check": ("eval.device_check", "re-score a CPU-evaluated run on a GPU and show how far scores move"),
}
EXAMPLE = "review-lab benchmark --limit 4 --max-new-tokens 200 --out runs/benchmark"


def overview() -> str:
    """The text of `review-lab --help`: every job with its line."""
    width = max(map(len, COMMANDS))
    lines = ["usage: review-lab <command> [options]   (review-lab <command> --help for its options)", "",
             "Creative writing with small language models: LLM Review and its baselines, paper-faithful",
             "evaluation, GRPO on creativity rewards.", "", "commands:"]
    lines += [f"  {name.ljust(width)}  {line}" for name, (_, line) in COMMANDS.items()]
    lines += ["", "example:", f"  {EXAMPLE}"]
    return "\n".join(lines)


def resolve(command: str) -> Callable[[Sequence[str] | None], int | None]:
    """The `main` of a job, imported now."""
    if command not in COMMANDS:
        raise UsageError(f"unknown command {command!r}; choose from {', '.join(COMMANDS)} (see review-lab --help)")
    module, _, function = COMMANDS[command][0].partition(":")
    return getattr(importlib.import_module(module), function or "main")


def dispatch(argv: Sequence[str] | None = None) -> int | None:
    """Run the job named by the first argument with the rest of the command line."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(overview())
        return 0
    return resolve(argv[0])(argv[1:])


def main(argv: Sequence[str] | None = None) -> None:
    """The console script `review-lab` (pyproject `[project.scripts]`)."""
    run_cli(dispatch, argv)


if __name__ == "__main__":
    main()
