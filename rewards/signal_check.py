"""Does a learned signal prove itself on held-out data before it trains a writer?

A reward model's held-out pairwise accuracy and a principle judge's held-out AUC / F1 are
measured on few prompts or works; without an interval a 0.6 on one prompt reads as a signal. The
intervals here are percentile bootstraps over the *groups* the data was split by (held-out
prompts for the reward model, held-out works or groups for the principles), since pairs or rows of
one group are not independent. GRPO scales each prompt group's rewards to unit spread, so a
signal at chance still gives full-size advantages: `train/grpo.py` refuses a `reward_model` or
`principle_judge` reward whose interval includes chance, that has no held-out measurement, or whose
measurement has fewer than `MIN_PROVEN_GROUPS` groups, unless `--allow_weak_signal` (then recorded
in the manifest, and the tables mark the writer).

Why a floor on groups: a percentile bootstrap over k groups puts its lower bound at the worst
group's value once a resample made of that group alone is more likely than 2.5% (k < 4), and near
it for a few more. Its interval then clears chance whenever every group does, which a signal at
chance does 1 time in 2^k: 25% with the reward model's 2 held-out prompts, under the 2.5% the
bound promises only from 6 groups (1/64), the floor of a sign test, as Wilcoxon's is for prompts.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from generate.common.config import load_yaml
from generate.common.errors import UsageError

CHANCE = 0.5  # pairwise accuracy, AUC: a coin; F1 has no fixed chance level, so the gate reads AUC
N_BOOT = 2000
MIN_HELDOUT_GROUPS = 2  # an interval at all
MIN_PROVEN_GROUPS = 6  # an interval that can show a signal above chance (module doc)


def group_bootstrap(groups: Sequence[Any], stat: Callable[[list[Any]], float | None], n_boot: int = N_BOOT,
                    seed: int = 0) -> list[float] | None:
    """95% percentile interval of `stat` over resamples (with replacement) of whole `groups`;
    resamples where `stat` is undefined are skipped. None with fewer than 2 groups."""
    if len(groups) < MIN_HELDOUT_GROUPS:
        return None
    rng = random.Random(seed)
    values = sorted(v for v in (stat([groups[rng.randrange(len(groups))] for _ in groups]) for _ in range(n_boot))
                    if v is not None)
    if not values:
        return None
    return [values[int(0.025 * (len(values) - 1))], values[int(0.975 * (len(values) - 1) + 0.5)]]


def proven(evidence: dict) -> bool:
    """A held-out interval wholly above chance, over at least `MIN_PROVEN_GROUPS` groups."""
    ci, groups = evidence.get("ci95"), evidence.get("groups")
    return bool(ci) and ci[0] > CHANCE and isinstance(groups, int) and groups >= MIN_PROVEN_GROUPS


def rm_evidence(model_dir: str | Path) -> dict:
    """The reward model's held-out accuracy and interval from its `metrics.json`, found as the
    evaluation finds its threshold (`eval.signals.rm_metrics`); {} when it has none."""
    from eval.signals import rm_metrics

    metrics = rm_metrics(model_dir)
    if not metrics:
        return {}
    held = metrics.get("heldout") or {}
    return {"metric": "pairwise accuracy", "value": held.get("accuracy"), "ci95": held.get("ci95"),
            "groups": held.get("prompts")}


def principles_evidence(path: str | Path | None) -> dict:
    """The principles' held-out AUC and interval as their optimisation recorded them ({} for a file
    without a held-out measurement, such as the unoptimised starting set)."""
    if not path:
        return {}
    held = load_yaml(Path(path)).get("heldout") or {}
    if "auc" not in held:
        return {}
    return {"metric": "AUC", "value": held.get("auc"), "ci95": held.get("auc_ci95"), "groups": held.get("groups"),
            "f1": held.get("f1"), "f1_ci95": held.get("f1_ci95")}


def check_signals(reward_funcs: Sequence[str], options: dict[str, dict], allow_weak: bool) -> dict[str, dict]:
    """Each learned signal's evidence and verdict ({name: {..., "proven": bool}}).

    Raises:
        UsageError: a signal without a held-out interval above chance, unless `allow_weak`.
    """
    found: dict[str, dict] = {}
    for name in reward_funcs:
        if name == "reward_model":
            evidence = rm_evidence(options.get(name, {}).get("model_dir", "runs/rm/smollm2_cpu"))
        elif name == "principle_judge":
            evidence = principles_evidence(options.get(name, {}).get("principles"))
        else:
            continue
        found[name] = {**evidence, "proven": proven(evidence)}
        if found[name]["proven"] or allow_weak:
            continue
        if not evidence or evidence.get("ci95") is None:
            why = "has no held-out measurement with an interval"
        elif evidence["ci95"][0] > CHANCE:
            why = (f"held-out {evidence['metric']} {evidence['value']:.3f}, 95% CI {_ci(evidence['ci95'])}, comes from "
                   f"{evidence.get('groups') or 'an unknown number of'} held-out groups: fewer than "
                   f"{MIN_PROVEN_GROUPS} cannot show a signal above chance")
        else:
            why = f"held-out {evidence['metric']} {evidence['value']:.3f}, 95% CI {_ci(evidence['ci95'])} includes chance"
        raise UsageError(f"the {name} signal {why}: it would train the writer on noise. Measure it on more held-out "
                         "data, or pass --allow_weak_signal true to train on it anyway (recorded and marked)")
    return found


def _ci(ci: Sequence[float]) -> str:
    return f"[{ci[0]:.3f}, {ci[1]:.3f}]"
