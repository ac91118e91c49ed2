"""The hf backend as a researcher meets it: which models it refuses at load (one line, not a
traceback mid-run). A one-layer random Llama with SmolLM2's tokenizer stands in for a checkpoint."""

from __future__ import annotations

import pytest

from generate.common.errors import UsageError
from tests.generate.test_model_identity import tiny_model

@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny") / "model"
    tiny_model(path, seed=0)
    return path


def backend(directory, path: str = "fast"):
    from generate.backends.hf import HFBackend

    return HFBackend(str(directory), batch_size=4, dtype="float32", device="cpu", path=path)


def test_a_directory_without_a_model_is_refused_in_one_line(tmp_path):
    """An empty or unrelated directory made the tokenizer raise a ValueError: a traceback, exit 1."""
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "config.json").write_text("{}")
    for directory in (tmp_path / "empty", tmp_path / "notes"):
        directory.mkdir(exist_ok=True)
        with pytest.raises(UsageError, match="cannot load hf model"):
            backend(directory)


def test_a_model_without_a_chat_template_is_refused_at_load(tiny, tmp_path):
    """Every request is rendered with the chat template: a base model failed at its first call,
    with a traceback, after the run had started writing."""
    import shutil

    base = tmp_path / "base"
    shutil.copytree(tiny, base)
    (base / "chat_template.jinja").unlink()
    with pytest.raises(UsageError, match="has no chat template"):
        backend(base)
