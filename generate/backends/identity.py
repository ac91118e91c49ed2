"""What a model is beyond its name, so a model replaced behind the same name is seen: a writer
retrained into the same directory, a judge upgraded with its package. The hf and vLLM backends
record it in their `describe()` (one of their `NUMERICS`), the judge in its fingerprint and
journal keys."""

from __future__ import annotations

from pathlib import Path

from generate.backends.embedded import GGUF_DISTRIBUTION, embedded_dir
from generate.common.fingerprint import directory_hash, package_version

__all__ = ["model_identity"]


def model_identity(name: str) -> dict[str, str]:
    """The package version of the embedded model (its weights ship in that package: its converted
    directory is not hashed), the content hash of a local model directory
    (`generate.common.fingerprint.directory_hash`), nothing for a remote or hub model (only its name
    is known). Hashed once per directory and process while no file in it changes size or time, so
    it costs a walk of the directory after the first call."""
    path = Path(name)
    if path == embedded_dir():
        return {"package": f"{GGUF_DISTRIBUTION} {package_version(GGUF_DISTRIBUTION)}"}
    return {"weights_sha256": directory_hash(path)} if path.is_dir() else {}
