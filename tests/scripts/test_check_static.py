"""The GPU path's correctness check (`scripts/check_static.py`): its comparisons, and on this CPU
the padded-prefill check on the real model, passing as built and failing on a wrong mask."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("check_static", REPO / "scripts" / "check_static.py")
check_static = importlib.util.module_from_spec(spec)
sys.modules["check_static"] = check_static  # its dataclass looks its module up there
spec.loader.exec_module(check_static)


def test_the_first_differing_step_counts_a_length_too():
    assert check_static.first_difference([1, 2, 3], [1, 2, 3]) is None
    assert check_static.first_difference([1, 2, 3], [1, 9, 3]) == 1
    assert check_static.first_difference([1, 2], [1, 2, 3]) == 2
    assert check_static.first_difference([], []) is None


def test_a_nan_is_infinitely_wrong():
    ref = torch.tensor([1.0, 2.0])
    assert check_static.rel_error(torch.tensor([1.0, 2.0]), ref) == 0
    assert check_static.rel_error(torch.tensor([1.0, float("nan")]), ref) == float("inf")
    assert check_static.rel_error(torch.tensor([1.0, 2.2]), ref) == pytest.approx(0.2 / 5 ** 0.5)


@pytest.mark.slow
def test_the_check_passes_the_static_layout_and_fails_a_mask_that_shows_padding(capsys, monkeypatch):
    args = ["--prompts", "3", "--max-new-tokens", "4"]
    assert check_static.main(args) == 0
    out = capsys.readouterr().out
    assert "static check: no CUDA: no graph to check; padded prefill vs each prompt alone" in out and "-> ok" in out
    fp32 = float(out.split("max rel err ")[1].split()[0])
    assert fp32 < 1e-4  # the layout and mask alone: float32 rounding
    right = check_static.static.prefill_mask
    monkeypatch.setattr(check_static.static, "prefill_mask", lambda real, cols: right(torch.ones_like(real), cols))
    assert check_static.main(args) == 1
    assert "-> FAILED" in capsys.readouterr().out
