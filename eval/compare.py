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

import json
import logging
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from eval.metrics.catalog import JUDGE_AVERAGE, Catalog
from eval.stats import paired_test, summarize
from generate.common.errors import UsageError
from generate.common.jsonl import read_jsonl
from generate.common.manifest import sha256_text

log = logging.getLogger(__name__)

COST_FIELDS = ("calls", "prompt_tokens", "completion_tokens", "total_tokens", "seconds")
# What must be the same for two runs' numbers to compare: the prompts' source, the judge (model,
# mode, decoding, rubric), the surprisal scorer and the reference corpus (with its encoder).
MISMATCH_FIELDS = ("dataset", "judge", "scorer", "reference")
_ID_FIELDS = frozenset({"story_id", "prompt_id", "prompt_sha256", "aspect", "framework", "agent", "model",
                        "missing", "judge", "notes", "surprisal_scorer"})


@dataclass(frozen=True)
class Run:
    """One evaluated run: its score records, its story records when found beside them, and what
    its numbers were made with (`provenance`: the `MISMATCH_FIELDS`, None where unrecorded)."""

    name: str
    path: Path
    scores: list[dict[str, Any]]
    stories: list[dict[str, Any]] | None
    provenance: dict[str, Any] = field(default_factory=dict)
    catalog: Catalog | None = None


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


def _json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
    except json.JSONDecodeError:
        raise UsageError(f"{path}: not valid JSON") from None


def load_run(name: str, path: str | Path) -> Run:
    """Load a run from its directory, or from its `eval/scores.jsonl` given directly.

    Costs come from the run's `stories.jsonl`; without one the run is still compared on scores.
    Provenance comes from the generation manifest (`dataset`) and the evaluation manifest
    (`judge`, `reference`); the surprisal scorer is read off the score records themselves.
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
    _add_prompt_hashes(name, scores, stories)
    generation = _json(run_dir / "manifest.json") or {}
    evaluation = (_json(scores_path.parent / "manifest.json") or {}).get("provenance")
    scorers = sorted({r.get("surprisal_scorer") or "unknown" for r in scores if _number(r.get("surprisal"))})
    provenance = {"dataset": generation.get("dataset_sha256"),
                  "judge": evaluation.get("judge", "unknown") if evaluation else None,
                  "reference": evaluation.get("reference", "unknown") if evaluation else None,
                  "scorer": scorers or "none"}
    catalog = Catalog.from_json(evaluation["catalog"]) if evaluation and evaluation.get("catalog") else None
    log.debug("run %r: %d scored stories from %s", name, len(scores), scores_path)
    return Run(name, path, scores, stories, provenance, catalog)


def _add_prompt_hashes(name: str, scores: list[dict], stories: list[dict] | None) -> None:
    """Give every score record its prompt's text hash (older evaluations did not record it)."""
    texts = {s["story_id"]: s.get("prompt") for s in stories or []}
    for r in scores:
        if r.get("prompt_sha256"):
            continue
        text = texts.get(r.get("story_id"))
        if text is None:
            raise UsageError(f"run {name!r}: score records name no prompt_sha256 and no stories.jsonl gives their "
                             "prompt text, so prompts cannot be paired by identity; re-evaluate the run")
        r["prompt_sha256"] = sha256_text(text)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def story_value(record: dict[str, Any], metric: str, aspects: Sequence[str] = ()) -> float | None:
    """One story's value of `metric`; the judge average is the mean of the `aspects` it has."""
    if metric == JUDGE_AVERAGE:
        values = [v for v in (story_value(record, m) for m in aspects) if v is not None]
        return sum(values) / len(values) if values else None
    value = record.get(metric)
    return float(value) if _number(value) else None


def prompt_means(scores: Iterable[dict[str, Any]], metric: str, prompts: set[str],
                 aspects: Sequence[str] = ()) -> dict[str, float]:
    """Mean of `metric` over each prompt's stories that have a value, for the given prompts
    (keyed by prompt identity: the prompt text's hash)."""
    values: dict[str, list[float]] = defaultdict(list)
    for record in scores:
        value = story_value(record, metric, aspects)
        if value is not None and record["prompt_sha256"] in prompts:
            values[record["prompt_sha256"]].append(value)
    return {prompt: float(np.mean(v)) for prompt, v in values.items()}


