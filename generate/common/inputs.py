"""Reading the files a command is given: whatever is wrong with one (missing, a directory, not
UTF-8, not JSON, JSON of the wrong shape) is one `UsageError` naming the file, so one `error:`
line and exit 2 from any command line, never a traceback.

Every reader of a user's YAML, JSON or CSV goes through `read_text` (`config.load_yaml`, the
datasets, `align`'s ratings, a run's manifest); JSONL goes through `jsonl.read_jsonl`, which
names the line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from generate.common.errors import UsageError


def read_text(path: str | Path, what: str = "file") -> str:
    """The UTF-8 text of `path`; `what` names the file in the error ("config file", "dataset").

    Raises:
        UsageError: the file is missing, a directory, unreadable or not UTF-8.
    """
    path = Path(path)
    if path.is_dir():
        raise UsageError(f"{what} {path} is a directory, not a file")
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise UsageError(f"{what} not found: {path}") from None
    except OSError as exc:
        raise UsageError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def read_json(path: str | Path, what: str = "file", kind: type | None = dict) -> Any:
    """The JSON value of `path` (`read_text`'s errors), which must be a `kind` (None: any value).

    Raises:
        UsageError: as `read_text`, or the text is not JSON, or its top level is not a `kind`.
    """
    text = read_text(path, what)
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{path}: not valid JSON ({exc.msg}, line {exc.lineno})") from None
    if kind is not None and not isinstance(value, kind):
        shape = "a JSON object" if kind is dict else "a JSON array" if kind is list else f"a {kind.__name__}"
        raise UsageError(f"{path}: expected {shape}, got {type(value).__name__}")
    return value


def check_file(path: str) -> None:
    """A path option's declared check (`ranges.checked(check_file)`): the file is there, so a
    command that reads it only after loading its model refuses it before."""
    if Path(path).is_dir():
        raise UsageError(f"{path} is a directory, not a file")
    if not Path(path).is_file():
        raise UsageError(f"no such file: {path}")
