"""Everything the viewer shows, gathered from run directories into one JSON-ready dict.

The page gets the data once and lays it out in the browser, so this module only reads files and
joins them: stories with their scores (by story id and writer), prompts across runs (by the hash
of the prompt text, as `review-lab compare` pairs them), failed prompts, summaries, plots and an optional
comparison. Nothing here formats a cell; numbers go out as numbers.
"""

from __future__ import annotations

import base64
import csv
import io
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from eval.alignment import parse_score
from eval.compare import story_value
from eval.metrics.catalog import EXTRA_METRICS, JUDGE_AVERAGE, RULE, Catalog
from eval.report import summarize_frameworks
from eval.rubric import load_rubric
from generate.common.errors import UsageError
from generate.common.inputs import read_json, read_text
from generate.common.jsonl import read_jsonl
from generate.common.manifest import sha256_text

log = logging.getLogger(__name__)

EVAL_PLOTS = ("judge_scores.png", "rule_metrics.png")
COMPARE_PLOTS = ("gains.png", "cost_vs_gain.png")
# The story fields the page shows (decoding settings and ids are in the run's manifest).
STORY_FIELDS = ("agent", "text", "drafts", "feedback", "usage", "seconds", "model")


def expand_runs(specs: Sequence[str]) -> list[tuple[str, Path]]:
    """(label, dir) per run: `DIR` or `NAME=DIR`; a dir without stories.jsonl whose subdirs have
    one (a benchmark's output) stands for those subdirs, in the benchmark's framework order."""
    runs: list[tuple[str, Path]] = []
    for spec in map(str, specs):
        name, _, path = spec.partition("=") if "=" in spec else ("", "", spec)
        path = Path(path)
        if _is_run(path):
            runs.append((name or path.name, path))
            continue
        subdirs = sorted((p for p in path.glob("*/") if _is_run(p)), key=lambda p: _framework_rank(p.name))
        if not subdirs:
            raise UsageError(f"{path}: no run in it (stories.jsonl or failed.jsonl) nor in its subdirectories")
        runs += [(p.name, p) for p in subdirs]
    labels = [label for label, _ in runs]
    if len(set(labels)) < len(labels):  # e.g. two benchmarks: qualify with the parent's name
        runs = [(f"{path.parent.name}/{label}", path) for label, path in runs]
    if len({label for label, _ in runs}) < len(runs):
        raise UsageError("two runs have the same name; name them with NAME=DIR")
    return runs


def _is_run(path: Path) -> bool:
    # A run whose every prompt failed has no stories.jsonl, only failed.jsonl: still worth showing.
    return (path / "stories.jsonl").is_file() or (path / "failed.jsonl").is_file()


def _framework_rank(name: str) -> tuple[int, str]:
    order = ["single", "teacher", "debate", "discussion", "review"]
    return (order.index(name) if name in order else len(order), name)


def _json(path: Path) -> dict | None:
    return read_json(path) if path.is_file() else None


def _last_by(records, key) -> list[dict]:
    """Append-only files: a record written again replaces the earlier one."""
    return list({key(r): r for r in records}.values())


def _score_key(record: dict) -> tuple:
    # story_id is framework/prompt/agent: two runs of one framework (base and tuned writer) in one
    # evaluation differ only by writer model and, across datasets, by prompt text.
    return record.get("story_id"), record.get("model"), record.get("prompt_sha256")