def inference_cost(stories: Iterable[dict[str, Any]], prompts: set[str], key: str = "prompt_id") -> dict | None:
    """Mean cost per prompt over the given prompts: calls, tokens and wall seconds.

    `prompt_usage` and `seconds` describe the whole prompt (every agent, plus e.g. a teacher) and
    are repeated on each of its stories, so each prompt is counted once.

    Args:
        stories: story records.
        prompts: the prompts to count, as values of `key`.
        key: the record field identifying a prompt (`prompt_id`, or `prompt_sha256`).

    Returns:
        {field: mean per prompt} for `COST_FIELDS` plus `n_prompts`, or None when the records
        lack usage fields or cover none of the prompts.
    """
    per_prompt: dict[str, list[float]] = {}
    try:
        for record in stories:
            prompt = record[key] if key in record else sha256_text(record["prompt"])
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


def check_comparable(runs: Sequence[Run], allow: Sequence[str] = ()) -> dict[str, dict[str, Any]]:
    """Refuse runs whose numbers were not made the same way.

    Raises:
        UsageError: naming the first field of `MISMATCH_FIELDS` (not in `allow`) on which the runs
            differ or for which a run has no record.

    Returns:
        {field: {run: value}} for the allowed fields on which the runs do differ (the report says so).
    """
    unknown = sorted(set(allow) - set(MISMATCH_FIELDS))
    if unknown:
        raise UsageError(f"--allow-mismatch {', '.join(unknown)}: expected one of {', '.join(MISMATCH_FIELDS)}")
    allowed: dict[str, dict[str, Any]] = {}
    for key in MISMATCH_FIELDS:
        values = {run.name: run.provenance.get(key) for run in runs}
        if key == "scorer":  # only runs with surprisal values have a scorer to compare
            values = {n: v for n, v in values.items() if v != "none"}
        distinct = {json.dumps(v, sort_keys=True) for v in values.values()}
        blind = [n for n, v in values.items() if v is None or v == "unknown" or v == ["unknown"]]
        if len(distinct) <= 1 and not blind:
            continue
        if key in allow:
            allowed[key] = values
            continue
        if blind:
            raise UsageError(f"run {blind[0]!r} records no {key} (made by an older version?), so it cannot be "
                             f"checked against the others; re-run it, or pass --allow-mismatch {key}")
        shown = "; ".join(f"{n}: {_short(v)}" for n, v in values.items())
        raise UsageError(f"runs differ in {key} ({shown}); their numbers do not compare. "
                         f"Pass --allow-mismatch {key} to compare them anyway")
    return allowed


def _short(value: Any) -> str:
    if isinstance(value, dict):
        value = {k: v for k, v in value.items() if k in ("model", "mode", "rubric_sha256", "content_sha256",
                                                           "embedder", "sample")} or value
        value = {k: (v[:12] if isinstance(v, str) and k.endswith("sha256") else v) for k, v in value.items()}
    if isinstance(value, str) and len(value) == 64:
        value = value[:12]
    return json.dumps(value)


def default_metrics(runs: Sequence[Run]) -> list[str]:
    """The judge average, the judge aspects of the baseline's catalog, then the rule metrics."""
    catalog = next((r.catalog for r in runs if r.catalog is not None), None) or Catalog.from_aspects({})
    return [m.key for m in catalog.with_judge_average()]


def _with_ratios(cost: dict[str, float] | None, base: dict[str, float] | None) -> dict[str, Any] | None:
    """Add `x_base` (each cost field over the baseline's) and `extra_base_tokens` to a run's cost."""
    if cost is None:
        return None
    ratios = {f: cost[f] / base[f] if base and base[f] > 0 else None for f in COST_FIELDS}
    extra = ratios["total_tokens"] - 1 if ratios["total_tokens"] is not None else None
    return {**cost, "x_base": ratios, "extra_base_tokens": extra}


def _gain(base: dict[str, float], run: dict[str, float], prompts: set[str], ids: dict[str, str],
          extra: float | None, n_boot: int, seed: int, alpha: float) -> dict[str, Any]:
    """Paired gain of one run over the baseline on one metric, with its gain per unit of cost."""
    paired = sorted(set(base) & set(run))
    result: dict[str, Any] = {"missing": sorted(ids[p] for p in prompts - set(paired))}
    if not paired:
        return {"gain": None, "ci_low": None, "ci_high": None, "p_value": None, "n_pairs": 0,
                "significant": False, **result, "gain_per_extra_base_tokens": None}
    test = paired_test([run[p] - base[p] for p in paired], n_boot=n_boot, alpha=alpha, seed=seed)
    per_cost = test.gain / extra if extra is not None and extra > 0 else None
    return {**asdict(test), **result, "gain_per_extra_base_tokens": per_cost}


