"""Labelled data for the principle optimisation, its two splits, and the model options both
subcommands share.

`--labelled` is a JSONL of `{prompt, response, label}` (label 1 = good, 0 = bad), with optional
`id`, `split` ("optimisation" | "heldout") and `work` or `group`. The held-out split only ever
measures the Detector; nothing in it reaches a Generator, a Reflector or a rewrite. Rows that
share a group (a passage and its damaged copies, or every response to one prompt) always land in
the same split, so the Detector is never measured on a text whose twin it was optimised on.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from generate.backends import SamplingParams
from generate.backends.options import ModelOptions as BackendModelOptions
from generate.common.errors import UsageError
from generate.common.jsonl import read_jsonl
from generate.common.ranges import AT_LEAST_1, NON_NEGATIVE, TOP_P, in_range
from generate.journal import derive_seed
from rewards.principles.protocols import Example

SPLITS = ("optimisation", "heldout")


@dataclass
class ModelOptions(BackendModelOptions):
    """The model of a subcommand (one model plays every role) and its decoding for free text."""

    max_new_tokens: int = field(default=320, metadata=in_range(
        AT_LEAST_1, help="reply budget of generator and rewrite calls"))
    temperature: float = field(default=0.8, metadata=in_range(NON_NEGATIVE))
    top_p: float = field(default=0.95, metadata=in_range(TOP_P))

    def params(self) -> SamplingParams:
        return SamplingParams(self.max_new_tokens, self.temperature, self.top_p)


def load_labelled(path: str | Path) -> list[Example]:
    """Read and validate a labelled JSONL file.

    Raises:
        UsageError: a missing file, no rows, a row without a text response or a 0/1 label, an
            unknown split name, or a repeated id.
    """
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"labelled data not found: {path}")
    examples: list[Example] = []
    for i, row in enumerate(read_jsonl(path), 1):
        label, response, prompt = row.get("label"), row.get("response"), row.get("prompt", "")
        if label not in (0, 1) or not isinstance(response, str) or not isinstance(prompt, str):
            raise UsageError(f"{path}:{i}: need a text 'response', a text 'prompt' and a 'label' of 0 or 1")
        split = row.get("split")
        if split is not None and split not in SPLITS:
            raise UsageError(f"{path}:{i}: split must be one of {', '.join(SPLITS)}, got {split!r}")
        rid = str(row.get("id") or f"row-{i}")
        group = str(row.get("work") or row.get("group") or prompt or rid)
        examples.append(Example(rid, prompt, response, int(label), group, split))
    if not examples:
        raise UsageError(f"{path}: no labelled rows")
    if len({e.id for e in examples}) != len(examples):
        raise UsageError(f"{path}: row ids must be unique")
    return examples


def split_examples(examples: list[Example], heldout_fraction: float | None, seed: int
                   ) -> tuple[list[Example], list[Example]]:
    """(optimisation, held-out) rows: the rows' own `split` when every row has one, else a seeded
    split of the groups with `heldout_fraction` (default 0.3) of them held out.

    Raises:
        UsageError: splits on some rows only, a group (`work`, `group`, else the prompt) with rows in
            both given splits, a fraction given for data that has its own split, a fraction outside
            (0, 1), or a split that would be empty.
    """
    given = [e.split for e in examples]
    if all(given):
        if heldout_fraction is not None:
            raise UsageError("the labelled data has its own 'split' column; drop --heldout-fraction")
        opt = [e for e in examples if e.split == "optimisation"]
        held = [e for e in examples if e.split == "heldout"]
        if shared := sorted({e.group for e in opt} & {e.group for e in held}):
            raise UsageError(f"group {shared[0]!r} has rows in both splits ({len(shared)} such group(s)): a held-out "
                             "text's twin would be optimised on; give every row of a work/group one split")
    elif any(given):
        raise UsageError("some labelled rows have a 'split' and others do not")
    else:
        fraction = 0.3 if heldout_fraction is None else heldout_fraction
        if not 0 < fraction < 1:
            raise UsageError(f"--heldout-fraction must be between 0 and 1, got {fraction}")
        groups = sorted({e.group for e in examples})
        random.Random(derive_seed(seed, "split")).shuffle(groups)
        n_held = min(len(groups) - 1, max(1, round(fraction * len(groups))))
        held_groups = set(groups[:n_held])
        opt = [e for e in examples if e.group not in held_groups]
        held = [e for e in examples if e.group in held_groups]
    if not opt or not held:
        raise UsageError(f"both splits need rows (optimisation: {len(opt)}, held-out: {len(held)}); "
                         "give more groups of rows")
    return opt, held
