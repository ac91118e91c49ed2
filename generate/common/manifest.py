"""Run manifests: how a result was made (config, versions, commit, seed, template hashes)."""

from __future__ import annotations

import hashlib
import json
import platform
import re
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

PACKAGES = ("torch", "transformers", "trl", "peft", "accelerate", "deepspeed", "vllm", "openai",
            "sentence-transformers", "numpy", "scipy", "llama-cpp-python")
SECRET_KEY = re.compile(r"(^|_)(api_?key|key|token|secret|password|authorization)$", re.I)


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


def redact(value: Any) -> Any:
    """Drop anything that looks like a credential, recursively: secrets never reach manifests."""
    if isinstance(value, dict):
        return {k: ("<redacted>" if SECRET_KEY.search(str(k)) and v else redact(v))
                for k, v in value.items()}
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value


def write_manifest(out_dir: str | Path, *, kind: str, config: dict[str, Any], seed: int | None = None,
                   templates: dict[str, str] | None = None, extra: dict[str, Any] | None = None) -> Path:
    """Write `manifest.json` (overwriting: it describes the latest invocation of the run)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    manifest = {
        "kind": kind,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "command": " ".join(sys.argv),
        "config": redact(config),
        "seed": seed,
        "git_commit": git_commit(),
        "python": platform.python_version(),
        "packages": package_versions(),
        "template_sha256": {name: sha256_text(text) for name, text in sorted((templates or {}).items())},
    }
    if extra:
        manifest.update(redact(extra))
    path = out_dir / "manifest.json"
    path.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path