def _png(path: Path) -> dict:
    return {"title": f"{path.parent.name}/{path.name}",
            "src": "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode("ascii")}


def _catalog(eval_dirs: list[Path]) -> Catalog:
    """The catalog an evaluation recorded (summary.json), else the current rubric's."""
    for d in eval_dirs:
        summary = _json(d / "summary.json")
        if summary and summary.get("metrics"):
            return Catalog.from_json(summary["metrics"])
    return load_rubric().catalog()


def _judge_mode(eval_dir: Path) -> str | None:
    manifest = _json(eval_dir / "manifest.json") or {}
    return ((manifest.get("provenance") or {}).get("judge") or {}).get("mode")


def read_human(path: str | Path) -> dict[tuple, dict[str, dict]]:
    """Human consensus per story from `review-lab rate export`'s ratings.csv:
    {(run, story id, writer, prompt hash): {aspect: {"mean", "n"}}}, and the same under (story id,
    writer, prompt hash) where only one run has that story (two runs of one framework and writer,
    e.g. two decoding settings, share story ids). A hand-made alignment CSV (story_id, aspect,
    human, judge) matches on the story id alone: (story id, None, None).

    Raises:
        UsageError: a missing file or column, a human score that is not a finite number, an n_raters
            that is not a whole number, or a story rated twice for one aspect.
    """
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"--human {path}: no such file (review-lab rate export writes DIR/ratings.csv)")
    out: dict[tuple, dict[str, dict]] = {}
    runs: dict[tuple, set[str]] = {}
    with io.StringIO(read_text(path, "--human"), newline="") as fh:
        reader = csv.DictReader(fh)
        if not {"story_id", "aspect", "human"} <= set(reader.fieldnames or ()):
            raise UsageError(f"--human {path}: needs the columns story_id, aspect, human")
        for row in reader:
            where = f"--human {path}:{reader.line_num}"
            value = {"mean": parse_score(row["human"], f"--human {path}", reader.line_num, "human"),
                     "n": _raters(row.get("n_raters"), where)}
            story = ((row["source_story_id"], row.get("model") or None, row.get("prompt_sha256") or None)
                     if row.get("source_story_id") else (row["story_id"], None, None))
            key = (row.get("run") or None, *story) if row.get("source_story_id") else story
            if row["aspect"] in out.get(key, {}):
                raise UsageError(f"{where}: story {story[0]!r} rated twice for aspect {row['aspect']!r}")
            out.setdefault(key, {})[row["aspect"]] = value
            if key != story:
                runs.setdefault(story, set()).add(key[0])
                out.setdefault(story, {})[row["aspect"]] = value
    for story, labels in runs.items():
        if len(labels) > 1:  # which run's? Only the run-qualified keys can say
            del out[story]
    return out


def _raters(value: str | None, where: str) -> int | None:
    if not value:
        return None
    if not value.isdigit():
        raise UsageError(f"{where}: n_raters {value!r} is not a whole number")
    return int(value) or None


def load_view_data(runs: Sequence[str], eval_dir: str | None = None, compare_dir: str | None = None,
                   title: str | None = None, human: str | None = None) -> dict[str, Any]:
    """The page's data: runs, prompts, stories with scores, failures, summaries, plots, comparison.

    Args:
        runs: run directories (`DIR` or `NAME=DIR`; a directory of runs stands for each of them).
        eval_dir: an evaluation that scored these runs' stories; default: each run's own `eval/`.
        compare_dir: a `review-lab compare` output directory (comparison.json and its plots).
        title: the page title.
        human: a ratings CSV of human consensus scores, shown beside the judge's (`read_human`).
    """
    pairs = expand_runs(runs)
    shared = Path(eval_dir) if eval_dir else None
    if shared and not (shared / "scores.jsonl").is_file():
        raise UsageError(f"--eval {shared}: no scores.jsonl")
    eval_dirs = [shared] if shared else [p / "eval" for _, p in pairs if (p / "eval" / "scores.jsonl").is_file()]
    catalog = _catalog(eval_dirs)
    metrics = [*catalog.with_judge_average(), *EXTRA_METRICS]
    gathered = _Gathered(read_human(human) if human else {})
    for index, (label, path) in enumerate(pairs):
        gathered.add_run(index, label, path, shared, catalog, metrics)
    ordered = gathered.ordered_prompts()
    return {
        "title": title or "Run viewer: " + ", ".join(label for label, _ in pairs),
        # overview: a column per run in the prompt table; summary: a column of the run summary.
        "metrics": [{"key": m.key, "label": m.label, "group": m.group, "higher_is_better": m.higher_is_better,
                     "digits": m.digits, "summary": m in catalog.metrics,
                     "overview": m.key == JUDGE_AVERAGE or (m.group == RULE and m in catalog.metrics)}
                    for m in metrics],
        "aspects": catalog.aspects,
        "runs": gathered.runs,
        "prompts": [{"sha": sha, **p} for sha, p in ordered],
        "stories": gathered.stories,
        "failures": gathered.failures,
        "plots": [_png(d / name) for d in eval_dirs for name in EVAL_PLOTS if (d / name).is_file()],
        "comparison": _comparison(compare_dir),
    }


def _comparison(compare_dir: str | None) -> dict | None:
    """A comparison's JSON with its plots inlined, when the page shows one."""
    if not compare_dir:
        return None
    cmp = _json(Path(compare_dir) / "comparison.json")
    if cmp is None:
        raise UsageError(f"--compare {compare_dir}: no comparison.json")
    return {**cmp, "plots": [_png(Path(compare_dir) / n) for n in COMPARE_PLOTS if (Path(compare_dir) / n).is_file()]}


