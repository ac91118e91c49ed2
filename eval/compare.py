"""Compare evaluated runs with a baseline: paired gains, significance, inference cost, verdict.

Each run is a run directory holding `stories.jsonl` (generation, with token usage) and
`eval/scores.jsonl` (one line per story, metric values or null). The baseline is the run named
`base`, else the first one.

Gains are paired by prompt. A multi-agent run writes N stories per prompt and a single-agent run
one, so each run's stories are first averaged per prompt: every prompt then weighs the same in
every run, and the N stories of one prompt (which share that prompt's difficulty) are not
counted as N independent observations. The per-prompt means of a run and of the baseline are
then differenced prompt by prompt (see `eval.stats` for why pairing, the CI and the test).

Only prompts that every run has are compared, so that all gains refer to the same prompts; the
others are reported as dropped. A missing metric value drops that prompt for that metric only.

Usage:
    python scripts/compare.py --run base=runs/single --run review=runs/review --out runs/compare
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from eval.stats import paired_test, summarize
from generate.common.errors import UsageError
from generate.common.jsonl import read_jsonl

log = logging.getLogger(__name__)

JUDGE_METRICS = ("concepts", "logic", "characters", "world_building", "ethics")
NOVELTY_METRICS = ("surprisal", "kl", "novelty_cos", "volume_gain", "homogenization")
JUDGE_AVERAGE = "judge_average"
DEFAULT_METRICS = (JUDGE_AVERAGE, *JUDGE_METRICS, *NOVELTY_METRICS)
# Homogenization is the similarity of one prompt's stories to each other: lower is more diverse.
LOWER_IS_BETTER = frozenset({"homogenization"})
COST_FIELDS = ("calls", "prompt_tokens", "completion_tokens", "total_tokens", "seconds")
_ID_FIELDS = frozenset({"story_id", "prompt_id", "aspect", "framework", "agent", "model"})


@dataclass(frozen=True)
class Run:
    """One evaluated run: its score records and, when found beside them, its story records."""

    name: str
    path: Path
    scores: list[dict[str, Any]]
    stories: list[dict[str, Any]] | None


def parse_run_spec(spec: str) -> tuple[str, Path]:
    """Split a `NAME=PATH` command-line value."""
    name, sep, path = spec.partition("=")
    if not sep or not name.strip() or not path.strip():
        raise UsageError(f"--run {spec!r}: expected NAME=DIR, e.g. --run review=runs/review")
    return name.strip(), Path(path.strip())


def _read(path: Path) -> list[dict[str, Any]]:
    try:
        return list(read_jsonl(path))
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def load_run(name: str, path: str | Path) -> Run:
    """Load a run from its directory, or from its `eval/scores.jsonl` given directly.

    Costs come from the run's `stories.jsonl`; without one the run is still compared on scores.
    """
    path = Path(path)
    if path.is_dir():
        run_dir, scores_path = path, path / "eval" / "scores.jsonl"
    elif path.is_file():
        scores_path = path
        run_dir = path.parent.parent if path.parent.name == "eval" else path.parent
    else:
        raise UsageError(f"run {name!r}: {path} does not exist")
    if not scores_path.is_file():
        raise UsageError(f"run {name!r}: no {scores_path} (evaluate the run first)")
    # The files are append-only: a story scored again appears again, and its last line holds.
    scores = list({r.get("story_id", i): r for i, r in enumerate(_read(scores_path))}.values())
    if not scores:
        raise UsageError(f"run {name!r}: {scores_path} holds no scores")
    if any("prompt_id" not in r for r in scores):
        raise UsageError(f"run {name!r}: {scores_path} has records without a prompt_id")
    stories_path = run_dir / "stories.jsonl"
    stories = _read(stories_path) if stories_path.is_file() else None
    if stories is None:
        log.warning("run %r: no %s, so its inference cost is unknown", name, stories_path)
    log.debug("run %r: %d scored stories from %s", name, len(scores), scores_path)
    return Run(name, path, scores, stories)


def story_value(record: dict[str, Any], metric: str) -> float | None:
    """One story's value of `metric`; the judge average is the mean of the judge aspects it has."""
    if metric == JUDGE_AVERAGE:
        aspects = [v for v in (story_value(record, m) for m in JUDGE_METRICS) if v is not None]
        return sum(aspects) / len(aspects) if aspects else None
    value = record.get(metric)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def prompt_means(scores: Iterable[dict[str, Any]], metric: str, prompts: set[str]) -> dict[str, float]:
    """Mean of `metric` over each prompt's stories that have a value, for the given prompts."""
    values: dict[str, list[float]] = defaultdict(list)
    for record in scores:
        value = story_value(record, metric)
        if value is not None and record["prompt_id"] in prompts:
            values[record["prompt_id"]].append(value)
    return {prompt: float(np.mean(v)) for prompt, v in values.items()}


