"""Paired gains of every run over the baseline, with significance and gain per unit of cost.

The per-prompt means of a run and of the baseline are differenced prompt by prompt (see
`eval.stats` for why pairing, the CI and the test). Only prompts that every run has are compared,
so that all gains refer to the same prompts; the others are reported as dropped. A missing metric
value drops that prompt for that metric only. The p-values of all the comparison's tests are
adjusted together before any is called significant (`eval.multiplicity`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from eval.compare.checks import check_comparable
from eval.compare.pairs import COST_FIELDS, cut_off_share, inference_cost, prompt_means, story_value
from eval.compare.runs import Run
from eval.compare.verdict import verdict
from eval.metrics.catalog import Catalog
from eval.multiplicity import CORRECTIONS, attainable
from eval.stats import paired_differences, paired_test, significant, summarize
from generate.common.errors import UsageError

log = logging.getLogger("eval.compare")

_ID_FIELDS = frozenset({"story_id", "prompt_id", "prompt_sha256", "aspect", "framework", "agent", "model",
                        "missing", "judge", "notes", "surprisal_scorer"})


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


def _costs(runs: Sequence[Run], base: Run, common: set[str]) -> dict[str, dict[str, Any] | None]:
    """Each run's mean cost per common prompt with its multiples of the baseline's (None: unknown)."""
    raw = {run.name: inference_cost(run.stories, common, key="prompt_sha256") if run.stories is not None
           else None for run in runs}
    return {name: _with_ratios(c, raw[base.name]) for name, c in raw.items()}


def _gain(base: dict[str, float], run: dict[str, float], prompts: set[str], ids: dict[str, str],
          extra: float | None, n_boot: int, seed: int, alpha: float) -> dict[str, Any]:
    """Paired gain of one run over the baseline on one metric, with its gain per unit of cost."""
    paired = sorted(set(base) & set(run))
    result: dict[str, Any] = {"missing": sorted(ids[p] for p in prompts - set(paired))}
    if not paired:
        return {"gain": None, "ci_low": None, "ci_high": None, "p_value": None, "n_pairs": 0,
                "p_adjusted": None, "significant": False, **result, "gain_per_extra_base_tokens": None}
    diffs = paired_differences([run[p] for p in paired], [base[p] for p in paired])
    test = paired_test(diffs, n_boot=n_boot, alpha=alpha, seed=seed)
    per_cost = test.gain / extra if extra is not None and extra > 0 else None
    # The call is made by `_correct`, once every test of the comparison is known.
    return {**asdict(test), "p_adjusted": None, "significant": False, **result, "gain_per_extra_base_tokens": per_cost}


def _correct(gains: dict[str, dict[str, Any]], correction: str, alpha: float) -> dict[str, Any]:
    """Adjust the p-values of every test in the comparison together, make the significance calls,
    and say whether the sample could have made any (`eval.multiplicity.attainable`)."""
    family = [g for by_run in gains.values() for g in by_run.values() if g["p_value"] is not None]
    for g, p in zip(family, CORRECTIONS[correction].adjust([g["p_value"] for g in family]) if family else []):
        g["p_adjusted"] = float(p)
        g["significant"] = significant(g["ci_low"], g["ci_high"], g["p_adjusted"], alpha)
    return attainable(max((g["n_pairs"] for g in family), default=0), len(family), correction, alpha)


def _validate_metrics(runs: Sequence[Run], metrics: Sequence[str]) -> None:
    known = set(default_metrics(runs)) | {k for run in runs for r in run.scores for k in r} - _ID_FIELDS
    unknown = [m for m in metrics if m not in known]
    if unknown:
        raise UsageError(f"unknown metric(s) {', '.join(unknown)}; valid: {', '.join(sorted(known))}")
    if not metrics:
        raise UsageError("no metric to compare")


def compare(runs: Sequence[Run], metrics: Sequence[str] | None = None, n_boot: int = 10_000,
            seed: int = 0, alpha: float = 0.05, allow_mismatch: Sequence[str] = (),
            correction: str = "holm") -> dict[str, Any]:
    """Compare every run with the baseline on every metric.

    Args:
        runs: At least two runs with distinct names; the one named `base` (else the first) is
            the baseline.
        metrics: Score fields to compare; default: the judge average, the judge aspects (from the
            evaluations' rubric) and the rule metrics.
        n_boot: Bootstrap resamples per CI.
        seed: Bootstrap seed, the same for every comparison.
        alpha: Significance level; CIs have level 1 - alpha (each on its own: the CIs are not
            widened for multiplicity, the p-values are adjusted).
        allow_mismatch: `MISMATCH_FIELDS` on which the runs may differ (reported as such). With
            `scorer` allowed and scorers differing, surprisal gains are not reported.
        correction: How the p-values of all the tests are adjusted together, a key of
            `eval.multiplicity.CORRECTIONS`.

    Returns:
        The JSON-ready comparison: `config`, `metrics` (their specs), `prompts` (common count,
        dropped ids per run), `describe` (metric -> run -> mean/std/se/n over stories, over prompts for
        a per-prompt metric, and `n_missing`), `gains`
        (metric -> run -> paired test, adjusted p, significance, missing prompt ids, gain per
        extra base-run of tokens), `correction` (its label and promise), `power` (whether this
        sample could make any significance call), `cost` (run -> mean per prompt and multiples of
        the baseline, or None), `cut_off` (run -> share of stories cut off at the token cap, None
        unrecorded), `mismatches`, `verdict` (one line per headline metric)."""
    _check_names(runs)
    if correction not in CORRECTIONS:
        raise UsageError(f"unknown correction {correction!r}; valid: {', '.join(CORRECTIONS)}")
    metrics = list(metrics) if metrics else default_metrics(runs)
    _validate_metrics(runs, metrics)
    mismatches = check_comparable(runs, allow_mismatch)
    base = next((run for run in runs if run.name == "base"), runs[0])
    catalog = base.catalog or next((r.catalog for r in runs if r.catalog), None) or Catalog.from_aspects({})
    common, ids, dropped = _common_prompts(runs)
    cost = _costs(runs, base, common)
    excluded = {"surprisal": "the runs' surprisal was scored by different models"} if "scorer" in mismatches else {}
    describe: dict[str, dict[str, Any]] = {}
    gains: dict[str, dict[str, Any]] = {}
    for metric in metrics:
        describe[metric] = _describe(runs, metric, common, catalog.aspects, catalog.spec(metric).per_prompt)
        gains[metric] = _metric_gains(runs, base, metric, common, ids, cost, catalog.aspects,
                                      metric in excluded, (n_boot, seed, alpha))
    power = _correct(gains, correction, alpha)
    comparison = {
        "config": {"base": base.name, "runs": {run.name: str(run.path) for run in runs}, "metrics": metrics,
                   "n_boot": n_boot, "seed": seed, "alpha": alpha, "correction": correction,
                   "allow_mismatch": sorted(allow_mismatch)},
        "metrics": {m: asdict(catalog.spec(m)) for m in metrics},
        "provenance": {run.name: run.provenance for run in runs},
        "mismatches": mismatches, "excluded": excluded,
        "prompts": {"n_common": len(common), "dropped": dropped},
        "correction": {"label": CORRECTIONS[correction].label, "promise": CORRECTIONS[correction].promise},
        "describe": describe, "gains": gains, "power": power, "cost": cost,
        "cut_off": {run.name: cut_off_share(run.stories or [], common, "prompt_sha256") for run in runs},
    }
    comparison["verdict"] = verdict(comparison)
    return comparison


def _check_names(runs: Sequence[Run]) -> None:
    names = [run.name for run in runs]
    if len(runs) < 2:
        raise UsageError("need at least two runs (--run base=DIR --run other=DIR)")
    if len(set(names)) != len(names):
        raise UsageError(f"duplicate run names: {', '.join(sorted({n for n in names if names.count(n) > 1}))}")


def _common_prompts(runs: Sequence[Run]) -> tuple[set[str], dict[str, str], dict[str, list[str]]]:
    """(the prompt hashes every run has, hash -> prompt id, run -> ids of its prompts left out)."""
    ids = {r["prompt_sha256"]: r["prompt_id"] for run in reversed(runs) for r in run.scores}
    prompt_sets = {run.name: {r["prompt_sha256"] for r in run.scores} for run in runs}
    common = set.intersection(*prompt_sets.values())
    if not common:
        raise UsageError(f"no prompt is common to all runs ({', '.join(prompt_sets)}): nothing to pair "
                         "(prompts are matched by their text)")
    dropped = {name: sorted(ids[h] for h in hashes - common) for name, hashes in prompt_sets.items()}
    for name, dropped_ids in dropped.items():
        if dropped_ids:
            log.warning("run %r: %d prompt(s) not in every run, dropped: %s", name, len(dropped_ids),
                        ", ".join(dropped_ids))
    return common, ids, dropped


def _describe(runs: Sequence[Run], metric: str, common: set[str], aspects: Sequence[str],
              per_prompt: bool = False) -> dict[str, Any]:
    """Each run's mean, std, se (clustered by prompt), n and `n_missing` (stories, or prompts, without
    a value) of `metric` over its stories of the common prompts. A per-prompt metric (homogenization)
    carries the same value on each of a prompt's stories, so it counts each prompt once, as the
    evaluation's summary does: n is then the number of prompts, not stories."""
    out = {}
    for run in runs:
        mine = [r for r in run.scores if r["prompt_sha256"] in common]
        if per_prompt:
            mine = list({r["prompt_sha256"]: r for r in mine}.values())
        values = [story_value(r, metric, aspects) for r in mine]
        out[run.name] = {**asdict(summarize(values, [r["prompt_sha256"] for r in mine])),
                         "n_missing": sum(v is None for v in values)}
    return out


def _metric_gains(runs: Sequence[Run], base: Run, metric: str, common: set[str], ids: dict[str, str],
                  cost: dict[str, Any], aspects: Sequence[str], excluded: bool,
                  test: tuple[int, int, float]) -> dict[str, Any]:
    """Every run's paired gain over `base` on `metric` (none where the metric is `excluded`)."""
    base_means = {} if excluded else prompt_means(base.scores, metric, common, aspects)
    return {run.name: _gain(
        base_means, prompt_means(run.scores, metric, common, aspects), common, ids,
        cost[run.name]["extra_base_tokens"] if cost[run.name] else None, *test,
    ) for run in runs if run is not base}

