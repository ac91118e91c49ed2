"""The prepared GPU run reads its parts' outputs right and tells a failed or skipped part apart.

The run itself needs a lent GPU (`scripts/gpu_check.py`; `--smoke` runs every part tiny on a CPU);
here its parsing, projection and table are checked on the outputs its parts write."""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("gpu_check", REPO / "scripts" / "gpu_check.py")
gpu_check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_check)

ENGINES_LOG = """machine: x, 16 cores, avx512; NVIDIA H200 (torch 2.11.0); model in bfloat16
raw ceiling: generate() on 48 x 128 tokens: 9000.0 tokens/s
fast: review, 20 prompts, 420 calls, 84,000 completion + 500,000 prompt tokens: 141.0 s, 8.51 stories/min, 595.7 completion tokens/s, runner efficiency 0.07
static: review, 20 prompts, 420 calls, 84,000 completion + 500,000 prompt tokens: 12.0 s, 100.0 stories/min, 7000.0 completion tokens/s, runner efficiency 0.78
static decode: CUDA graphs
ratio static/fast (completion tokens per second): 11.75x
"""


def test_engine_rates_and_ratios_are_read_from_bench_engines_lines():
    r = gpu_check.engines_result(ENGINES_LOG)
    assert r == {"tokens_per_s": {"fast": 595.7, "static": 7000.0}, "ratios": {"static/fast": 11.75},
                 "static_decode": "CUDA graphs"}
    assert gpu_check.summary("engines", r) == ("fast 596 tok/s, static 7,000 tok/s; static/fast 11.8x; "
                                               "static decode: CUDA graphs")


def test_grpo_steps_per_minute_leave_the_warm_up_step_out(tmp_path):
    history = [{"timing/step_s": 30.0, "reward": 0.5, "timing/rewards_share": 0.5, "timing/reward/judge_s": 15.0},
               {"timing/step_s": 10.0, "reward": 0.6, "timing/rewards_share": 0.2, "timing/reward/judge_s": 2.0},
               {"timing/step_s": 20.0, "reward": 0.7, "timing/rewards_share": 0.4, "timing/reward/judge_s": 4.0},
               {"train_runtime": 60.0}]
    (tmp_path / "trainer_state.json").write_text(json.dumps({"log_history": history}))
    r = gpu_check.grpo_result(tmp_path)
    assert r["steps"] == 3 and r["step_s"] == 15.0 and r["steps_per_min"] == 4.0 and r["first_step_s"] == 30.0
    assert r["reward"] == [0.5, 0.6, 0.7] and r["rewards_share"] == 0.3 and r["reward_shares"] == {"judge": 0.2}
    assert gpu_check.grpo_result(tmp_path / "missing") == {}


def test_the_benchmark_sample_is_projected_to_a_hundred_prompts():
    assert gpu_check.benchmark_result(120.0, 20) == {"sample_prompts": 20, "seconds": 120.0, "projected_full_min": 10.0}


def test_the_table_says_why_a_part_failed_or_was_skipped():
    results = {"parts": {"zero2": {"rc": 1, "seconds": 3.0, "why": "ImportError: deepspeed ops"},
                         "grpo_paged": {"skipped": "12 s of the budget left"}}}
    text = gpu_check.table(results)
    assert "| zero2 | failed (1): ImportError: deepspeed ops | 3.0 |" in text
    assert "| grpo_paged | skipped: 12 s of the budget left | |" in text
    assert gpu_check.why("ok\nRuntimeError: CUDA error: out of memory\nbye") == "RuntimeError: CUDA error: out of memory"
    launcher = "error: reward_options for unselected reward(s) x\nsubprocess.CalledProcessError: Command [...]"
    assert gpu_check.why(launcher) == "error: reward_options for unselected reward(s) x"


