"""Reading the `stories.jsonl` files that generation writes, strictly.

Evaluation input is checked up front, line by line: a malformed line, a missing field or a
story_id seen twice would otherwise surface as a wrong table hours later (duplicates would also
break resuming, which skips stories by id).
"""

from __future__ import annotations

from pathlib import Path

from generate.common.errors import UsageError
from generate.common.jsonl import parse_object

REQUIRED = {"story_id": str, "prompt_id": str, "framework": str, "prompt": str, "text": str}
# Fields the evaluation reads when present (null allowed): checked here too, since a wrong type
# would otherwise fail deep inside scoring (the first draft is `drafts[0]`, the writer a model spec).
OPTIONAL = {"model": str, "agent": str}
# Texts the scorers sanitise (a lone surrogate becomes U+FFFD, with a note). Every other string is
# copied or hashed as it is, and one that cannot be written as UTF-8 would fail after the scoring.
SANITISED = {"text", "drafts", "feedback"}


def load_stories(paths: list[str | Path]) -> list[dict]:
    """All stories of the given files, in file order.

    Raises:
        UsageError: no file given, a file missing or without stories, a line that is not a JSON
            object with the required fields, or a story_id that occurs twice.
    """
    if not paths:
        raise UsageError("no stories file given (--stories runs/<name>/stories.jsonl)")
    stories: list[dict] = []
    seen: dict[str, str] = {}
    for path in map(Path, paths):
        if not path.is_file():
            raise UsageError(f"stories file not found: {path}")
        rows = list(_read(path))
        if not rows:
            raise UsageError(f"{path}: holds no stories")
        for where, row in rows:
            sid = row["story_id"]
            if sid in seen:
                raise UsageError(f"{where}: story_id {sid!r} already read from {seen[sid]}; "
                                 "evaluate runs that share story ids separately")
            seen[sid] = where
            stories.append(row)
    return stories


def _read(path: Path):
    with open(path, "rb") as fh:  # bytes: a line that is not UTF-8 is named, not a traceback
        for n, raw in enumerate(fh, start=1):
            where = f"{path}:{n}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise UsageError(f"{where}: not UTF-8 text") from None
            if not line.strip():
                continue
            row = parse_object(line, where)
            _check_fields(row, where)
            yield where, row


def _check_fields(row: dict, where: str) -> None:
    for key, kind in REQUIRED.items():
        if not isinstance(row.get(key), kind):
            raise UsageError(f"{where}: field {key!r} missing or not a {kind.__name__}")
    for key, kind in OPTIONAL.items():
        if row.get(key) is not None and not isinstance(row[key], kind):
            raise UsageError(f"{where}: field {key!r} is not a {kind.__name__} (or null)")
    for key, value in row.items():
        if key not in SANITISED and isinstance(value, str) and not _utf8(value):
            raise UsageError(f"{where}: field {key!r} holds an invalid surrogate (not text)")
    drafts = row.get("drafts")
    if drafts is not None and not (isinstance(drafts, list) and all(isinstance(d, str) for d in drafts)):
        raise UsageError(f"{where}: field 'drafts' is not a list of strings (or null)")


def _utf8(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
