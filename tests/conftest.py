"""Shared fixtures: offline guard, the bundled default model (loaded once), shared data paths."""

from __future__ import annotations

import importlib.abc
import ipaddress
import os
import socket
import sys
from pathlib import Path

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "2")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ["HF_HUB_OFFLINE"] = "1"

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO.parent / "shared"
SCIFI100 = Path(os.environ.get("SCIFI100_PATH", SHARED / "data" / "scifi100.json"))
BLOCK_CPU = "REVIEW_LAB_BLOCK_CPU"  # =1: run as if generate/backends/cpu/ could not be imported


class _NoCpuFolder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "generate.backends.cpu" or name.startswith("generate.backends.cpu."):
            raise ImportError(f"{name} is blocked ({BLOCK_CPU}=1)")
        return None


if os.environ.get(BLOCK_CPU) == "1":  # tests/generate/test_without_cpu.py; the folder's own tests are left out
    sys.meta_path.insert(0, _NoCpuFolder())
    collect_ignore = [f"generate/test_{name}.py" for name in ("attention", "fused", "packed")]


def _loopback(address) -> bool:
    if isinstance(address, tuple) and address:
        host = address[0]
        if host in ("localhost",):
            return True
        try:
            return ipaddress.ip_address(host).is_loopback
        except ValueError:
            return False
    return True  # unix sockets


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    """Tests may only talk to loopback: anything else is a bug (or a hidden hub download)."""
    real_connect = socket.socket.connect

    def guarded(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6) and not _loopback(address):
            raise OSError(f"network disabled in tests: {address}")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)


def private_cache(root: Path) -> Path:
    """`root` as a private SCIFI_CACHE_DIR (its own corpora, embeddings, fetched files) that shares
    the bundled model converted once in the real cache: converting it again costs ~20 s a test."""
    from generate.backends.embedded import smollm2_dir

    models = smollm2_dir().parent
    root.mkdir(parents=True, exist_ok=True)
    (root / "models").symlink_to(models, target_is_directory=True)
    return root


@pytest.fixture(autouse=True)
def _no_private_conversion(request):
    """Refuse a test that converted the bundled model into its own cache (`private_cache` shares it)."""
    tmp = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    yield
    if tmp is None:
        return
    from generate.backends.embedded import NAME

    for top, _, files in os.walk(tmp):  # links are not followed: a shared models/ is not looked into
        if Path(top).name == "models" and f"{NAME}.lock" in files:  # taken to convert, or to find it converted
            pytest.fail(f"the test converted the bundled model into {top} (~20 s): give it "
                        "tests.conftest.private_cache(...) as its SCIFI_CACHE_DIR")


@pytest.fixture(scope="session")
def default_model():
    """The embedded SmolLM2-135M writer, loaded once per test session."""
    from generate.backends import load_model

    model = load_model("smollm2-135m-instruct", batch_size=16)
    yield model
    model.close()


@pytest.fixture(scope="session")
def scifi100_path() -> Path:
    if not SCIFI100.is_file():
        pytest.skip(f"SciFi-100 not found at {SCIFI100}")
    return SCIFI100


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory):
    """llama.cpp's OpenAI-compatible server on loopback, serving the same GGUF as the default writer."""
    pytest.importorskip("llama_cpp.server", reason="llama-cpp-python[server] is part of the test extra")
    from generate.backends.embedded import smollm2_gguf_path
    from tests.servers import LlamaServer

    server = LlamaServer(smollm2_gguf_path(), tmp_path_factory.mktemp("llama") / "server.log")
    server.start()
    yield server
    server.stop()