def test_deepspeed_runs_only_on_a_gpu_and_every_part_uses_the_gpu_recipe(tmp_path):
    gpu = {name: cmd for name, cmd, _ in gpu_check.parts(tmp_path, smoke=False, scifi100="scifi100")}
    smoke = {name: cmd for name, cmd, _ in gpu_check.parts(tmp_path, smoke=True, scifi100=None)}
    assert set(gpu) - set(smoke) == {"zero2"} and "configs/accelerate/zero2.yaml" in gpu["zero2"]
    assert all("configs/grpo/smollm2_gpu.yaml" in gpu[p] for p in ("grpo_generate", "grpo_paged", "zero2"))
    assert "--use_transformers_continuous_batching" in gpu["grpo_paged"]
    assert gpu["engines"][gpu["engines"].index("--prompts") + 1] == "20"
    assert "--use_cpu" in smoke["grpo_generate"] and "--use_cpu" not in gpu["grpo_generate"]


def test_a_part_stopped_by_its_time_limit_keeps_what_it_measured(tmp_path):
    """A loan is short: the paths bench_engines finished and the steps GRPO printed still count."""
    cut = ENGINES_LOG.split("ratio ")[0]
    assert gpu_check.engines_result(cut)["ratios"] == {"static/fast": 11.75}
    assert gpu_check.engines_result(cut.split("static:")[0])["ratios"] == {}
    printed = ("  0%|  | 0/4 [00:00<?, ?it/s]{'loss': '6.557e-07', 'reward': '0.5', 'timing/step_s': '30', "
               "'timing/rewards_share': '0.5', 'timing/reward/judge_s': '15', 'note': 'x'}\n"
               "{'loss': '0.01', 'reward': '0.7', 'timing/step_s': '10', 'timing/rewards_share': '0.2', "
               "'timing/reward/judge_s': '2'}\n{'loss': broken\n")
    r = gpu_check.grpo_result(tmp_path / "no_state_written", printed)
    assert r["steps"] == 2 and r["step_s"] == 10.0 and r["first_step_s"] == 30.0 and r["reward"] == [0.5, 0.7]
    assert r["reward_shares"] == {"judge": 0.2}
    row = gpu_check.table({"parts": {"grpo_generate": {"rc": "timeout", "seconds": 150.0, "why": "x", **r}}})
    assert "failed (timeout): x; before that: 2 steps, 10.0 s/step" in row


def test_the_alternative_generation_mode_runs_last_so_a_short_budget_skips_it_first(tmp_path):
    names = [name for name, _, _ in gpu_check.parts(tmp_path, smoke=False, scifi100=None)]
    assert names == ["static", "engines", "grpo_generate", "zero2", "benchmark", "grpo_paged"]


def test_the_static_checks_verdict_is_read_and_a_failed_check_says_what_it_found():
    line = ("static check: graph == eager in 14/16 rows (2,100 tokens); first differing step per row: 1, 1; "
            "padded prefill vs each prompt alone in float32, 16 prompts: max rel err 5.0e-07 in float32 (tolerance "
            "1e-03), 1.3e-02 in bfloat16 (tolerance 5e-02) -> FAILED")
    r = {"rc": 1, "seconds": 20.0, "why": "x", **gpu_check.static_result(f"loading\n{line}\n")}
    assert r["check"] == line.removeprefix("static check: ")
    assert "failed (1): x; before that: graph == eager in 14/16 rows" in gpu_check.table({"parts": {"static": r}})
    assert gpu_check.static_result("Traceback ...") == {}


def test_a_part_killed_at_its_limit_leaves_no_child_running(tmp_path):
    """A launcher's child (the trainer under `accelerate launch`) dies with it, not left on the card."""
    pid_file = tmp_path / "child.pid"
    code = ("import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
            f"open({str(pid_file)!r}, 'w').write(str(p.pid)); print('started', flush=True); time.sleep(60)")
    r = gpu_check.run_part("launcher", [sys.executable, "-c", code], 3, tmp_path)
    assert r["rc"] == "timeout" and "started" in r["log"] and r["seconds"] < 20
    child = int(pid_file.read_text())
    time.sleep(0.2)
    state = Path(f"/proc/{child}/stat")
    assert not state.exists() or state.read_text().split()[2] == "Z"  # gone, or a zombie awaiting its reaper


