"""Train/eval split of a prompt dataset: by prompt, stratified by aspect, seeded, saved as JSON.

Held-out prompts must never be trained on, otherwise "the reward went up on evaluation prompts"
would only show memorisation. Every aspect contributes to the eval set as evenly as the counts
allow: aspects are shuffled, each aspect's prompts are shuffled, and eval prompts are drawn
round-robin over the aspects (first prompt of each aspect, then the second, ...) until the eval
share is reached. With SciFi-100 (10 x 10) and a 0.2 share that is exactly 2 prompts per aspect.
Prompts whose text is the same (case and runs of whitespace aside, `plain_prompt`) under several ids
are one prompt to the split: all of them land on the same side, so no held-out prompt is also
trained on under another id.

The saved `split.json` (train/eval prompt ids) is what later evaluation scripts load.
"""

from __future__ import annotations

import json
import math
import random
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path

from generate.common.errors import UsageError
from generate.common.files import make_dir
from generate.common.inputs import read_json
from generate.datasets import Task

SPLIT_FILE = "split.json"


@dataclass(frozen=True)
class Split:
    dataset: str
    seed: int
    eval_fraction: float
    train: list[str]
    eval: list[str]

    def select(self, tasks: list[Task], part: str) -> list[Task]:
        """The tasks of `part` ("train" or "eval"), in dataset order.

        Raises:
            UsageError: the split names prompt ids that the dataset does not have (wrong dataset).
        """
        if part not in ("train", "eval"):
            raise ValueError(f"part must be 'train' or 'eval', got {part!r}")
        wanted = set(getattr(self, part))
        missing = wanted - {t.id for t in tasks}
        if missing:
            raise UsageError(f"split lists {len(missing)} prompt id(s) missing from the dataset, "
                             f"e.g. {sorted(missing)[0]!r}")
        return [t for t in tasks if t.id in wanted]

    def save(self, out_dir: str | Path) -> Path:
        path = Path(out_dir) / SPLIT_FILE
        make_dir(path.parent)
        path.write_text(json.dumps(asdict(self), indent=2) + "\n", encoding="utf-8")
        return path


def split_tasks(tasks: list[Task], eval_fraction: float, seed: int, dataset: str = "") -> Split:
    """Split prompts into train and eval, stratified by aspect (see the module docstring).

    Args:
        tasks: the dataset's prompts (ids unique).
        eval_fraction: share of prompts held out, rounded half up to a count; 0 holds out none, and
            a share that rounds to none is refused, never silently held out as none.
        seed: shuffling seed; the same seed and dataset give the same split on any machine.
        dataset: the dataset spec, recorded in the split.
    """
    if not 0 <= eval_fraction < 1:
        raise UsageError(f"eval_fraction must be in [0, 1), got {eval_fraction}")
    rng = random.Random(seed)
    same_text: dict[str, list[str]] = defaultdict(list)  # a text's ids, the first one drawn for all
    by_aspect: dict[str, list[str]] = defaultdict(list)
    for t in tasks:
        ids = same_text[plain_prompt(t.prompt)]
        if not ids:
            by_aspect[t.aspect].append(t.id)
        ids.append(t.id)
    ids_of = {ids[0]: ids for ids in same_text.values()}
    aspects = sorted(by_aspect)
    rng.shuffle(aspects)
    for aspect in aspects:
        rng.shuffle(by_aspect[aspect])
    round_robin = [by_aspect[a][i] for i in range(max(map(len, by_aspect.values()), default=0))
                   for a in aspects if i < len(by_aspect[a])]
    n_eval = math.floor(eval_fraction * len(tasks) + 0.5)  # half up: Python's round(0.5) is 0
    if eval_fraction > 0 and n_eval == 0:
        raise UsageError(f"eval_fraction {eval_fraction} of {len(tasks)} prompts holds none out; raise it "
                         "(or set 0 to hold out none on purpose)")
    held_out: set[str] = set()
    for first in round_robin:
        if len(held_out) >= n_eval:
            break
        held_out.update(ids_of[first])
    if held_out and len(held_out) == len(tasks):
        raise UsageError("eval_fraction leaves no training prompt")
    return Split(dataset, seed, eval_fraction, [t.id for t in tasks if t.id not in held_out],
                 [t.id for t in tasks if t.id in held_out])


def plain_prompt(prompt: str) -> str:
    """A prompt as the leak checks compare it: case and runs of whitespace do not make another task."""
    return " ".join(prompt.split()).lower()


def load_split(path: str | Path) -> Split:
    """Read a `split.json` written by `Split.save` (a run directory or the file itself)."""
    path = Path(path)
    if path.is_dir():
        path = path / SPLIT_FILE
    if not path.is_file():
        raise UsageError(f"split file not found: {path}")
    try:
        return Split(**read_json(path, "split file"))
    except TypeError as exc:
        raise UsageError(f"{path}: not a split file ({exc})") from None
