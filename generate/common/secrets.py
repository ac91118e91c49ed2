"""Keeping credentials out of everything a run writes or prints.

Two defences, because neither alone is enough. By name: config values and command-line flags
whose name looks like a credential (`api_key`, `--api-key`, `token`, ...) are replaced before a
manifest is written (`redact`, `redact_argv`). By value: the secrets a command was given (through
the environment, a flag or its `--config` file; `find_secrets`) are cut out of any text that
might carry them verbatim (`scrub`): error messages, a server's error body that echoes our
request headers, log lines (`ScrubFilter`), every string of a manifest (`scrub_values`).

A credential can also hide inside a value whose name says nothing: a server URL that carries it
(`https://user:KEY@host/v1`, `...?api_key=KEY`). Its userinfo and credential-named query values are
secrets too (`url_secrets`), masked wherever a URL is recorded (`redact`, `redact_argv`,
`redact_url`). And what no list can know, a credential header a server echoes back (`Authorization:
Basic ...` carries the URL's credentials base64-encoded), `scrub` masks by its shape.
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
# What a URL may carry a credential in: its userinfo (`scheme://user:password@`), and query values
# named like one (`?api_key=`, `?token=`; `key` too: a URL's `key` is an API key, e.g. Google's).
_URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)(?P<userinfo>[^/?#@\s]+)@")
_QUERY_PARAM = re.compile(r"(?P<sep>[?&;])(?P<name>[^=&;#\s]+)=(?P<value>[^&;#\s]*)")
# A credential header as a server's error body may quote our request back: `authorization: Bearer
# sk-...`, `'Authorization': 'Basic dXNlcjprZXk='` (a Python dict), `"x-api-key":"..."` (JSON).
_AUTH_HEADER = re.compile(r"(?P<name>\b(?:proxy-)?authorization|\b(?:x-)?api-key)(?P<sep>[\"']?\s*[:=]\s*[\"']?)"
                          r"(?P<scheme>(?:Bearer|Basic|Token|Digest)\s+)?(?P<value>[^\s\"',;]{%d,})" % MIN_SECRET, re.I)


def is_secret_name(name: str) -> bool:
    """Whether a config key, flag or environment variable name denotes a credential."""
    return bool(SECRET_KEY.search(name.lstrip("-").replace("-", "_")))


def _secret_query_name(name: str) -> bool:
    return name.lower() == "key" or is_secret_name(name)


def url_secrets(text: str) -> set[str]:
    """The credentials a URL (or any text holding URLs) carries: the password of its userinfo (the
    user name where there is no password: `https://KEY@host`), and its credential-named query values."""
    found: set[str] = set()
    if "://" not in text:
        return found
    for match in _URL_USERINFO.finditer(text):
        user, colon, password = match["userinfo"].partition(":")
        found.add(password if colon and password else user)
    for match in _QUERY_PARAM.finditer(text):
        if _secret_query_name(match["name"]) and match["value"]:
            found.add(match["value"])
    return found


def redact_url(text: str) -> str:
    """`text` with the credentials of every URL in it masked: `https://<redacted>@host/v1?api_key=<redacted>`."""
    if "://" not in text:
        return text
    text = _URL_USERINFO.sub(lambda m: f"{m['scheme']}{REDACTED}@", text)
    return _QUERY_PARAM.sub(lambda m: f"{m['sep']}{m['name']}={REDACTED}"
                            if _secret_query_name(m["name"]) and m["value"] else m[0], text)


def redact(value: Any) -> Any:
    """Drop anything that looks like a credential, recursively: secrets never reach manifests. By
    name (`api_key: ...`), and inside URLs whatever their name (`base_url: https://u:KEY@host`)."""
    if isinstance(value, dict):
        return {k: (REDACTED if is_secret_name(str(k)) and v else redact(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    if isinstance(value, str):
        return redact_url(value)
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
        out.append(redact_url(arg))
    return out


def find_secrets(argv: Sequence[str] = (), environ: Mapping[str, str] | None = None) -> list[str]:
    """Every credential a command was given: values of credential flags, of environment variables
    named like credentials, and of credential keys in the `--config` YAML file (at any depth, so a
    nested `reward_options: {judge: {api_key: ...}}` counts too); and the credentials any of them
    carries in a URL (`--base-url https://u:KEY@host`, OPENAI_BASE_URL, a config's `base_url`:
    `url_secrets`). Longest first, for `scrub`."""
    found: set[str] = set()
    for name, value in (environ or {}).items():
        if is_secret_name(name):
            found.add(value)
        found |= url_secrets(value)
    args = list(argv)
    for i, arg in enumerate(args):
        found |= url_secrets(arg)
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
    """`text` with every occurrence of a secret replaced by `<redacted>`; and, whatever the list
    holds, the credentials of any URL in it (`redact_url`) and the value of any credential header
    (`authorization: Bearer ...`, `Basic ...`: a server's error body may quote our request back)."""
    for secret in secrets:
        if secret and len(secret) >= MIN_SECRET:
            text = text.replace(secret, REDACTED)
    return _AUTH_HEADER.sub(lambda m: f"{m['name']}{m['sep']}{m['scheme'] or ''}{REDACTED}", redact_url(text))


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
    """A handler filter that removes the given secrets from every record it lets through, and, with
    or without them, what `scrub` masks by its shape (URL credentials, authorization values)."""

    def __init__(self, secrets: Iterable[str]):
        super().__init__()
        self.secrets = list(secrets)

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = scrub(message, self.secrets)
        if record.exc_info and record.exc_text is None:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = scrub(record.exc_text, self.secrets)
        if clean != message:
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
            elif isinstance(v, str):
                found |= url_secrets(v)
            else:
                found |= _nested_secrets(v)
    elif isinstance(value, list):
        for v in value:
            found |= _nested_secrets(v)
    elif isinstance(value, str):
        found |= url_secrets(value)
    return found


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None
