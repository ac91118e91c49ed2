"""Do two runs hold the same stories and scores, timing aside? The check behind "nothing changes
in the numbers": run `review-lab benchmark` (same seed, corpus and settings) before and after a
change, then

    python scripts/same_outputs.py runs/before runs/after

A directory is one run (`stories.jsonl`, scores in `eval/scores.jsonl`) or a benchmark's folder
of runs. Every story text and every other field of stories and scores is compared, except the
fields that time a run. Prints one line per run and exits 0 when everything is equal, 1 when
something differs (the first differences are named), 2 on bad input.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from generate.common.cli import run_cli
from generate.common.errors import UsageError
from generate.common.jsonl import read_jsonl

TIMING = {"seconds", "time", "created", "elapsed", "waited_s"}


def runs(root: Path) -> dict[str, Path]:
    """{name: run dir}: the directory itself when it is a run, else its sub-directories that are."""
    if (root / "stories.jsonl").is_file():
        return {".": root}
    found = {d.name: d for d in sorted(root.iterdir()) if (d / "stories.jsonl").is_file()} if root.is_dir() else {}
    if not found:
        raise UsageError(f"{root}: no stories.jsonl in it or in its sub-directories")
    return found


def by_id(path: Path) -> dict[str, dict]:
    return {r["story_id"]: r for r in read_jsonl(path)} if path.is_file() else {}


def fields(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted path, leaf value) of a record, timing fields left out."""
    if isinstance(value, dict):
        for k, v in value.items():
            if k not in TIMING:
                yield from fields(v, f"{prefix}.{k}" if prefix else k)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from fields(v, f"{prefix}[{i}]")
    else:
        yield prefix, value


def equal(a: Any, b: Any) -> bool:
    both_nan = isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b)
    return both_nan or (a == b and type(a) is type(b))


def differences(a: dict[str, dict], b: dict[str, dict]) -> list[str]:
    """What differs between two files' records, by story id then field."""
    out = [f"{sid}: only in the {'first' if sid in a else 'second'}" for sid in sorted(set(a) ^ set(b))]
    for sid in sorted(set(a) & set(b)):
        fa, fb = dict(fields(a[sid])), dict(fields(b[sid]))
        out += [f"{sid}: {key}" for key in sorted(set(fa) | set(fb))
                if key not in fa or key not in fb or not equal(fa[key], fb[key])]
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python scripts/same_outputs.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("first", type=Path)
    ap.add_argument("second", type=Path)
    args = ap.parse_args(argv)
    first, second = runs(args.first), runs(args.second)
    if set(first) != set(second):
        raise UsageError(f"the two hold different runs: {sorted(first)} and {sorted(second)}")
    same = True
    for name in first:
        stories = differences(by_id(first[name] / "stories.jsonl"), by_id(second[name] / "stories.jsonl"))
        scores = differences(by_id(first[name] / "eval" / "scores.jsonl"), by_id(second[name] / "eval" / "scores.jsonl"))
        n = len(by_id(first[name] / "stories.jsonl"))
        print(f"{name}: {n} stories, {len(stories)} story fields and {len(scores)} score fields differ"
              + "".join(f"\n  {d}" for d in (stories + scores)[:8]))
        same = same and not stories and not scores
    print("same outputs" if same else "outputs differ")
    return 0 if same else 1


if __name__ == "__main__":
    run_cli(main)
