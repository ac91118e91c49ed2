"""Curation input and output: candidate responses in, trl preference pairs out.

Candidates come from any of our runs' `stories.jsonl` (every framework, temperature, base or
tuned writer) or from a labelled JSONL of `{prompt, response, label}`. Runs reuse story ids
(`single/<prompt>/<agent>` in two single-agent runs), so a response is identified by its prompt
and text (`key`), and the prompt by the hash of its text (`prompt_sha256`, as generation records
it): prompt ids differ between datasets that share them (`strong-voice-01`).

Preference pairs (`build_pairs`) are trl's conversational preference format with an explicit
prompt: `prompt` is the single-agent writer's chat request for the task
(`PromptSet.writer_messages`, what GRPO trains the writer on and what a reward receives), `chosen`
and `rejected` are one assistant message each. trl's `RewardTrainer` tokenizes `prompt + chosen`
with the chat template, which is how the `reward_model` reward scores a GRPO completion.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from eval.scorers.curation.scorer import response_key
from generate.common.errors import UsageError
from generate.common.inputs import read_text
from generate.common.jsonl import parse_object
from generate.common.manifest import sha256_text
from rewards.principles.metrics import binary_metrics


@dataclass(frozen=True)
class Candidate:
    key: str
    story_id: str
    source: str  # "<file>:<line>"
    prompt_id: str
    prompt_sha256: str
    aspect: str
    prompt: str
    text: str
    framework: str | None = None
    label: int | None = None  # a human (or weak) label, when the input has one


def load_candidates(paths: list[str], limit: int | None = None) -> list[Candidate]:
    """Every distinct (prompt, response) of the files, in file order; the first `limit` only.

    Raises:
        UsageError: no file, a missing file, a line without a prompt and a text/response, a label
            other than 0/1, or no candidate at all.
    """
    if not paths:
        raise UsageError("no candidates given (--candidates runs/<name>/stories.jsonl ...)")
    out: dict[str, Candidate] = {}
    for path in map(Path, paths):
        if not path.is_file():
            raise UsageError(f"candidates file not found: {path}")
        for n, line in enumerate(read_text(path, "candidates file").splitlines(), 1):
            if line.strip():
                c = _candidate(line, f"{path}:{n}")
                out.setdefault(c.key, c)
    if not out:
        raise UsageError(f"no candidate responses in {', '.join(paths)}")
    candidates = list(out.values())
    return candidates[:limit] if limit else candidates


def _candidate(line: str, where: str) -> Candidate:
    row = parse_object(line, where)
    prompt, text = row.get("prompt"), row.get("text", row.get("response"))
    if not isinstance(prompt, str) or not prompt.strip() or not isinstance(text, str):
        raise UsageError(f"{where}: a candidate needs 'prompt' and 'text' (stories.jsonl) or 'response'")
    label = row.get("label")
    if label is not None and label not in (0, 1):
        raise UsageError(f"{where}: label must be 0 or 1, got {label!r}")
    key = response_key(prompt, text)
    phash = sha256_text(prompt)
    return Candidate(key, str(row.get("story_id") or key), where, str(row.get("prompt_id") or phash[:12]), phash,
                     str(row.get("aspect") or ""), prompt, text, row.get("framework"), label)


def build_pairs(judgments: list[dict], writer: Callable[[str], list[dict[str, str]]]) -> list[dict]:
    """Every (good, bad) pair of responses to the same prompt, by final verdict.

    Pairs never cross prompts (grouped by `prompt_sha256`), never pair a response with itself, and
    skip two identical texts (no preference to learn). Order is deterministic: prompts by first
    appearance, then judgments in their file order.
    """
    groups: dict[str, list[dict]] = {}
    for j in judgments:
        groups.setdefault(j["prompt_sha256"], []).append(j)
    pairs = []
    for phash, group in groups.items():
        good = [j for j in group if j["final"] == 1]
        bad = [j for j in group if j["final"] == 0]
        for g in good:
            for b in bad:
                if g["key"] == b["key"] or g["text"].strip() == b["text"].strip():
                    continue
                pairs.append({
                    "prompt": writer(g["prompt"]),
                    "chosen": [{"role": "assistant", "content": g["text"]}],
                    "rejected": [{"role": "assistant", "content": b["text"]}],
                    "prompt_sha256": phash, "prompt_id": g["prompt_id"], "aspect": g["aspect"],
                    "chosen_id": g["story_id"], "rejected_id": b["story_id"],
                    "chosen_key": g["key"], "rejected_key": b["key"],
                })
    return pairs


def agreement(judgments: list[dict]) -> dict | None:
    """Accuracy, precision, recall and F1 of the final verdicts against the candidates' labels
    (the paper's Table 4 metrics; "good" is the positive class), computed as the principle
    Detector's are (`rewards.principles.metrics.binary_metrics`); None without labels."""
    rows = [(j["label"], j["final"]) for j in judgments if j.get("label") is not None]
    if not rows:
        return None
    m = binary_metrics([y for y, _ in rows], [float(p) for _, p in rows])
    return {k: m[k] for k in ("n", "accuracy", "precision", "recall", "f1")}
