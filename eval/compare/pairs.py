"""Per-prompt values and costs: what a comparison pairs.

A multi-agent run writes N stories per prompt and a single-agent run one, so each run's stories
are first averaged per prompt: every prompt then weighs the same in every run, and the N stories
of one prompt (which share that prompt's difficulty) are not counted as N independent
observations. Prompts are keyed by identity, the hash of the prompt text.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from eval.metrics.catalog import JUDGE_AVERAGE
from eval.rubric import judge_average
from generate.common.manifest import sha256_text

log = logging.getLogger("eval.compare")

COST_FIELDS = ("calls", "prompt_tokens", "completion_tokens", "total_tokens", "seconds")


def number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def story_value(record: dict[str, Any], metric: str, aspects: Sequence[str] = ()) -> float | None:
    """One story's value of `metric`; the judge average is `eval.rubric.judge_average` over
    `aspects` (missing unless the story has every one)."""
    if metric == JUDGE_AVERAGE:
        return judge_average(record, aspects)
    value = record.get(metric)
    return float(value) if number(value) else None


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



def cut_off_share(stories: Iterable[dict[str, Any]], prompts: set[str] | None = None,
                  key: str = "prompt_id") -> float | None:
    """The share of final stories whose text hit the token cap (`truncated` true in stories.jsonl),
    over the given prompts (all: None) and the stories that record it; None when none does (runs
    written before the field existed). A cut-off story is judged as what it is, an unfinished one,
    so a framework's scores are read beside how often its stories were cut off."""
    flags = [bool(s["truncated"]) for s in stories if "truncated" in s
             and (prompts is None or (s[key] if key in s else sha256_text(s["prompt"])) in prompts)]
    return sum(flags) / len(flags) if flags else None
