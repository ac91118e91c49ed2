"""The merge reloads the base the adapter was trained on: the same revision and trust_remote_code as
the training load (`train.model.init_kwargs`), for the writer and for the reward model. Checked at
the level of the loader's arguments: a real hub revision would need the network."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from trl import ModelConfig


class Loaded:
    """Stands in for a model, an adapter and a tokenizer: records what it was loaded with."""

    calls: list[tuple[str, dict]] = []
    config = SimpleNamespace()
    pad_token_id = 0

    @classmethod
    def from_pretrained(cls, *args, **kwargs):
        cls.calls.append((str(args[-1]), kwargs))
        return cls()

    def merge_and_unload(self):
        return self

    def save_pretrained(self, path):
        pass


@pytest.fixture
def loaders(monkeypatch):
    import peft
    import transformers

    Loaded.calls = []
    for name in ("AutoModelForCausalLM", "AutoModelForSequenceClassification", "AutoTokenizer"):
        monkeypatch.setattr(transformers, name, Loaded)
    monkeypatch.setattr(peft, "PeftModel", Loaded)
    return Loaded.calls


def training(model_init_kwargs=None, trust_remote_code=True):
    return SimpleNamespace(trust_remote_code=trust_remote_code, model_init_kwargs=model_init_kwargs)


def test_init_kwargs_are_the_model_config_with_the_recipes_own_winning():
    from train.model import base_identity, init_kwargs

    kwargs = init_kwargs(ModelConfig(model_revision="abc123", dtype="bfloat16"), training())
    assert kwargs["revision"] == "abc123" and kwargs["trust_remote_code"] is True and kwargs["dtype"] == "bfloat16"
    assert init_kwargs(ModelConfig(model_revision="abc123"), training({"revision": "v2"}))["revision"] == "v2"
    assert base_identity(kwargs) == {"revision": "abc123", "trust_remote_code": True}  # not dtype, not attention


@pytest.mark.parametrize("module", ["train.model", "train.reward_model"])
def test_the_merge_reloads_the_base_with_the_training_revision(tmp_path, loaders, module):
    import importlib

    (tmp_path / "adapter_config.json").write_text("{}")
    kwargs = {"dtype": "bfloat16", "revision": "abc123", "trust_remote_code": True, "attn_implementation": None}
    importlib.import_module(module).export_merged(tmp_path, "org/base", kwargs)
    base = [kw for path, kw in loaders if path == "org/base"]
    assert len(base) == 1 and base[0]["revision"] == "abc123" and base[0]["trust_remote_code"] is True
    assert str(base[0]["dtype"]) == "torch.float32"  # the merge is float32 whatever the training dtype
