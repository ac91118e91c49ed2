"""Prompt datasets: SciFi-100's JSON format (aspect -> prompts) and JSONL `{"id","aspect","prompt"}`.

SciFi-100 ids are stable: `<aspect slug>-<1-based index, 2 digits>`, e.g. `strong-voice-03`, so
runs, splits and scores can be joined across machines.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import re
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from generate.common.errors import UsageError
from generate.common.inputs import read_text
from generate.common.manifest import sha256_bytes
from generate.common.paths import CONFIG_DIR, cache_dir

log = logging.getLogger(__name__)

SCIFI100_URL = "https://raw.githubusercontent.com/weiyueli7/llm-review/main/datasets/SciFi/scientific_writing.json"
NAMED = {"default": CONFIG_DIR / "datasets" / "default.jsonl"}


@dataclass(frozen=True)
class Task:
    id: str
    aspect: str
    prompt: str


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def parse_scifi(data: object, source: str) -> list[Task]:
    if not isinstance(data, dict) or not data:
        raise UsageError(f"{source}: expected a JSON object of aspect -> list of prompts")
    tasks = []
    for aspect, prompts in data.items():
        if not isinstance(prompts, list):
            raise UsageError(f"{source}: aspect {aspect!r} must map to a list of prompts")
        for i, prompt in enumerate(prompts, 1):
            tasks.append(Task(f"{slug(aspect)}-{i:02d}", str(aspect), prompt))
    return tasks


def parse_jsonl(text: str, source: str) -> list[Task]:
    tasks = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            tasks.append(Task(str(row["id"]), str(row.get("aspect", "")), row["prompt"]))
        except (json.JSONDecodeError, KeyError, TypeError):
            raise UsageError(f"{source}:{n}: expected a JSON object with id, aspect and prompt") from None
    return tasks


def validate(tasks: list[Task], source: str) -> list[Task]:
    if not tasks:
        raise UsageError(f"{source}: the dataset has no prompts")
    seen = set()
    for t in tasks:
        if not isinstance(t.prompt, str) or not t.prompt.strip():
            raise UsageError(f"{source}: prompt {t.id!r} is empty")
        if t.id in seen:
            raise UsageError(f"{source}: duplicate prompt id {t.id!r}")
        seen.add(t.id)
    return tasks


def load_file(path: Path) -> list[Task]:
    if not path.exists():
        raise UsageError(f"dataset not found: {path}")
    text = read_text(path, "dataset")
    if path.suffix == ".jsonl":
        return validate(parse_jsonl(text, str(path)), str(path))
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
    return validate(parse_scifi(data, str(path)), str(path))


def resolve_scifi100() -> Path:
    """A local copy (`SCIFI100_PATH`), else a cached download from the authors' repository."""
    env = os.environ.get("SCIFI100_PATH")
    if env:
        return Path(env)
    cached = cache_dir("datasets") / "scifi100.json"
    if cached.is_file():
        return cached
    url = os.environ.get("SCIFI100_URL", SCIFI100_URL)
    try:
        with urllib.request.urlopen(url, timeout=20) as resp:  # noqa: S310 - fixed https URL
            data = resp.read()
        parse_scifi(json.loads(data), url)
    except (OSError, ValueError, UsageError) as exc:
        raise UsageError(f"scifi100: no local copy (set SCIFI100_PATH or pass a path) and the download "
                         f"from {url} failed ({type(exc).__name__})") from None
    cached.write_bytes(data)
    log.info("downloaded SciFi-100 to %s", cached)
    return cached


def spread_over_aspects(tasks: list[Task], n: int | None) -> list[Task]:
    """The first `n` prompts taking the aspects in turn: the first of each aspect, then the second...

    SciFi-100 lists its prompts aspect by aspect, so its first few prompts would all test one
    aspect; a small evaluation subset should cover as many aspects as it can. `None`: all. A
    negative `n` is refused (as a slice it would keep all but the last few).
    """
    if n is not None and n < 0:
        raise ValueError(f"a negative number of prompts: {n}")
    by_aspect: dict[str, list[Task]] = {}
    for task in tasks:
        by_aspect.setdefault(task.aspect, []).append(task)
    order = [t for row in itertools.zip_longest(*by_aspect.values()) for t in row if t is not None]
    return order if n is None else order[:n]


def dataset_path(spec: str | Path) -> Path:
    """The file a dataset name (`default`, `scifi100`) or path stands for."""
    spec_str = str(spec)
    if spec_str == "scifi100":
        return resolve_scifi100()
    return NAMED.get(spec_str, Path(spec_str))


def load_dataset(spec: str | Path) -> list[Task]:
    """Load a dataset by name (`default`, `scifi100`) or path (.json SciFi format, .jsonl)."""
    return load_file(dataset_path(spec))


def dataset_sha256(spec: str | Path) -> str:
    """SHA-256 of the dataset file's bytes (for a name, of the file it resolves to): what a
    comparison checks to know two runs were given the same prompts."""
    return sha256_bytes(dataset_path(spec).read_bytes())


def check_dataset(spec: str) -> None:
    """Refuse a dataset that cannot be loaded: a config's declared check (`generate.common.ranges`),
    so a misspelt `--dataset` stops a command before it writes a manifest."""
    load_dataset(spec)