def _validate_metrics(runs: Sequence[Run], metrics: Sequence[str]) -> None:
    known = set(default_metrics(runs)) | {k for run in runs for r in run.scores for k in r} - _ID_FIELDS
    unknown = [m for m in metrics if m not in known]
    if unknown:
        raise UsageError(f"unknown metric(s) {', '.join(unknown)}; valid: {', '.join(sorted(known))}")
    if not metrics:
        raise UsageError("no metric to compare")


def compare(runs: Sequence[Run], metrics: Sequence[str] | None = None, n_boot: int = 10_000,
            seed: int = 0, alpha: float = 0.05, allow_mismatch: Sequence[str] = ()) -> dict[str, Any]:
    """Compare every run with the baseline on every metric.

    Args:
        runs: At least two runs with distinct names; the one named `base` (else the first) is
            the baseline.
        metrics: Score fields to compare; default: the judge average, the judge aspects (from the
            evaluations' rubric) and the rule metrics.
        n_boot: Bootstrap resamples per CI.
        seed: Bootstrap seed, the same for every comparison.
        alpha: Significance level; CIs have level 1 - alpha.
        allow_mismatch: `MISMATCH_FIELDS` on which the runs may differ (reported as such). With
            `scorer` allowed and scorers differing, surprisal gains are not reported.

    Returns:
        The JSON-ready comparison: `config`, `metrics` (their specs), `prompts` (common count,
        dropped ids per run), `describe` (metric -> run -> mean/std/se/n over stories), `gains`
        (metric -> run -> paired test, missing prompt ids, gain per extra base-run of tokens),
        `cost` (run -> mean per prompt and multiples of the baseline, or None), `mismatches` and
        `verdict` (one line per headline metric).
    """
    names = [run.name for run in runs]
    if len(runs) < 2:
        raise UsageError("need at least two runs (--run base=DIR --run other=DIR)")
    if len(set(names)) != len(names):
        raise UsageError(f"duplicate run names: {', '.join(sorted({n for n in names if names.count(n) > 1}))}")
    metrics = list(metrics) if metrics else default_metrics(runs)
    _validate_metrics(runs, metrics)
    mismatches = check_comparable(runs, allow_mismatch)
    base = next((run for run in runs if run.name == "base"), runs[0])
    catalog = base.catalog or next((r.catalog for r in runs if r.catalog), None) or Catalog.from_aspects({})
    aspects = catalog.aspects
    ids = {r["prompt_sha256"]: r["prompt_id"] for run in reversed(runs) for r in run.scores}
    prompt_sets = {run.name: {r["prompt_sha256"] for r in run.scores} for run in runs}
    common = set.intersection(*prompt_sets.values())
    if not common:
        raise UsageError(f"no prompt is common to all runs ({', '.join(names)}): nothing to pair "
                         "(prompts are matched by their text)")
    dropped = {name: sorted(ids[h] for h in hashes - common) for name, hashes in prompt_sets.items()}
    for name, dropped_ids in dropped.items():
        if dropped_ids:
            log.warning("run %r: %d prompt(s) not in every run, dropped: %s", name, len(dropped_ids),
                        ", ".join(dropped_ids))

    raw_cost = {run.name: inference_cost(run.stories, common, key="prompt_sha256") if run.stories is not None
                else None for run in runs}
    cost = {name: _with_ratios(c, raw_cost[base.name]) for name, c in raw_cost.items()}
    describe: dict[str, dict[str, Any]] = {}
    gains: dict[str, dict[str, Any]] = {}
    excluded = {"surprisal": "the runs' surprisal was scored by different models"} if "scorer" in mismatches else {}
    for metric in metrics:
        describe[metric] = {run.name: asdict(summarize([
            story_value(r, metric, aspects) for r in run.scores if r["prompt_sha256"] in common
        ])) for run in runs}
        base_means = prompt_means(base.scores, metric, common, aspects)
        gains[metric] = {run.name: _gain(
            {} if metric in excluded else base_means,
            prompt_means(run.scores, metric, common, aspects), common, ids,
            cost[run.name]["extra_base_tokens"] if cost[run.name] else None, n_boot, seed, alpha,
        ) for run in runs if run is not base}
    comparison = {
        "config": {"base": base.name, "runs": {run.name: str(run.path) for run in runs}, "metrics": metrics,
                   "n_boot": n_boot, "seed": seed, "alpha": alpha, "allow_mismatch": sorted(allow_mismatch)},
        "metrics": {m: asdict(catalog.spec(m)) for m in metrics},
        "provenance": {run.name: run.provenance for run in runs},
        "mismatches": mismatches, "excluded": excluded,
        "prompts": {"n_common": len(common), "dropped": dropped},
        "describe": describe, "gains": gains, "cost": cost,
    }
    comparison["verdict"] = verdict(comparison)
    return comparison


