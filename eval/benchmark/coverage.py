"""Which prompts a table of several runs covers, so that its rows compare like with like.

The benchmark's frameworks and a sweep's points are compared over one set of prompts. Otherwise a
row's means and cost would differ from another's by which prompts its run happens to hold, and
nothing in the table would say so: a prompt that failed for one framework (for good, when a
request was over the context), a run directory resumed with another `--limit` (it keeps the
stories of the earlier, larger one), a story whose judge calls are left for the next run.

`RunRecords` reads one run directory (its stories and, where evaluated, its scores and catalog);
`common_prompts` is the set every run finished among the prompts the invocation asked for; every
cell of the table (judge and metric summaries, cost, cut-off share) is computed over that set,
and `left_out` says per run what it holds or lacks outside it, which the table prints beside it.

Each run resumes on its own and checks only itself against its own manifest, and only when it has
work left, so two rows of one table can still have been evaluated in other invocations with another
reference corpus, judge weights or metrics version (a corpus fetched between them, code updated).
`unlike` finds what `review-lab compare` would refuse (`MISMATCH_FIELDS`), and the table says it
at its top.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval.compare import MISMATCH_FIELDS, check_comparable, load_run
from eval.metrics.catalog import Catalog
from eval.report import read_summary, summarize_frameworks
from generate.common.jsonl import read_jsonl

# Why a run's prompt is outside the table, in the order the table lists them.
REASONS = ("not generated", "not scored", "unfinished elsewhere", "not asked by this invocation")


@dataclass
class RunRecords:
    """One run directory's final stories and, where it was evaluated (`eval/summary.json`), its
    scores and metric catalog (`scores` None: no evaluation)."""

    stories: list[dict]
    scores: list[dict] | None
    catalog: Catalog | None

    @classmethod
    def read(cls, run: Path) -> RunRecords:
        stories = list(read_jsonl(run / "stories.jsonl"))
        summary = run / "eval" / "summary.json"
        if not summary.is_file():
            return cls(stories, None, None)
        catalog, _ = read_summary(summary)
        return cls(stories, list(read_jsonl(run / "eval" / "scores.jsonl")), catalog)

    def generated(self) -> set[str]:
        return {s["prompt_id"] for s in self.stories}

    def finished(self) -> set[str]:
        """Prompts whose stories are all written and, where the run was evaluated, all scored."""
        if self.scores is None:
            return self.generated()
        scored = {r["story_id"] for r in self.scores}
        unscored = {s["prompt_id"] for s in self.stories if s["story_id"] not in scored}
        return self.generated() - unscored

    def summary(self, framework: str, prompts: Collection[str]) -> dict[str, dict] | None:
        """The evaluation's summary cells of `framework` over `prompts` only (None: not evaluated);
        the same computation as the evaluation's own `summary.json`, which covers every story."""
        if self.scores is None or self.catalog is None:
            return None
        rows = [r for r in self.scores if r["prompt_id"] in prompts]
        return summarize_frameworks(rows, self.catalog).get(framework)


def common_prompts(runs: Mapping[str, RunRecords], asked: Collection[str] | None = None) -> set[str]:
    """The prompts every run finished, among those asked (None: any)."""
    sets = [run.finished() for run in runs.values()]
    common = set.intersection(*sets) if sets else set()
    return common if asked is None else common & set(asked)


def left_out(runs: Mapping[str, RunRecords], common: set[str],
             asked: Collection[str] | None = None) -> dict[str, dict[str, list[str]]]:
    """Per run, the prompts outside the table by reason (`REASONS`); runs with none are omitted."""
    out = {}
    for name, run in runs.items():
        generated, finished = run.generated(), run.finished()
        wanted = set(asked) if asked is not None else generated
        why = {"not generated": wanted - generated, "not scored": (wanted & generated) - finished,
               "unfinished elsewhere": (wanted & finished) - common,
               "not asked by this invocation": generated - wanted}
        why = {reason: sorted(ids) for reason, ids in why.items() if ids}
        if why:
            out[name] = why
    return out


def coverage_lines(common: set[str], left: dict[str, dict[str, list[str]]], noun: str = "run") -> list[str]:
    """Markdown lines saying which prompts the table covers and what each run has outside them."""
    lines = [f"Every row covers the same {len(common)} prompt(s): those of this invocation that every {noun} "
             "generated and, where evaluated, scored."]
    if left:
        lines += ["", f"Left out of the table (each {noun}'s own files keep them):", ""]
        for name, why in left.items():
            parts = [f"{len(why[r])} {r} ({', '.join(why[r][:5])}{', ...' if len(why[r]) > 5 else ''})"
                     for r in REASONS if r in why]
            lines.append(f"- {name}: " + "; ".join(parts))
    return [*lines, ""]


def unlike(runs: Mapping[str, Path]) -> dict[str, dict[str, Any]]:
    """{field: {run: value}} for each of `MISMATCH_FIELDS` on which the evaluated runs among `runs`
    (name -> directory) differ, or which one recorded and another did not: what their rows do not
    compare on."""
    evaluated = [load_run(name, path) for name, path in runs.items() if (path / "eval" / "summary.json").is_file()
                 and next(read_jsonl(path / "eval" / "scores.jsonl"), None) is not None]
    found = check_comparable(evaluated, allow=MISMATCH_FIELDS) if len(evaluated) > 1 else {}
    # A field no run recorded (runs made before it was) tells nothing apart: not a difference.
    return {key: values for key, values in found.items() if any(v not in (None, "unknown") for v in values.values())}


def unlike_lines(mismatches: dict[str, dict[str, Any]], noun: str = "run") -> list[str]:
    """Markdown lines, for the top of a table, naming what its rows were not made alike with."""
    lines = []
    for key, values in mismatches.items():
        shown = "; ".join(f"`{name}`: {json.dumps(v, sort_keys=True)[:160]}" for name, v in values.items())
        lines.append(f"**Not like for like: the {noun}s differ in {key}** (`review-lab compare` refuses such "
                     f"runs): {shown}.")
    return [*lines, ""] if lines else []
