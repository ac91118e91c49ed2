"""Evaluated runs as the comparison reads them: scores, stories beside them, and provenance.

A run is a run directory holding `stories.jsonl` (generation, with token usage) and
`eval/scores.jsonl` (one line per story, metric values or null), or that scores file given
directly. Provenance (what the numbers were made with) comes from the generation manifest
(`dataset`), the evaluation manifest (`judge`, `reference`, `signals` by content; "none" where the
evaluation recorded having none; `metrics`, the version of the rule-based metrics' definition, 1
for an evaluation made before it was recorded) and the score records (the surprisal scorer, with
its numerics where the evaluation recorded them); `eval.compare.checks` refuses runs whose
provenance differs.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eval.compare.pairs import number
from eval.metrics.catalog import Catalog
from generate.common.errors import UsageError
from generate.common.inputs import read_json
from generate.common.jsonl import read_jsonl
from generate.common.manifest import sha256_bytes, sha256_text

log = logging.getLogger("eval.compare")
SIGNAL_KEYS = ("principle_p", "principle_good", "rm_score", "rm_good", "curation_good")


@dataclass(frozen=True)
class Run:
    """One evaluated run: its score records, its story records when found beside them, what its
    numbers were made with (`provenance`: the `MISMATCH_FIELDS`, None where unrecorded), and the
    files read (`inputs`: path -> sha256), so a comparison names the exact data it was made from."""

    name: str
    path: Path
    scores: list[dict[str, Any]]
    stories: list[dict[str, Any]] | None
    provenance: dict[str, Any] = field(default_factory=dict)
    catalog: Catalog | None = None
    inputs: dict[str, str] = field(default_factory=dict)


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
    return read_json(path) if path.is_file() else None


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
    scorers = sorted({r.get("surprisal_scorer") or "unknown" for r in scores if number(r.get("surprisal"))})
    signalled = any(number(r.get(k)) for r in scores for k in SIGNAL_KEYS)
    provenance = {"dataset": generation.get("dataset_sha256"),
                  "judge": _recorded(evaluation, "judge"), "reference": _recorded(evaluation, "reference"),
                  "scorer": scorers or "none",
                  "signals": _signals(evaluation.get("signals", "unknown")) if evaluation and signalled else "none",
                  # Without a corpus `reference` is "none" on both sides, yet homogenization and
                  # draft similarity still changed definition between versions (`METRICS_VERSION`).
                  "metrics": evaluation.get("metrics_version", 1) if evaluation else None}
    if evaluation and scorers and evaluation.get("scorer_numerics"):
        provenance["scorer"] = {"scorers": scorers, "numerics": evaluation["scorer_numerics"]}
    catalog = Catalog.from_json(evaluation["catalog"]) if evaluation and evaluation.get("catalog") else None
    log.debug("run %r: %d scored stories from %s", name, len(scores), scores_path)
    inputs = {str(p): sha256_bytes(p.read_bytes()) for p in (scores_path, stories_path) if p.is_file()}
    return Run(name, path, scores, stories, provenance, catalog, inputs)


def _recorded(evaluation: dict | None, key: str) -> Any:
    """An evaluation's record of `key`: "none" where it recorded having none (no judge, no corpus),
    so two runs that agree on having none compare; None (unknown) where it has no record at all."""
    if not evaluation:
        return None
    if key not in evaluation:
        return "unknown"
    return "none" if evaluation[key] is None else evaluation[key]


def _signals(recorded: Any) -> Any:
    """The signals by content (`eval.signals.Signals.fingerprint` minus paths); "unknown" for an
    evaluation that named them only by path."""
    if not isinstance(recorded, dict):
        return recorded
    if "rm_record" not in recorded and "principles_record" not in recorded:
        return "unknown"
    strip = lambda r: {k: v for k, v in r.items() if k != "heldout"} if r else None  # noqa: E731
    return {"reward_model": strip(recorded.get("rm_record")), "principles": strip(recorded.get("principles_record")),
            "principle_judge": recorded.get("principle_judge")}


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