def label(comparison: dict[str, Any], metric: str) -> str:
    """Display name of a metric in a comparison."""
    spec = comparison["metrics"].get(metric)
    return spec["label"] if spec else metric


def lower_is_better(comparison: dict[str, Any], metric: str) -> bool:
    spec = comparison["metrics"].get(metric)
    return bool(spec) and not spec["higher_is_better"]


def headline(comparison: dict[str, Any]) -> list[str]:
    """The metrics a verdict speaks about: the judge average and the rule metrics (not each aspect)."""
    return [m for m in comparison["config"]["metrics"]
            if m == JUDGE_AVERAGE or comparison["metrics"].get(m, {}).get("group") != "judge"]


def signed(x: float | None) -> str:
    """A signed number for tables and the verdict; n/a when undefined."""
    return "n/a" if x is None else f"{x:+.3g}"


def _judgement(lower: bool, gain: dict[str, Any]) -> str:
    if gain["gain"] is None:
        return "not available (no prompt has a value in both runs)"
    if not gain["significant"]:
        return "no significant difference"
    better = (gain["gain"] > 0) != lower
    return "significantly better" if better else "significantly worse"


def level_label(alpha: float) -> str:
    """The confidence level of a test at `alpha`, e.g. 95%."""
    return f"{100 * (1 - alpha):g}%"


def _cost_phrase(cost: dict[str, Any] | None) -> str:
    ratio = cost["x_base"]["total_tokens"] if cost else None
    return "at unknown cost" if ratio is None else f"at {ratio:.1f}x base tokens"


def verdict(comparison: dict[str, Any]) -> list[str]:
    """One sentence group per headline metric (judge average, then rule metrics), from the numbers.

    Runs are ranked by point gain in the metric's good direction; significance is each run's
    own test against the baseline (the runs are not tested against each other).
    """
    base = comparison["config"]["base"]
    level = level_label(comparison["config"]["alpha"])
    lines = []
    for metric in headline(comparison):
        gains = comparison["gains"][metric]
        lower = lower_is_better(comparison, metric)
        name = label(comparison, metric)
        direction = "lower is better" if lower else "higher is better"
        if metric in comparison.get("excluded", {}):
            lines.append(f"**{name}** ({direction}): not compared, {comparison['excluded'][metric]}.")
            continue
        if all(g["gain"] is None for g in gains.values()):
            lines.append(f"**{name}** ({direction}): not comparable, no prompt has a value in both `{base}` "
                         "and another run (homogenization, for one, needs several stories per prompt).")
            continue
        sign = -1 if lower else 1
        ranked = sorted(gains, key=lambda n: -math.inf if gains[n]["gain"] is None else sign * gains[n]["gain"],
                        reverse=True)
        status = {run: _judgement(lower, gains[run]) for run in ranked}
        better = [f"`{n}`" for n in ranked if status[n] == "significantly better"]
        worse = [f"`{n}`" for n in ranked if status[n] == "significantly worse"]
        top = gains[ranked[0]]["gain"]
        # "largest gain" names a run only when it moved the metric the good way: a least-bad loss is no gain.
        lead = [] if top is None else [f"largest gain: `{ranked[0]}`" if sign * top > 0 else f"no run gains over `{base}`"]
        lead.append(f"significantly better than `{base}`: {', '.join(better)}" if better
                    else f"no run is significantly better than `{base}`")
        if worse:
            lead.append(f"significantly worse: {', '.join(worse)}")
        parts = []
        for run in ranked:
            g = gains[run]
            numbers = "" if g["gain"] is None else (
                f" {signed(g['gain'])} ({level} CI {signed(g['ci_low'])} to {signed(g['ci_high'])}, "
                f"p = {'n/a' if g['p_value'] is None else format(g['p_value'], '.2g')}, {g['n_pairs']} prompts),"
            )
            parts.append(f"`{run}`:{numbers} {status[run]}, {_cost_phrase(comparison['cost'][run])}.")
        lines.append(f"**{name}** ({direction}): {'; '.join(lead)}. {' '.join(parts)}")
    return lines