def inference_cost(stories: Iterable[dict[str, Any]], prompts: set[str]) -> dict[str, float] | None:
    """Mean cost per prompt over the given prompts: calls, tokens and wall seconds.

    `prompt_usage` and `seconds` describe the whole prompt (every agent, plus e.g. a teacher) and
    are repeated on each of its stories, so each prompt is counted once.

    Returns:
        {field: mean per prompt} for `COST_FIELDS` plus `n_prompts`, or None when the records
        lack usage fields or cover none of the prompts.
    """
    per_prompt: dict[str, list[float]] = {}
    try:
        for record in stories:
            prompt = record["prompt_id"]
            if prompt in prompts and prompt not in per_prompt:
                usage = record["prompt_usage"]
                calls, inp, out = (float(usage[k]) for k in ("calls", "prompt_tokens", "completion_tokens"))
                per_prompt[prompt] = [calls, inp, out, inp + out, float(record["seconds"])]
    except (KeyError, TypeError, ValueError) as exc:
        log.warning("stories lack usage fields (%s: %s), so the inference cost is unknown", type(exc).__name__, exc)
        return None
    if not per_prompt:
        log.warning("stories cover none of the compared prompts, so the inference cost is unknown")
        return None
    means = np.mean(list(per_prompt.values()), axis=0)
    return {"n_prompts": len(per_prompt), **{f: float(m) for f, m in zip(COST_FIELDS, means)}}


def _with_ratios(cost: dict[str, float] | None, base: dict[str, float] | None) -> dict[str, Any] | None:
    """Add `x_base` (each cost field over the baseline's) and `extra_base_tokens` to a run's cost."""
    if cost is None:
        return None
    ratios = {f: cost[f] / base[f] if base and base[f] > 0 else None for f in COST_FIELDS}
    extra = ratios["total_tokens"] - 1 if ratios["total_tokens"] is not None else None
    return {**cost, "x_base": ratios, "extra_base_tokens": extra}


def _gain(base: dict[str, float], run: dict[str, float], prompts: set[str], extra: float | None,
          n_boot: int, seed: int, alpha: float) -> dict[str, Any]:
    """Paired gain of one run over the baseline on one metric, with its gain per unit of cost."""
    paired = sorted(set(base) & set(run))
    result: dict[str, Any] = {"missing": sorted(prompts - set(paired))}
    if not paired:
        return {"gain": None, "ci_low": None, "ci_high": None, "p_value": None, "n_pairs": 0,
                "significant": False, **result, "gain_per_extra_base_tokens": None}
    test = paired_test([run[p] - base[p] for p in paired], n_boot=n_boot, alpha=alpha, seed=seed)
    per_cost = test.gain / extra if extra is not None and extra > 0 else None
    return {**asdict(test), **result, "gain_per_extra_base_tokens": per_cost}


def _validate_metrics(runs: Sequence[Run], metrics: Sequence[str]) -> None:
    known = set(DEFAULT_METRICS) | {k for run in runs for r in run.scores for k in r} - _ID_FIELDS
    unknown = [m for m in metrics if m not in known]
    if unknown:
        raise UsageError(f"unknown metric(s) {', '.join(unknown)}; valid: {', '.join(sorted(known))}")
    if not metrics:
        raise UsageError("no metric to compare")


def compare(runs: Sequence[Run], metrics: Sequence[str] = DEFAULT_METRICS, n_boot: int = 10_000,
            seed: int = 0, alpha: float = 0.05) -> dict[str, Any]:
    """Compare every run with the baseline on every metric.

    Args:
        runs: At least two runs with distinct names; the one named `base` (else the first) is
            the baseline.
        metrics: Score fields to compare; `judge_average` is derived from the judge aspects.
        n_boot: Bootstrap resamples per CI.
        seed: Bootstrap seed, the same for every comparison.
        alpha: Significance level; CIs have level 1 - alpha.

    Returns:
        The JSON-ready comparison: `config`, `prompts` (common count, dropped ids per run),
        `describe` (metric -> run -> mean/std/n over stories), `gains` (metric -> run -> paired
        test, missing prompt ids, gain per extra base-run of tokens), `cost` (run -> mean per
        prompt and multiples of the baseline, or None) and `verdict` (one line per headline metric).
    """
    names = [run.name for run in runs]
    if len(runs) < 2:
        raise UsageError("need at least two runs (--run base=DIR --run other=DIR)")
    if len(set(names)) != len(names):
        raise UsageError(f"duplicate run names: {', '.join(sorted({n for n in names if names.count(n) > 1}))}")
    _validate_metrics(runs, metrics)
    base = next((run for run in runs if run.name == "base"), runs[0])
    prompt_sets = {run.name: {r["prompt_id"] for r in run.scores} for run in runs}
    common = set.intersection(*prompt_sets.values())
    if not common:
        raise UsageError(f"no prompt is common to all runs ({', '.join(names)}): nothing to pair")
    dropped = {name: sorted(ids - common) for name, ids in prompt_sets.items()}
    for name, ids in dropped.items():
        if ids:
            log.warning("run %r: %d prompt(s) not in every run, dropped: %s", name, len(ids), ", ".join(ids))

    raw_cost = {run.name: inference_cost(run.stories, common) if run.stories is not None else None for run in runs}
    cost = {name: _with_ratios(c, raw_cost[base.name]) for name, c in raw_cost.items()}
    describe: dict[str, dict[str, Any]] = {}
    gains: dict[str, dict[str, Any]] = {}
    for metric in metrics:
        describe[metric] = {run.name: asdict(summarize([
            v for r in run.scores if r["prompt_id"] in common and (v := story_value(r, metric)) is not None
        ])) for run in runs}
        base_means = prompt_means(base.scores, metric, common)
        gains[metric] = {run.name: _gain(
            base_means, prompt_means(run.scores, metric, common), common,
            cost[run.name]["extra_base_tokens"] if cost[run.name] else None, n_boot, seed, alpha,
        ) for run in runs if run is not base}
    comparison = {
        "config": {"base": base.name, "runs": {run.name: str(run.path) for run in runs}, "metrics": list(metrics),
                   "n_boot": n_boot, "seed": seed, "alpha": alpha},
        "prompts": {"n_common": len(common), "dropped": dropped},
        "describe": describe, "gains": gains, "cost": cost,
    }
    comparison["verdict"] = verdict(comparison)
    return comparison


