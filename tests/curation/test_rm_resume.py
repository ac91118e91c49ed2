"""An interrupted reward-model training resumes from its last checkpoint and ends where the
uninterrupted run ends; a checkpoint made with other settings (or other pairs) is refused; and the
`signals` pipeline re-runs an unfinished reward-model step into its own directory, so the script
finds the checkpoint there instead of training from scratch.

The model is a real one, tiny: a 1-layer Llama with SmolLM2's tokenizer (`save_tiny_reward_model`),
LoRA on its attention as the CPU recipe does, four RewardTrainer steps of one pair each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from transformers import TrainerCallback

from generate.common.errors import UsageError
from tests.curation.fakes import save_tiny_reward_model
from tests.curation.test_real import preference_rows
from tests.curation.test_retrieval_and_pairs import write_jsonl


class Interrupted(Exception):
    """Stands in for a kill right after a checkpoint was written."""


class StopAfterSave(TrainerCallback):
    def __init__(self, step: int):
        self.step = step

    def on_save(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            raise Interrupted


class CountSteps(TrainerCallback):
    def __init__(self):
        self.steps = []

    def on_step_end(self, args, state, control, **kwargs):
        self.steps.append(state.global_step)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rm_resume")
    base = save_tiny_reward_model(tmp / "base") / "merged"
    prefs = write_jsonl(tmp / "preferences.jsonl", preference_rows())
    return tmp, base, prefs


def train(out: Path, base: Path, prefs: Path, monkeypatch, callbacks=(), **overrides):
    """train/reward_model.py's main on fresh arguments (main sets some of them), the trainer given
    `callbacks`."""
    from trl import ModelConfig, RewardConfig

    from train import reward_model

    class Trainer(reward_model.RewardTrainer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            for callback in callbacks:
                self.add_callback(callback)

    monkeypatch.setattr(reward_model, "RewardTrainer", Trainer)
    settings = {"learning_rate": 2e-3, "max_steps": 4, "save_steps": 2, **overrides}
    training = RewardConfig(output_dir=str(out), use_cpu=True, bf16=False, per_device_train_batch_size=1,
                            lr_scheduler_type="cosine", logging_steps=1, save_strategy="steps", report_to="none",
                            gradient_checkpointing=False, max_length=64, seed=0, per_device_eval_batch_size=8,
                            **settings)
    model = ModelConfig(model_name_or_path=str(base), dtype="float32", use_peft=True, lora_task_type="SEQ_CLS",
                        lora_r=2, lora_alpha=4, lora_target_modules=["q_proj", "v_proj"])
    return reward_model.main(reward_model.RMScriptArguments(preferences=[str(prefs)], save_merged=False),
                             training, model)


def weights(out: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(out / "adapter_model.safetensors"))


@pytest.mark.slow
@pytest.mark.train
def test_an_interrupted_reward_model_resumes_from_its_checkpoint_and_ends_as_the_whole_run(setup, monkeypatch):
    import torch

    tmp, base, prefs = setup
    whole = CountSteps()
    train(tmp / "whole", base, prefs, monkeypatch, [whole])
    assert whole.steps == [1, 2, 3, 4]

    with pytest.raises(Interrupted):
        train(tmp / "cut", base, prefs, monkeypatch, [StopAfterSave(2)])
    assert (tmp / "cut" / "checkpoint-2").is_dir() and not (tmp / "cut" / "adapter_model.safetensors").exists()

    resumed = CountSteps()
    train(tmp / "cut", base, prefs, monkeypatch, [resumed])
    assert resumed.steps == [3, 4]  # steps 1 and 2 came from the checkpoint, not trained again
    ends, expected = weights(tmp / "cut"), weights(tmp / "whole")
    assert ends.keys() == expected.keys() and any("score" in k for k in ends)  # the head is restored too
    for key in expected:
        assert torch.allclose(ends[key], expected[key], atol=1e-6), key
    state = json.loads((tmp / "cut" / "trainer_state.json").read_text())
    assert [e["step"] for e in state["log_history"] if "loss" in e] == [1, 2, 3, 4]  # each step logged once


@pytest.mark.slow
@pytest.mark.train
def test_a_checkpoint_made_with_other_settings_or_pairs_is_refused(setup, monkeypatch, tmp_path):
    _, base, _ = setup
    out, prefs = tmp_path / "run", write_jsonl(tmp_path / "preferences.jsonl", preference_rows())
    with pytest.raises(Interrupted):
        train(out, base, prefs, monkeypatch, [StopAfterSave(2)])
    with pytest.raises(UsageError, match=r"holds a run trained with other settings \(training.learning_rate\)"):
        train(out, base, prefs, monkeypatch, learning_rate=1e-3)
    write_jsonl(prefs, preference_rows()[:-1])  # the same file, other pairs
    with pytest.raises(UsageError, match=r"other settings \(script.preferences_sha256\)"):
        train(out, base, prefs, monkeypatch)
    write_jsonl(prefs, preference_rows())
    # How long it trains and how often it saves are no settings of the run: it resumes.
    resumed = CountSteps()
    train(out, base, prefs, monkeypatch, [resumed], max_steps=3, save_steps=3)
    assert resumed.steps == [3]


def test_the_signals_pipeline_resumes_an_unfinished_reward_model_step(tmp_path, monkeypatch):
    """The step's directory (its checkpoint) is kept when the step runs again with the same inputs;
    new pairs redo it from scratch."""
    from train import signals

    seen = []

    def interrupted_then_done(cmd, what):
        out = Path(cmd[cmd.index("--output_dir") + 1])
        seen.append(sorted(p.name for p in out.iterdir()))
        if not (out / "checkpoint-5").exists():
            (out / "checkpoint-5").mkdir()
            raise UsageError("reward model failed; see its log above")
        (out / "metrics.json").write_text("{}")

    monkeypatch.setattr(signals, "run", interrupted_then_done)
    prefs = tmp_path / "preferences.jsonl"
    prefs.write_text("pair 1\n")
    with pytest.raises(UsageError):
        signals.reward_model(tmp_path / "rm", prefs, "configs/rm/smollm2_cpu.yaml")
    signals.reward_model(tmp_path / "rm", prefs, "configs/rm/smollm2_cpu.yaml")
    assert seen == [["step.json"], ["checkpoint-5", "step.json"]]
    prefs.write_text("pair 1\npair 2\n")
    with pytest.raises(UsageError):  # other pairs: a fresh directory, trained from the start
        signals.reward_model(tmp_path / "rm", prefs, "configs/rm/smollm2_cpu.yaml")
    assert seen[-1] == ["step.json"]


def test_the_cpu_recipe_checkpoints():
    import yaml

    from tests.train.conftest import REPO

    recipe = yaml.safe_load((REPO / "configs" / "rm" / "smollm2_cpu.yaml").read_text())
    assert recipe["save_strategy"] == "steps" and recipe["save_steps"] >= 1 and recipe["save_total_limit"] >= 2
