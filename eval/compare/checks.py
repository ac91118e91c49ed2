"""What must be the same for two runs' numbers to compare, and the refusal when it is not."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from eval.compare.runs import Run
from generate.common.errors import UsageError

# What must be the same for two runs' numbers to compare: the prompts' source, the judge (model,
# mode, decoding, rubric), the surprisal scorer, the reference corpus (with its encoder), the
# version of the rule-based metrics' definition (`eval.metrics.story.METRICS_VERSION`: it changes
# homogenization too, which needs no corpus) and the learned signals (reward model and principles,
# by content; only runs with signal values count).
MISMATCH_FIELDS = ("dataset", "judge", "scorer", "reference", "metrics", "signals")


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
        if key in ("scorer", "signals"):  # only runs with such values have one to compare
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


# What a refusal shows of a recorded dict: what tells two judges or references apart at a glance.
_SHOWN = ("model", "weights_sha256", "package", "mode", "rubric_sha256", "content_sha256", "embedder", "embedder_id",
          "token_limit", "sample", "metrics_version")


def _short(value: Any) -> str:
    """A recorded value in one short line: a dict shows only its `_SHOWN` keys (all of them when it
    has none), a hash its first 12 characters."""
    if isinstance(value, dict):
        value = {k: v for k, v in value.items() if k in _SHOWN} or value
        value = {k: (v[:12] if isinstance(v, str) and k.endswith("sha256") else v) for k, v in value.items()}
    if isinstance(value, str) and len(value) == 64:
        value = value[:12]
    return json.dumps(value)