class _Gathered:
    """The runs' stories, failures and summaries as they are read, joined on prompt identity."""

    def __init__(self, human: dict[tuple, dict[str, dict]]) -> None:
        self.human = human
        self.prompts: dict[str, dict] = {}  # prompt_sha256 -> {id, aspect, text}
        self.runs: list[dict] = []
        self.stories: list[dict] = []
        self.failures: list[dict] = []
        self._shared_scores: dict | None = None

    def add_run(self, index: int, label: str, path: Path, shared: Path | None, catalog: Catalog,
                metrics: list) -> None:
        run_stories = _last_by(read_jsonl(path / "stories.jsonl"), lambda s: s.get("story_id"))
        scores = self._scores(shared or path / "eval", shared is not None)
        matched = [self._add_story(index, label, s, scores, catalog, metrics) for s in run_stories]
        manifest = _json(path / "manifest.json") or {}
        self._add_failures(index, path, manifest, {s["prompt_id"] for s in run_stories})
        scored = [r for r in matched if r]
        frameworks = sorted({s.get("framework") for s in run_stories if s.get("framework")})
        summary = summarize_frameworks(scored, catalog) if scored else {}
        self.runs.append({
            "label": label, "dir": str(path), "framework": "/".join(frameworks) or "?",
            "model": (manifest.get("config") or {}).get("model") or next((s.get("model") for s in run_stories), None),
            "n_stories": len(run_stories), "n_scored": len(scored),
            "judge_mode": _judge_mode(shared or path / "eval"),
            "summary": next(iter(summary.values()), {}),
        })
        log.info("run %s: %d stories (%d scored) from %s", label, len(run_stories), len(scored), path)

    def _scores(self, eval_dir: Path, shared: bool) -> dict:
        """An evaluation's scores by (story id, writer, prompt hash); a shared one is read once."""
        if shared and self._shared_scores is not None:
            return self._shared_scores
        scores = {_score_key(r): r for r in _last_by(read_jsonl(eval_dir / "scores.jsonl"), _score_key)}
        if shared:
            self._shared_scores = scores
        return scores

    def _add_story(self, index: int, label: str, s: dict, scores: dict, catalog: Catalog,
                   metrics: list) -> dict:
        """Record one story with its scores (and its prompt); return its score record ({} if none)."""
        sha = s.get("prompt_sha256") or sha256_text(s["prompt"])
        self.prompts.setdefault(sha, {"id": s["prompt_id"], "aspect": s.get("aspect") or "", "text": s["prompt"]})
        score = scores.get((s.get("story_id"), s.get("model"), sha)) or {}
        self.stories.append({"run": index, "prompt": sha, **{k: s.get(k) for k in STORY_FIELDS},
                             "scores": {m.key: story_value(score, m.key, catalog.aspects) for m in metrics},
                             "missing": score.get("missing") or ({} if score else {"*": "not evaluated"}),
                             "judge": score.get("judge"), "notes": score.get("notes"),
                             "judge_replies": score.get("judge_replies"),
                             "human": self._human(label, s.get("story_id"), s.get("model"), sha)})
        return score

    def _human(self, label: str, story_id: str | None, model: str | None, sha: str) -> dict | None:
        """A story's human consensus: its run's, else the one run's that has it, else by id alone."""
        return (self.human.get((label, story_id, model, sha)) or self.human.get((story_id, model, sha))
                or self.human.get((story_id, None, None)))

    def _add_failures(self, index: int, path: Path, manifest: dict, done: set[str]) -> None:
        for f in read_jsonl(path / "failed.jsonl"):  # ids are unique within a run, not across datasets
            self.failures.append({"run": index, "prompt": (manifest.get("prompts") or {}).get(f.get("prompt_id")),
                                  **{k: f.get(k) for k in ("prompt_id", "attempt", "agent", "role", "to", "phase",
                                                           "reasks", "reason", "time")},
                                  "retried_ok": f.get("prompt_id") in done})

    def ordered_prompts(self) -> list[tuple[str, dict]]:
        """The prompts by aspect and id; stories and failures now point at their index in that order."""
        ordered = sorted(self.prompts.items(), key=lambda kv: (kv[1]["aspect"], kv[1]["id"]))
        index_of = {sha: i for i, (sha, _) in enumerate(ordered)}
        for s in self.stories:
            s["prompt"] = index_of[s["prompt"]]
        for f in self.failures:  # a prompt that failed in every run has no row: the failures table shows it
            f["prompt"] = index_of.get(f["prompt"])
        return ordered