def label(metric: str) -> str:
    """Display name of a metric."""
    return "Judge average" if metric == JUDGE_AVERAGE else metric


def signed(x: float | None) -> str:
    """A signed number for tables and the verdict; n/a when undefined."""
    return "n/a" if x is None else f"{x:+.3g}"


def _judgement(metric: str, gain: dict[str, Any]) -> str:
    if gain["gain"] is None:
        return "not available (no prompt has a value in both runs)"
    if not gain["significant"]:
        return "no significant difference"
    better = (gain["gain"] > 0) != (metric in LOWER_IS_BETTER)
    return "significantly better" if better else "significantly worse"


def level_label(alpha: float) -> str:
    """The confidence level of a test at `alpha`, e.g. 95%."""
    return f"{100 * (1 - alpha):g}%"


def _cost_phrase(cost: dict[str, Any] | None) -> str:
    ratio = cost["x_base"]["total_tokens"] if cost else None
    return "at unknown cost" if ratio is None else f"at {ratio:.1f}x base tokens"


def verdict(comparison: dict[str, Any]) -> list[str]:
    """One sentence group per headline metric (judge average, then novelty metrics), from the numbers.

    Runs are ranked by point gain in the metric's good direction; significance is each run's
    own test against the baseline (the runs are not tested against each other).
    """
    base = comparison["config"]["base"]
    level = level_label(comparison["config"]["alpha"])
    headline = [m for m in comparison["config"]["metrics"] if m == JUDGE_AVERAGE or m in NOVELTY_METRICS]
    lines = []
    for metric in headline:
        gains = comparison["gains"][metric]
        direction = "lower is better" if metric in LOWER_IS_BETTER else "higher is better"
        if all(g["gain"] is None for g in gains.values()):
            lines.append(f"**{label(metric)}** ({direction}): not comparable, no prompt has a value in both `{base}` "
                         "and another run (homogenization, for one, needs several stories per prompt).")
            continue
        sign = -1 if metric in LOWER_IS_BETTER else 1
        ranked = sorted(gains, key=lambda n: -math.inf if gains[n]["gain"] is None else sign * gains[n]["gain"],
                        reverse=True)
        status = {name: _judgement(metric, gains[name]) for name in ranked}
        better = [f"`{n}`" for n in ranked if status[n] == "significantly better"]
        worse = [f"`{n}`" for n in ranked if status[n] == "significantly worse"]
        lead = [f"largest gain: `{ranked[0]}`"] if gains[ranked[0]]["gain"] is not None else []
        lead.append(f"significantly better than `{base}`: {', '.join(better)}" if better
                    else f"no run is significantly better than `{base}`")
        if worse:
            lead.append(f"significantly worse: {', '.join(worse)}")
        parts = []
        for name in ranked:
            g = gains[name]
            numbers = "" if g["gain"] is None else (
                f" {signed(g['gain'])} ({level} CI {signed(g['ci_low'])} to {signed(g['ci_high'])}, "
                f"p = {'n/a' if g['p_value'] is None else format(g['p_value'], '.2g')}, {g['n_pairs']} prompts),"
            )
            parts.append(f"`{name}`:{numbers} {status[name]}, {_cost_phrase(comparison['cost'][name])}.")
        lines.append(f"**{label(metric)}** ({direction}): {'; '.join(lead)}. {' '.join(parts)}")
    return lines