def test_the_results_are_written_after_every_part_so_a_stopped_call_keeps_them(tmp_path, monkeypatch):
    calls = []

    def fake_run(name, cmd, seconds, out):  # the parts' own commands are not what is tested here
        calls.append(name)
        if name == "grpo_generate":  # by then the file holds the parts before it
            done = json.loads((out / "gpu_check.json").read_text())["parts"]
            assert list(done) == ["static", "engines"]
        return {"rc": 0, "seconds": 1.0, "log": ""}

    monkeypatch.setattr(gpu_check, "run_part", fake_run)
    assert gpu_check.main(["--smoke", "--out", str(tmp_path), "--only", "static", "engines", "grpo_generate"]) == 0
    assert calls == ["static", "engines", "grpo_generate"]
    assert "| grpo_generate | no steps logged | 1.0 |" in (tmp_path / "gpu_check.md").read_text()



def test_out_holds_the_results_and_one_log_per_part_and_nothing_else(tmp_path, monkeypatch):
    """The device tool brings back at most 8 files of at most 16 MiB from $OUT. The parts write
    trainer folders (adapters, a merged model of hundreds of MiB) and the benchmark's runs: under
    $OUT they would crowd out, or stop, the results coming back. They go to `--work`, where an
    earlier run's folder is removed first (the benchmark would resume it and time nothing)."""
    out = tmp_path / "out"
    (tmp_path / "out-work" / "benchmark").mkdir(parents=True)
    (tmp_path / "out-work" / "benchmark" / "stories.jsonl").write_text("{}")

    def fake_run(name, cmd, seconds, log_dir):  # writes where the real part would
        (log_dir / f"{name}.log").write_text("")
        for flag in ("--out", "--output_dir"):
            if flag in cmd:
                target = Path(cmd[cmd.index(flag) + 1])
                assert not target.exists(), target
                target.mkdir(parents=True)
                (target / "model.safetensors").write_bytes(b"0")
        return {"rc": 0, "seconds": 1.0, "log": ""}

    monkeypatch.setattr(gpu_check, "run_part", fake_run)
    gpu_check.main(["--smoke", "--out", str(out)])
    names = [name for name, _, _ in gpu_check.parts(tmp_path / "w", smoke=True, scifi100=None)]
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == sorted(
        ["gpu_check.json", "gpu_check.md", *(f"{n}.log" for n in names)])
    assert list((tmp_path / "out-work").iterdir())  # beside it, by default
    gpu = gpu_check.parts(tmp_path / "w", smoke=False, scifi100="scifi100")
    assert len(gpu) + 2 <= gpu_check.RETURNED_FILES
    grpo = [cmd for _, cmd, _ in gpu if "train/grpo.py" in cmd]
    assert len(grpo) == 3 and all(cmd[cmd.index("--save_merged") + 1] == "false" for cmd in grpo)
    with pytest.raises(SystemExit):
        gpu_check.main(["--smoke", "--out", str(out), "--work", str(out / "work")])


def test_a_trainer_state_cut_short_by_the_kill_falls_back_to_the_printed_steps(tmp_path):
    """The trainer writes trainer_state.json last: a part killed at its limit during that write
    leaves it cut short, and the steps it printed still count."""
    (tmp_path / "trainer_state.json").write_text('{"log_history": [{"timing/step_s": 3')
    printed = "{'loss': '0.01', 'reward': '0.7', 'timing/step_s': '10', 'timing/reward/judge_s': '2'}\n"
    r = gpu_check.grpo_result(tmp_path, printed)
    assert r["steps"] == 1 and r["step_s"] == 10.0 and r["reward_shares"] == {"judge": 0.2}


def test_an_output_that_cannot_be_read_is_reported_and_the_parts_after_it_still_run(tmp_path, monkeypatch):
    """Reading a part's output must never end the run: the loan is not repeated for a parse."""
    calls = []

    def fake_run(name, cmd, seconds, out):
        calls.append(name)
        return {"rc": 0, "seconds": 1.0, "log": ""}

    def garbled(log):
        raise ValueError("garbled")

    monkeypatch.setattr(gpu_check, "run_part", fake_run)
    monkeypatch.setattr(gpu_check, "engines_result", garbled)
    gpu_check.main(["--smoke", "--out", str(tmp_path / "out"), "--only", "engines", "grpo_generate"])
    assert calls == ["engines", "grpo_generate"]
    table = (tmp_path / "out" / "gpu_check.md").read_text()
    assert "| engines | its output could not be read: ValueError: garbled | 1.0 |" in table
    assert "| grpo_generate | no steps logged | 1.0 |" in table
