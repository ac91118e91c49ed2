"""ICC(A,1), Bland-Altman and Pearson r against hand-computed values, and the alignment CLI."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from eval.alignment import agreement, bland_altman, icc_a1, main, pearson_r
from generate.common.cli import run_cli

HUMAN = [1.0, 2.0, 3.0, 4.0]
JUDGE = [2.0, 2.0, 4.0, 5.0]


def test_icc_a1_by_hand() -> None:
    # Score matrix rows (human, judge): (1,2) (2,2) (3,4) (4,5); N = 4, k = 2.
    # Row means 1.5, 2, 3.5, 4.5; column means 2.5, 3.25; grand mean 23/8 = 2.875.
    ms_r = 2 / 3 * ((1.5 - 2.875) ** 2 + (2 - 2.875) ** 2 + (3.5 - 2.875) ** 2 + (4.5 - 2.875) ** 2)
    ms_c = 4 / 1 * ((2.5 - 2.875) ** 2 + (3.25 - 2.875) ** 2)
    # Residuals x - row - col + grand are ±0.125 in rows 1, 3, 4 and ±0.375 in row 2.
    ms_e = (6 * 0.125**2 + 2 * 0.375**2) / 3
    assert (ms_r, ms_c, ms_e) == pytest.approx((91 / 24, 1.125, 0.125))
    expected = (ms_r - ms_e) / (ms_r + (3 * 2 - 4) / 4 * ms_e + 2 / 4 * ms_c)
    assert expected == pytest.approx(44 / 53)
    assert icc_a1(HUMAN, JUDGE) == pytest.approx(44 / 53, rel=1e-12)


def test_icc_separates_agreement_from_correlation() -> None:
    scores = [1.0, 2.5, 3.0, 4.5]
    assert icc_a1(scores, scores) == pytest.approx(1.0)
    shifted = [s + 1.0 for s in scores]
    assert pearson_r(scores, shifted) == pytest.approx(1.0)
    assert icc_a1(scores, shifted) < 0.9


def test_bland_altman_by_hand() -> None:
    # Differences judge - human: 1, 0, 1, 1 -> mean 0.75, sample SD sqrt(0.75 / 3) = 0.5.
    bias, low, high = bland_altman(HUMAN, JUDGE)
    assert (bias, low, high) == pytest.approx((0.75, 0.75 - 1.96 * 0.5, 0.75 + 1.96 * 0.5), rel=1e-12)


def test_pearson_by_hand_and_scipy() -> None:
    # Centred human -1.5, -0.5, 0.5, 1.5; centred judge -1.25, -1.25, 0.75, 1.75.
    expected = 5.5 / math.sqrt(5 * 6.75)
    assert pearson_r(HUMAN, JUDGE) == pytest.approx(expected, rel=1e-12)
    rng = np.random.default_rng(0)
    h, s = rng.uniform(0, 5, size=30), rng.uniform(0, 5, size=30)
    assert pearson_r(h, s) == pytest.approx(stats.pearsonr(h, s).statistic, rel=1e-10)


def test_undefined_statistics_are_nan() -> None:
    result = agreement([3.0, 3.0, 3.0], [3.0, 3.0, 3.0])
    assert math.isnan(result.icc_a1) and math.isnan(result.pearson_r)
    assert (result.bias, result.loa_low, result.loa_high, result.n) == (0.0, 0.0, 0.0, 3)


@pytest.mark.parametrize(("human", "judge"), [([1.0], [2.0]), ([1.0, 2.0], [1.0])])
def test_rejects_too_few_or_unpaired(human: list[float], judge: list[float]) -> None:
    with pytest.raises(ValueError):
        agreement(human, judge)


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "ratings.csv"
    path.write_text(text, encoding="utf-8")
    return path


GOOD = "story_id,aspect,human,judge\n" + "".join(
    f"s{i},Character Depth,{h},{j}\n" for i, (h, j) in enumerate(zip(HUMAN, JUDGE, strict=True))
) + "s0,World,3,3\ns1,World,3,3\n"


def test_cli_writes_table_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out" / "alignment.json"
    assert main(["--ratings", str(_write(tmp_path, GOOD)), "--out", str(out)]) == 0
    table = capsys.readouterr().out
    assert "Character Depth" in table and "0.830" in table
    result = json.loads(out.read_text())
    assert list(result) == ["Character Depth", "World"]
    depth = result["Character Depth"]
    assert depth["icc_a1"] == pytest.approx(44 / 53) and depth["n"] == 4
    assert depth["bias"] == pytest.approx(0.75) and depth["loa_high"] == pytest.approx(1.73)
    assert result["World"]["pearson_r"] is None and result["World"]["icc_a1"] is None


def test_module_entry_point(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "eval.alignment", "--ratings", str(_write(tmp_path, GOOD))],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Character Depth" in done.stdout


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, "not found"),
        ("story_id,aspect,human\ns1,A,3\n", "missing column(s) judge"),
        ("story_id,aspect,human,judge\ns1,A,3,x\ns2,A,3,4\n", "'x' is not a number"),
        ("story_id,aspect,human,judge\ns1,A,3,\ns2,A,3,4\n", "is not a number"),
        ("story_id,aspect,human,judge\ns1,A,nan,3\ns2,A,3,4\n", "not a finite number"),
        ("story_id,aspect,human,judge\ns1,A,3,4\ns2,A,3,4\ns1,B,3,4\n", "aspect 'B' has 1 story"),
        ("story_id,aspect,human,judge\ns1,A,3,4\ns1,A,2,4\n", "rated twice"),
        ("story_id,aspect,human,judge\n", "no ratings"),
        ("", "missing column(s)"),
    ],
    ids=[
        "missing-file", "missing-column", "non-numeric", "empty-value", "nan", "one-story", "duplicate", "no-rows",
        "empty",
    ],
)
def test_cli_bad_input_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str | None, message: str
) -> None:
    path = tmp_path / "missing.csv" if text is None else _write(tmp_path, text)
    with pytest.raises(SystemExit) as exit_info:
        run_cli(main, ["--ratings", str(path)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and message in err
