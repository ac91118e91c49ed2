"""Run manifests: how a result was made (config, versions, commit, seed, template hashes, machine).

A manifest is replaced atomically (a kill mid-write must not leave a torn manifest, which the
next run reads to check that it may resume) and never holds a credential: config values and
command-line flags named like one are redacted, and the secrets the command was given are cut
out of every string in it (`generate.common.secrets`).

A resumed run is made by several invocations, possibly at other commits or package versions: its
manifest describes the latest, and `earlier_invocations` the ones before it (when, which command,
commit and packages, what each recorded of its faults and memory), so their provenance is kept.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from generate.common import machine
from generate.common.files import make_dir, write_atomic
from generate.common.inputs import read_json
from generate.common.secrets import SECRET_KEY, find_secrets, redact, redact_argv, scrub_values

__all__ = ["SECRET_KEY", "redact", "sha256_bytes", "sha256_text", "update_manifest", "write_manifest"]

PACKAGES = ("torch", "transformers", "trl", "peft", "accelerate", "deepspeed", "vllm", "openai",
            "sentence-transformers", "numpy", "scipy", "llama-cpp-python")


def sha256_bytes(data: bytes) -> str:
    """The one content hash of the project (datasets, prompts, templates, stories files)."""
    return hashlib.sha256(data).hexdigest()


def sha256_text(text: str) -> str:
    return sha256_bytes(text.encode("utf-8"))


def package_versions() -> dict[str, str]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def git_commit() -> str | None:
    root = Path(__file__).resolve().parents[2]
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    if sha.returncode != 0:
        return None
    return sha.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


# This process: writes of one process are one invocation (e.g. a manifest written at a run's start
# and again at its end), those of another process a new one.
PROCESS = f"{os.getpid()}@{time.time():.6f}"
# What describes an invocation in `earlier_invocations`, and what it recorded at its end (`update_manifest`).
INVOCATION = ("process", "created", "command", "git_commit", "python", "packages")
PER_INVOCATION = ("reliability", "peak_rss_gb")


def write_manifest(out_dir: str | Path, *, kind: str, config: dict[str, Any], seed: int | None = None,
                   templates: dict[str, str] | None = None, extra: dict[str, Any] | None = None,
                   name: str = "manifest.json") -> Path:
    """Write `manifest.json`: it describes the latest invocation of the run and keeps the earlier
    ones (`_earlier`). A command whose output is one file in a folder it does not own names its
    manifest after that file (`name`), so that it cannot replace the folder's."""
    out_dir = Path(out_dir)
    make_dir(out_dir)
    manifest = {
        "kind": kind,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": " ".join(redact_argv(sys.argv)),
        "config": redact(config),
        "seed": seed,
        "git_commit": git_commit(),
        "python": platform.python_version(),
        "packages": package_versions(),
        "machine": machine.describe(),
        "template_sha256": {name: sha256_text(text) for name, text in sorted((templates or {}).items())},
    }
    if extra:
        manifest.update(redact(extra))
    earlier = _earlier(out_dir / name, manifest)
    manifest.update(process=PROCESS, **({"earlier_invocations": earlier} if earlier else {}))
    return _write(out_dir / name, manifest)


def _earlier(path: Path, new: dict[str, Any]) -> list[dict[str, Any]]:
    """The earlier invocations of the run `path` describes, before the one writing `new`: the last
    manifest's own, plus that manifest itself where another process wrote it (a manifest of
    another kind describes another run: none)."""
    try:
        old = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if old.get("kind") != new["kind"]:
        return []
    earlier = old.get("earlier_invocations", [])
    if old.get("process") == PROCESS:  # this process writing again (e.g. at a run's start and end)
        return earlier
    return [*earlier, {k: old[k] for k in (*INVOCATION, *PER_INVOCATION) if k in old}]


def recorded(out_dir: str | Path, key: str) -> Any:
    """A field the directory's manifest holds from an earlier invocation (None without one): what a
    resumed run adds its own account to (an evaluation's seconds, a generation's phase costs)."""
    path = Path(out_dir) / "manifest.json"
    return read_json(path, "manifest").get(key) if path.is_file() else None


def update_manifest(out_dir: str | Path, fields: dict[str, Any]) -> Path:
    """Add `fields` to an existing manifest (e.g. the retries a run needed, known at its end)."""
    path = Path(out_dir) / "manifest.json"
    manifest = read_json(path, "manifest") if path.exists() else {}
    manifest.update(redact(fields))
    return _write(path, manifest)


def _write(path: Path, manifest: dict[str, Any]) -> Path:
    manifest = scrub_values(manifest, find_secrets(sys.argv[1:], os.environ))
    write_atomic(path, (json.dumps(manifest, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
    return path
