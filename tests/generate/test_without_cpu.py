"""The CPU-only folder (`generate/backends/cpu/`) is optional: with its import blocked
(`REVIEW_LAB_BLOCK_CPU=1`, read by tests/conftest.py) the hf backend runs transformers' SDPA path
and generation and evaluation still pass their real-model tests."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import BLOCK_CPU, REPO

blocked = pytest.mark.skipif(os.environ.get(BLOCK_CPU) != "1", reason=f"runs only with {BLOCK_CPU}=1")

# A representative subset: a real-model Review generation, then an evaluation with the embedded judge.
REAL_MODEL_TESTS = [
    "tests/generate/test_e2e_real_model.py::test_framework_end_to_end[review]",
    "tests/generate/test_without_cpu.py::test_the_hf_backend_runs_the_sdpa_path_without_the_folder",
    "tests/eval/test_eval_cli.py::test_cli_end_to_end_with_the_real_default_model",
]


@blocked
def test_the_hf_backend_runs_the_sdpa_path_without_the_folder(default_model):
    from generate.backends.hf import backend

    with pytest.raises(ImportError, match="blocked"):
        import generate.backends.cpu  # noqa: F401
    assert backend._cpu_folder() is None
    described = default_model.backend.describe()
    assert described["path"] == "fast"
    assert {k: described[k] for k in ("packed_linears", "decode_attention", "decode_step")} == {
        "packed_linears": False, "decode_attention": "sdpa", "decode_step": "transformers"}


@pytest.mark.slow
def test_generation_and_evaluation_pass_with_the_cpu_folder_blocked():
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "slow or not slow",
                           *REAL_MODEL_TESTS],
                          cwd=REPO, env={**os.environ, BLOCK_CPU: "1"}, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert f"{len(REAL_MODEL_TESTS)} passed" in proc.stdout, proc.stdout[-2000:]
