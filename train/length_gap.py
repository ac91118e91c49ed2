"""How long were the texts a learned signal was fitted on, the completions it then graded in
GRPO, and the stories the tuned writer is evaluated on?

The second paper trains and applies its reward model and principle judge on the same kind of
text. On this CPU the signal recipes train the writer on short completions
(`max_completion_length` 40 tokens) while the signals are fitted on full stories (the
candidates, ~160 tokens; the weak labels, passages of ~80 words), so each signal grades text
shorter than any it was fitted on. Matching them would cost four times the GRPO time here; the
story flow states the gap instead, in `story.json` and in its log, and `docs/signals.md` shows it.

All lengths are in the writer's tokens (its tokenizer), medians unless said otherwise.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Iterable
from pathlib import Path

import yaml

from generate.common.jsonl import read_jsonl

# Where each signal's training texts are, inside the story's --out, and how to read them.
SIGNAL_TEXTS: dict[str, tuple[str, Callable[[dict], Iterable[str]]]] = {
    "rm": ("curation/preferences.jsonl",
           lambda row: (row["chosen"][-1]["content"], row["rejected"][-1]["content"])),
    "principle": ("principles/weak/weak.jsonl", lambda row: (row["response"],)),
}


def median_tokens(texts: Iterable[str], count: Callable[[str], int]) -> dict | None:
    """{"median", "n"} of the texts' token counts, or None when there are none."""
    counts = [count(t) for t in texts]
    return {"median": statistics.median(counts), "n": len(counts)} if counts else None


def grpo_completions(grpo_dir: Path, recipe: Path) -> dict:
    """The recipe's token cap and the mean completion length trl logged over training (tokens)."""
    cap = yaml.safe_load(recipe.read_text()).get("max_completion_length")
    state = grpo_dir / "trainer_state.json"
    means = []
    if state.is_file():
        means = [e["completions/mean_length"] for e in json.loads(state.read_text())["log_history"]
                 if "completions/mean_length" in e]
    return {"max": cap, "mean": round(statistics.fmean(means), 1) if means else None}


def length_gap(out: Path, signals: dict[str, tuple[Path, Path, Path]], count: Callable[[str], int]) -> dict:
    """{signal: {"fitted_on", "grpo", "evaluated", "ratio"}} for the learned signals.

    `signals` maps a signal to (its GRPO directory, its recipe, its tuned writer's stories.jsonl);
    `count` gives a text's length in the writer's tokens. `ratio` is the median length the signal
    was fitted on over the mean GRPO completion: how far outside its data the signal graded."""
    table = {}
    for signal, (grpo_dir, recipe, stories) in signals.items():
        if signal not in SIGNAL_TEXTS:
            continue
        path, texts = SIGNAL_TEXTS[signal]
        fitted = (median_tokens((t for row in read_jsonl(out / path) for t in texts(row)), count)
                  if (out / path).is_file() else None)
        grpo = grpo_completions(grpo_dir, recipe)
        evaluated = (median_tokens((r["text"] for r in read_jsonl(stories) if r.get("text")), count)
                     if stories.is_file() else None)
        ratio = round(fitted["median"] / grpo["mean"], 1) if fitted and grpo["mean"] else None
        table[signal] = {"fitted_on": fitted, "grpo": grpo, "evaluated": evaluated, "ratio": ratio}
    return table


def render_length_gap(table: dict) -> str:
    """The gap as Markdown: one row per learned signal."""
    med = lambda m: "—" if m is None else f"{m['median']:g} (n {m['n']})"  # noqa: E731
    lines = ["| signal | fitted on (median tokens) | GRPO completions (mean / cap) | tuned writer's stories "
             "(median) | fitted / GRPO |", "|---|---|---|---|---|"]
    for signal, row in table.items():
        grpo = row["grpo"]
        lines.append(f"| {signal} | {med(row['fitted_on'])} | {grpo['mean'] if grpo['mean'] is not None else '—'} / "
                     f"{grpo['max']} | {med(row['evaluated'])} | "
                     f"{'—' if row['ratio'] is None else str(row['ratio']) + 'x'} |")
    return "\n".join(lines)
