"""Every writer a story compares samples in one dtype, float32 (`train.model.SAMPLING_DTYPE`): a tuned
writer is its merged model, whose LoRA update is mostly below bf16's rounding step, so in the hf
backend's `auto` dtype (bf16 on a CPU with native bf16) it would be mostly the base again and the
story's tuned rows would understate training. `--dtype` is every command's hf option, and `auto`
says so where it loads float32 weights in a narrower dtype."""

from __future__ import annotations

import json

import pytest
import torch

from generate.backends import backend_options
from generate.backends.hf.device import pick_dtype, rounding_warning, stored_dtype
from generate.common.config import build_config, parse_config
from generate.common.errors import UsageError
from generate.runner import RunConfig
from train import story as story_module
from train.model import SAMPLING_DTYPE
from train.story_config import StoryConfig


def test_the_story_generates_base_and_tuned_writers_in_the_sampling_dtype(tmp_path, monkeypatch):
    loaded: list[tuple[str, str]] = []

    def load_model(self):  # the writer as the run's config would load it, never loaded here
        loaded.append((self.model, self.dtype))
        return None

    monkeypatch.setattr(RunConfig, "load_model", load_model)
    monkeypatch.setattr(story_module, "Runner", lambda run, model: None)
    monkeypatch.setattr(story_module, "run_collecting", lambda runner, failed: None)
    story = story_module.Story(StoryConfig(out=str(tmp_path / "story")))
    story.prompts_file.parent.mkdir(parents=True)
    story.prompts_file.write_text('{"id": "p", "aspect": "a", "prompt": "Write."}\n')
    for name, writer in (("base", story_module.BASE), ("tuned", "hf:/runs/grpo/merged")):
        story.generate(name, writer)
    assert loaded == [(story_module.BASE, "float32"), ("hf:/runs/grpo/merged", "float32")]
    assert SAMPLING_DTYPE == "float32"
    recorded = json.loads((tmp_path / "story" / "tuned" / "step.json").read_text())
    assert recorded["inputs"]["dtype"] == "float32"  # stories made in another dtype are redone


def test_dtype_reaches_the_hf_backend_alone():
    assert backend_options("hf:/m", batch_size=4, dtype="float32") == {"batch_size": 4, "dtype": "float32"}
    assert backend_options("smollm2-135m-instruct", batch_size=4)["dtype"] == "auto"
    assert "dtype" not in backend_options("openai:gpt-4o-mini", batch_size=4, dtype="float32")
    assert backend_options("vllm:m", batch_size=4, dtype="float32") == {}


def test_an_unknown_dtype_is_refused_by_the_config_and_the_backend():
    with pytest.raises(UsageError, match="--dtype: 'float8' is not one of: auto, float32, bfloat16, float16"):
        parse_config(RunConfig, ["--dtype", "float8"])
    assert build_config(RunConfig, None, {"dtype": "bfloat16"}).dtype == "bfloat16"
    with pytest.raises(UsageError, match="unknown dtype 'float8'"):
        pick_dtype("float8", "cpu")
    assert pick_dtype("float32", "cpu") == torch.float32


def write_config(directory, dtype):
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps({"dtype": dtype}))
    return str(directory)


def test_auto_warns_where_float32_weights_load_narrower(tmp_path):
    merged = write_config(tmp_path / "merged", "float32")
    base = write_config(tmp_path / "base", "bfloat16")
    assert stored_dtype(merged) == "float32" and stored_dtype(str(tmp_path / "none")) is None
    assert "--dtype float32 keeps it" in rounding_warning(merged, "auto", torch.bfloat16)
    assert rounding_warning(merged, "bfloat16", torch.bfloat16) is None  # the user chose it
    assert rounding_warning(merged, "auto", torch.float32) is None  # nothing rounds
    assert rounding_warning(base, "auto", torch.bfloat16) is None  # nothing to lose
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text("{not json")
    assert stored_dtype(str(tmp_path / "broken")) is None  # loading the model says what is wrong
