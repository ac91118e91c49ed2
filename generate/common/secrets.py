"""Keeping credentials out of everything a run writes or prints.

Two defences, because neither alone is enough. By name: config values and command-line flags
whose name looks like a credential (`api_key`, `--api-key`, `token`, ...) are replaced before a
manifest is written (`redact`, `redact_argv`). By value: the secrets a command was given (through
the environment, a flag or its `--config` file; `find_secrets`) are cut out of any text that
might carry them verbatim (`scrub`): error messages, a server's error body that echoes our
request headers, log lines (`ScrubFilter`), every string of a manifest (`scrub_values`).
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

# A bare "key" is not a credential name: metric catalogs and call journals have `key` fields, and
# redacting them broke every comparison read from a manifest. Compound names (`api_key`,
# `openai_key`) are.
SECRET_KEY = re.compile(r"(^|_)(api_?key|token|secret|password|authorization)$|.+_key$", re.I)
REDACTED = "<redacted>"
MIN_SECRET = 6  # shorter values ("EMPTY", "1") are placeholders, and scrubbing them would mangle text


def is_secret_name(name: str) -> bool:
    """Whether a config key, flag or environment variable name denotes a credential."""
    return bool(SECRET_KEY.search(name.lstrip("-").replace("-", "_")))


def redact(value: Any) -> Any:
    """Drop anything that looks like a credential, recursively: secrets never reach manifests."""
    if isinstance(value, dict):
        return {k: (REDACTED if is_secret_name(str(k)) and v else redact(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


def redact_argv(argv: Sequence[str]) -> list[str]:
    """The command line with the value of every credential flag (`--api-key X`, `--api_key=X`) masked."""
    out: list[str] = []
    mask_next = False
    for arg in argv:
        if mask_next:
            out.append(REDACTED)
            mask_next = False
            continue
        flag, eq, _ = arg.partition("=")
        if arg.startswith("--") and is_secret_name(flag):
            if eq:
                out.append(f"{flag}={REDACTED}")
            else:
                out.append(arg)
                mask_next = True
            continue
        out.append(arg)
    return out


def find_secrets(argv: Sequence[str] = (), environ: Mapping[str, str] | None = None) -> list[str]:
    """Every credential a command was given: values of credential flags, of environment variables
    named like credentials, and of credential keys in the `--config` YAML file (at any depth, so a
    nested `reward_options: {judge: {api_key: ...}}` counts too). Longest first, for `scrub`."""
    found: set[str] = set()
    for name, value in (environ or {}).items():
        if is_secret_name(name):
            found.add(value)
    args = list(argv)
    for i, arg in enumerate(args):
        flag, eq, value = arg.partition("=")
        if not arg.startswith("--"):
            continue
        if not eq:
            value = args[i + 1] if i + 1 < len(args) else ""
        if is_secret_name(flag):
            found.add(value)
        elif flag == "--config" and value:
            found.update(_config_secrets(Path(value)))
        elif value.startswith("{"):  # a JSON option (e.g. --reward_options '{"judge": {"api_key": ...}}')
            found.update(_nested_secrets(_json(value)))
    return sorted((s for s in found if isinstance(s, str) and len(s) >= MIN_SECRET), key=len, reverse=True)


def scrub(text: str, secrets: Iterable[str]) -> str:
    """`text` with every occurrence of a secret replaced by `<redacted>`."""
    for secret in secrets:
        if secret and len(secret) >= MIN_SECRET:
            text = text.replace(secret, REDACTED)
    return text


def scrub_values(value: Any, secrets: Iterable[str]) -> Any:
    """`value` (JSON-like) with `scrub` applied to every string in it, keys included."""
    secrets = list(secrets)
    if isinstance(value, str):
        return scrub(value, secrets)
    if isinstance(value, dict):
        return {scrub_values(k, secrets): scrub_values(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [scrub_values(v, secrets) for v in value]
    return value


class ScrubFilter(logging.Filter):
    """A handler filter that removes the given secrets from every record it lets through."""

    def __init__(self, secrets: Iterable[str]):
        super().__init__()
        self.secrets = list(secrets)

    def filter(self, record: logging.LogRecord) -> bool:
        if self.secrets:
            message = record.getMessage()
            clean = scrub(message, self.secrets)
            if record.exc_info and record.exc_text is None:
                record.exc_text = logging.Formatter().formatException(record.exc_info)
            if record.exc_text:
                record.exc_text = scrub(record.exc_text, self.secrets)
            if clean != message or record.args:
                record.msg, record.args = clean, None
        return True


def _config_secrets(path: Path) -> set[str]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return set()  # the command itself reports an unreadable config
    return _nested_secrets(data)


def _nested_secrets(value: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(value, dict):
        for k, v in value.items():
            if is_secret_name(str(k)) and isinstance(v, str):
                found.add(v)
            elif isinstance(v, str) and v.startswith("{"):
                found |= _nested_secrets(_json(v))
            else:
                found |= _nested_secrets(v)
    elif isinstance(value, list):
        for v in value:
            found |= _nested_secrets(v)
    return found


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None
