"""What the GPU pack carries is exactly what the tests here ran with, and its calls fit the device tool.

`scripts/gpu_pack.py` packs our pinned wheels for a lent GPU machine. Its versions come from the
environment that packs, checked against pyproject.toml's pins, and the wheel folder it keeps
between packs may hold an earlier pin's wheel that must not travel."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("gpu_pack", REPO / "scripts" / "gpu_pack.py")
gpu_pack = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_pack)


def test_the_carried_versions_are_the_installed_ones_and_equal_pyproject_pins():
    declared = gpu_pack.declared_pins()
    carried = gpu_pack.pins()
    assert carried["transformers"] == declared["transformers"] == metadata.version("transformers")
    assert carried["deepspeed"] == declared["deepspeed"]
    assert carried["datasets"] == metadata.version("datasets")  # pinned by a range: the installed one travels
    assert set(carried) >= {"trl", "peft", "gguf", "dill", "multiprocess", "pydantic-core"}


def test_an_environment_out_of_step_with_pyproject_is_refused():
    stale = {"transformers": "5.0.0"}.get
    with pytest.raises(gpu_pack.PackError, match="transformers 5.0.0 is installed but pyproject.toml pins 5.23"):
        gpu_pack.pins(("transformers",), declared={"transformers": "5.23.0"}, installed=lambda n: stale(n))
    with pytest.raises(gpu_pack.PackError, match="not-a-package is not installed"):
        gpu_pack.pins(("not-a-package",), declared={})


def test_only_the_wanted_version_of_each_wheel_travels(tmp_path):
    for name in ("transformers-5.22.0-py3-none-any.whl", "transformers-5.23.0-py3-none-any.whl",
                 "deepspeed-0.19.7-py3-none-any.whl", "deepspeed-0.19.8-py3-none-any.whl",
                 "pydantic_core-2.50.5-cp312-cp312-manylinux2014_x86_64.whl"):
        (tmp_path / name).write_bytes(b"")
    chosen = gpu_pack.select(tmp_path, {"transformers": "5.23.0", "deepspeed": "0.19.8", "pydantic-core": "2.50.5"})
    assert [w.name for w in chosen] == ["deepspeed-0.19.8-py3-none-any.whl",
                                        "pydantic_core-2.50.5-cp312-cp312-manylinux2014_x86_64.whl",
                                        "transformers-5.23.0-py3-none-any.whl"]
    with pytest.raises(gpu_pack.PackError, match=r"no wheel in .* for trl==1\.16\.0"):
        gpu_pack.select(tmp_path, {"transformers": "5.23.0", "trl": "1.16.0"})


def test_a_pack_without_a_corpus_is_one_error_line_and_exit_2(tmp_path):
    proc = subprocess.run([sys.executable, str(REPO / "scripts" / "gpu_pack.py"), "--out", str(tmp_path),
                           "--reference-dir", str(tmp_path / "nowhere")], capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().startswith("error:") and len(proc.stderr.strip().splitlines()) == 1


def test_the_device_calls_stash_each_part_and_the_last_runs_the_check_within_the_call_limit():
    calls = gpu_pack.device_calls(4)
    assert [c.count(".device/call") for c in calls] == [2, 2, 2, 2]  # carried, then copied to the stash
    assert all("gpu_run.sh" not in c and "timeout_s=120" in c for c in calls[:3])
    assert "timeout_s=600" in calls[3] and "GPU_CALL_LIMIT=600 bash scripts/gpu_run.sh /root/stash" in calls[3]
    assert all(len(c.split('command="')[1]) < 2000 for c in calls)  # the device tool's command limit


def test_calls_txt_says_how_to_see_a_lost_stash_when_to_shorten_the_last_call_and_to_give_back():
    """The stash outlives a call only while the machine stays warm: a reply with warm: false after
    the first call means the earlier parts are gone, and the calls after it would spend the loan."""
    notes = gpu_pack.CALL_NOTES
    assert "warm: false" in notes and "start again from call 1" in notes
    assert "budget_left_s under 660" in notes and "GPU_CALL_LIMIT to budget_left_s - 60" in notes
    assert "give_back" in notes
