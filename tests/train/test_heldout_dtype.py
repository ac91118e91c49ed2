"""`review-lab heldout` samples hf models in float32, also where the training ran in bf16, and why
(`train/heldout.py`'s module docstring): a trained writer is its merged model, whose LoRA update is
mostly smaller than bf16's rounding step, so loading it in bf16 would hand back (nearly) the base."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from train import heldout


def test_hf_models_sample_in_float32_whatever_the_training_dtype(monkeypatch):
    loaded = []

    class Model:
        def generate(self, requests, desc=None):
            return [SimpleNamespace(text="Ice sang.") for _ in requests]

        def close(self):
            pass

    monkeypatch.setattr(heldout, "load_model", lambda spec, **options: loaded.append((spec, options)) or Model())
    tasks = [SimpleNamespace(id="p", prompt="Write.")]
    decoding = {"max_completion_length": 8, "temperature": 1.0, "top_p": 1.0, "seed": 0}
    for spec in ("smollm2-135m-instruct", "hf:runs/grpo/smollm2_cpu/merged", "openai:gpt-4o-mini"):
        heldout.write_stories(spec, tasks, 1, decoding)
    assert [options.get("dtype") for _, options in loaded] == ["float32", "float32", None]  # a server picks its own
    assert heldout.SAMPLING_DTYPE == "float32"


def test_a_merged_update_of_training_size_survives_in_float32_and_rounds_away_in_bf16(tmp_path):
    """A tiny real model with bf16 weights (as SmolLM2's are) and a LoRA adapter whose update is
    0.13% of the weights it changes (the median of the CPU recipe's 40-step run), merged by the
    training's own export."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from train.model import export_merged, resolve_model_path

    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path("smollm2-135m-instruct"))
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    base = LlamaForCausalLM(config).to(torch.bfloat16).to(torch.float32)  # bf16-exact weights
    base.save_pretrained(tmp_path / "base")
    tokenizer.save_pretrained(tmp_path / "base")

    model = get_peft_model(base, LoraConfig(r=4, lora_alpha=4, target_modules=["q_proj"], init_lora_weights=False))
    layer = model.base_model.model.model.layers[0].self_attn.q_proj
    weight = layer.base_layer.weight.detach()
    delta = layer.lora_B["default"].weight @ layer.lora_A["default"].weight
    scale = 0.0013 / (delta.abs() / weight.abs()).median()
    with torch.no_grad():
        layer.lora_B["default"].weight.mul_(scale)
    run = tmp_path / "run"
    model.save_pretrained(run)
    tokenizer.save_pretrained(run)
    merged = export_merged(run, str(tmp_path / "base"))

    def q_weight(dtype):
        lm = AutoModelForCausalLM.from_pretrained(merged, dtype=dtype)
        return lm.model.layers[0].self_attn.q_proj.weight.detach().float()

    update = q_weight(torch.float32) - weight
    assert (update != 0).float().mean() > 0.99  # float32 holds the whole update
    assert (update.abs() / weight.abs()).median() == pytest.approx(0.0013, rel=0.05)
    in_bf16 = q_weight(torch.bfloat16) - weight
    assert (in_bf16 == 0).float().mean() > 0.5  # most of the changed weights are the base's again
    assert (in_bf16 - update).norm() / update.norm() > 0.5  # what is left is not the update
