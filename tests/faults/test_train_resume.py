"""GRPO killed mid-way resumes from its last complete checkpoint when the same command runs
again: it reaches the same final step, its log history has each step once, and no credential
reaches the trainer's saved args, state or manifest. Tiny settings (3 steps of 8 tokens, a
checkpoint every step, the cheap length reward) on the CPU recipe."""

from __future__ import annotations

import json

import pytest

from tests.conftest import REPO, private_cache
from tests.faults.conftest import PYTHON, cli_env
from tests.faults.kill import kill_and_resume

pytestmark = [pytest.mark.slow, pytest.mark.train]

KEY = "sk-train-0d5e4c1a-secret"
HUB = "hf_hub-9a8b7c6d-secret"


def test_grpo_killed_after_a_checkpoint_resumes_to_the_same_final_step(tmp_path):
    private_cache(tmp_path / "cache")
    out = tmp_path / "run"
    cmd = [PYTHON, "-m", "accelerate.commands.launch", "--config_file", str(REPO / "configs/accelerate/cpu.yaml"),
           str(REPO / "train/grpo.py"), "--config", str(REPO / "configs/grpo/smollm2_cpu.yaml"),
           "--max_steps", "3", "--save_steps", "1", "--save_total_limit", "2", "--max_completion_length", "8",
           "--num_generations", "2", "--per_device_train_batch_size", "2", "--reward_funcs", "length",
           "--reward_weights", "1", "--reward_options", "{}", "--save_merged", "false", "--bf16", "false",
           "--dtype", "float32", "--hub_token", HUB, "--output_dir", str(out)]
    env = cli_env(tmp_path, OPENAI_API_KEY=KEY)
    # killed at a random moment up to 3 s after the first checkpoint is complete
    run = kill_and_resume(cmd, watch=[out / "checkpoint-1" / "trainer_state.json"], kills=1, time_kills=0,
                          jitter=3.0, tear=False, env=env, cwd=REPO, log_dir=tmp_path / "logs", timeout=900)
    assert run.kills == 1 and run.final.returncode == 0, run.final.stderr[-3000:]
    assert "resuming from" in run.final.stderr + run.final.stdout
    state = json.loads((out / "trainer_state.json").read_text())
    steps = [e["step"] for e in state["log_history"] if "loss" in e]
    assert state["global_step"] == 3 and steps == [1, 2, 3]
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-3"]  # the last 2
    streams = run.final.stdout + run.final.stderr + "".join(p.read_text(errors="replace")
                                                             for p in (tmp_path / "logs").iterdir())
    written = [p for p in out.rglob("*") if p.is_file()]
    assert any(p.name == "training_args.bin" for p in written)
    for secret in (KEY, HUB):
        assert secret not in streams
        assert not [p for p in written if secret.encode() in p.read_bytes()], secret
