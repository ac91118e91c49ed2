"""The CPU recipe's precision follows the CPU: bf16 where it is native, float32 where it would be
emulated (several times slower, same results up to rounding)."""

from __future__ import annotations

import pytest
from trl import GRPOConfig, ModelConfig, TrlParser

from tests.train.conftest import REPO
from train import grpo

RECIPE = ["--config", str(REPO / "configs" / "grpo" / "smollm2_cpu.yaml"), "--output_dir", "unused"]


@pytest.mark.parametrize("native", [True, False])
def test_bf16_becomes_float32_only_without_native_bf16(monkeypatch, native):
    monkeypatch.setattr(grpo, "cpu_supports_bf16", lambda: native)
    parser = TrlParser((grpo.ScriptArguments, GRPOConfig, ModelConfig))
    _, training, model = grpo.parse(parser, RECIPE)
    assert training.bf16 is native and training.mixed_precision == ("bf16" if native else "no")
    assert model.dtype == ("bfloat16" if native else "float32")


def test_an_explicit_float32_config_is_left_alone(monkeypatch):
    monkeypatch.setattr(grpo, "cpu_supports_bf16", lambda: False)
    parser = TrlParser((grpo.ScriptArguments, GRPOConfig, ModelConfig))
    args = parser.parse_args_and_config([*RECIPE, "--bf16", "false", "--dtype", "float32"])
    assert grpo.cpu_precision(args[1], args[2]) == []
