"""Resuming a job in its output directory without ever mixing two runs' results.

Generation, evaluation, curation and the principle optimisation resume the same way: the same
command invoked again finishes what the first left, and an invocation whose results would differ
from what the directory holds is refused before it writes anything, with one `UsageError` line
naming what differs and telling to use another `--out`.

1. `resumable(out, noun)` takes the output lock (one writer per directory, before anything is
   read) and reads the manifest the earlier invocations left (`recorded`).
2. The refusals:
   - `check_settings`: the options that change results (each job's RESULT_KEYS) against the
     manifest's `config`;
   - `check_texts`: the text behind each id (prompts, templates, stories, labelled data) against
     the hashes the manifest recorded by id: an id whose text changed is refused, a new id is not;
   - `check_provenance`: what the options do not show (a backend's numerics, the judge, the
     reference corpus, retrieval sources). Jobs check it only when work is left: results already
     on disk mix with nothing, and finding it out may load a model.
   A value the manifest lacks (recorded before it existed) is unknown, not a change: manifests
   of older versions keep resuming (e.g. ones holding the removed `engine` option). The other way
   round, a value this invocation cannot tell (a server's model listing not read this time) stays
   in the manifest as recorded (`keep_known`, `check_backend`), so a later invocation is still
   compared with it.
3. `done`: the ids the append-only JSONL already holds, after cutting a torn last line.
4. The manifest: `needs_manifest` says when to write it (when work starts, which keeps the
   earlier invocations in `earlier_invocations`; a finished run invoked again keeps the manifest
   that made it); `record` adds to it after every chunk, so an interruption loses the chunk in
   flight, not the account of the chunks before.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from generate.common.errors import UsageError
from generate.common.inputs import read_json
from generate.common.jsonl import read_jsonl, repair_jsonl, rewrite_jsonl
from generate.common.lock import output_lock
from generate.common.manifest import sha256_text, update_manifest

log = logging.getLogger(__name__)

ADVICE = "use another --out to start a new one"
# The hf backend computes in bf16 or float32 by the CPU, and a model retrained into the same
# directory has other weights: resumed on another machine or after retraining, the same command
# would sample from other logits and mix both in one output.
NUMERICS_ADVICE = ("finish with the same weights on a machine like the first (the backend picks its dtype "
                   "and kernels by the machine) and the same $REVIEW_LAB_HF_PATH, or use another --out")


def settings_of(keys: Sequence[str]) -> Callable[[dict], dict]:
    """The result settings of a config (as a manifest records it): the values of `keys` it has."""
    return lambda config: {k: config[k] for k in keys if k in config}


def text_hashes(texts: dict[str, str]) -> dict[str, str]:
    """Name -> SHA-256 of each text, as manifests record them (`template_sha256`)."""
    return {name: sha256_text(text) for name, text in texts.items()}


def difference(before: Any, now: Any, path: str = "") -> str | None:
    """The first difference as "<path> <before> then, <now> now", or None. Dicts are compared key
    by key, and a key on one side only is unknown to the other (recorded by another version), not
    a change; any other value compares whole (None included: "no reference corpus" is a value)."""
    if isinstance(before, dict) and isinstance(now, dict):
        for key in now:
            if key in before:
                found = difference(before[key], now[key], f"{path}.{key}" if path else str(key))
                if found:
                    return found
        return None
    if before == now:
        return None
    return f"{path + ' ' if path else ''}{before!r} then, {now!r} now"


def keep_known(before: Any, now: Any) -> Any:
    """`now`, plus what `before` recorded that `now` does not tell (a key on its side only, which
    `difference` takes as unknown): an invocation that cannot tell a value does not erase it from
    the manifest, else the next one would be compared with nothing."""
    if isinstance(before, dict) and isinstance(now, dict):
        return {**before, **{key: keep_known(before.get(key), value) for key, value in now.items()}}
    return now


def done_ids(path: str | Path, key: str, *, group_size: str | None = None) -> set[str]:
    """The `key` values of the records an append-only JSONL holds, after cutting a torn last line.

    With `group_size`, records come in groups that share `key` (a prompt's stories, each saying
    how many the group has): only whole groups are done, and a group cut short by a kill mid-write
    is dropped from the file, so that it is redone whole.
    """
    repair_jsonl(path)
    rows = list(read_jsonl(path))
    if group_size is None:
        return {r[key] for r in rows}
    counts = Counter(r[key] for r in rows)
    whole = {r[key] for r in rows if r[group_size] == counts[r[key]]}
    if len(whole) != len(counts):
        kept = [r for r in rows if r[key] in whole]
        log.warning("%s: dropping %d records of groups interrupted mid-write", path, len(rows) - len(kept))
        rewrite_jsonl(path, kept)
    return whole


class Resumable:
    """An output directory a job resumes in, and what its manifest recorded before this invocation.

    Args:
        out: the output directory.
        noun: what the directory holds, as the refusals name it ("a run", "an evaluation").
    """

    def __init__(self, out: str | Path, noun: str):
        self.out, self.noun = Path(out), noun
        path = self.out / "manifest.json"
        self.recorded: dict[str, Any] = read_json(path, "manifest") if path.is_file() else {}

    def refuse(self, made_with: str, advice: str = ADVICE) -> None:
        raise UsageError(f"{self.out} holds {self.noun} made with {made_with}; {advice}")

    def check_settings(self, config: dict[str, Any], settings: Callable[[dict], dict]) -> None:
        """Refuse result settings other than the recorded ones; `settings` picks them from a config."""
        before, now = settings(self.recorded.get("config") or {}), settings(config)
        for key, value in now.items():
            if key in before and before[key] != value:
                self.refuse(f"{key}={before[key]!r} (now {value!r})")

    def check_texts(self, field: str, hashes: dict[str, str]) -> None:
        """Refuse another text behind an id the manifest's `field` ({id: SHA-256}) recorded."""
        before = self.recorded.get(field) or {}
        changed = sorted(name for name, h in hashes.items() if before.get(name, h) != h)
        if changed:
            self.refuse(f"another text for {', '.join(changed)} ({field})")

    def check_provenance(self, what: str, before: Any, now: Any, advice: str = ADVICE) -> None:
        """Refuse `now` where it differs from what the manifest recorded (`before`, per `difference`)."""
        found = difference(before, now)
        if found:
            self.refuse(f"another {what} ({found})", advice)

    def check_backend(self, backend: Any) -> dict[str, Any]:
        """Refuse a backend whose numerics (or sampling) differ from the manifest's `backend`; returns
        the description to record: its `describe()`, keeping the recorded numerics it cannot tell now
        (an OpenAI-compatible server whose listing was not read this time, `generate.backends.served`)."""
        before = self.recorded.get("backend") or {}
        self.check_provenance("backend numerics", before, backend.resume_numerics(), NUMERICS_ADVICE)
        recorded = {k: before[k] for k in backend.NUMERICS if k in before}
        now = backend.numerics()
        kept = keep_known(recorded, now)
        if kept != now:
            log.warning("%s: the backend cannot tell its %s now; the manifest keeps the recorded ones, which this "
                        "invocation's calls were not checked against", self.out,
                        ", ".join(k for k in kept if kept[k] != now.get(k)))
        return {**backend.describe(), **kept}

    def done(self, name: str, key: str, *, group_size: str | None = None) -> set[str]:
        """`done_ids` of the directory's file `name`."""
        return done_ids(self.out / name, key, group_size=group_size)

    def needs_manifest(self, todo: Collection) -> bool:
        """Write the manifest when work starts, or when none exists; a finished run invoked again
        keeps the one that describes the invocations that made it."""
        return bool(todo) or not self.recorded

    def record(self, fields: dict[str, Any]) -> None:
        """Add `fields` to the manifest (after every chunk, and at the end of the invocation)."""
        update_manifest(self.out, fields)


@contextmanager
def resumable(out: str | Path, noun: str) -> Iterator[Resumable]:
    """Hold the output lock of `out` for the block and read its manifest under it.

    Raises:
        OutputLocked: another live process writes to `out`.
    """
    with output_lock(out):
        yield Resumable(out, noun)
