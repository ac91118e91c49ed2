"""ICC(A,1), Bland-Altman and Pearson r and their confidence intervals against hand-computed and
published values, degenerate data without warnings, and the alignment CLI."""

from __future__ import annotations

import hashlib
import json
import math
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from eval.alignment import (
    Agreement,
    agreement,
    bland_altman,
    bland_altman_intervals,
    icc_a1,
    main,
    pearson_interval,
    pearson_r,
)
from eval.icc import icc_from_mean_squares, icc_interval, mean_squares
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
    ms = mean_squares(np.column_stack([HUMAN, JUDGE]))
    assert (ms.rows, ms.cols, ms.error, ms.n, ms.k) == pytest.approx((91 / 24, 1.125, 0.125, 4, 2), rel=1e-12)


@pytest.mark.parametrize("scores", [[[1.0, 2.0]], [[1.0], [2.0]], [1.0, 2.0]], ids=["one story", "one rater", "1-d"])
def test_mean_squares_refuses_a_matrix_without_degrees_of_freedom(scores) -> None:
    """n - 1 or k - 1 = 0 would divide by zero into NaN mean squares instead of saying why."""
    with pytest.raises(ValueError, match="n, k >= 2"):
        mean_squares(scores)


# Shrout & Fleiss (1979), Table 1: 6 targets (rows) rated by 4 judges (columns).
SHROUT_FLEISS = [[9, 2, 5, 8], [6, 1, 3, 2], [8, 4, 6, 8], [7, 1, 2, 6], [10, 5, 6, 9], [6, 2, 4, 7]]


def test_icc_interval_matches_psych_and_irr_on_shrout_fleiss() -> None:
    # Their Table 2: BMS 11.24, JMS 32.49, EMS 1.02; ICC(2,1) = ICC(A,1) = 0.29. On this table
    # psych::ICC prints ICC2 0.290 [0.019, 0.761] and irr::icc(twoway, agreement, single)
    # "0.019 < ICC < 0.761" (McGraw & Wong's interval, 95%).
    ms = mean_squares(SHROUT_FLEISS)
    assert (ms.rows, ms.cols, ms.error, ms.n, ms.k) == pytest.approx((11.24, 32.49, 1.02, 6, 4), abs=5e-3)
    assert icc_from_mean_squares(ms) == pytest.approx(0.290, abs=5e-4)
    assert icc_interval(ms) == pytest.approx((0.019, 0.761), abs=5e-4)


def test_icc_interval_narrows_with_level_and_stories() -> None:
    ms = mean_squares(SHROUT_FLEISS)
    (low95, high95), (low90, high90) = icc_interval(ms, 0.95), icc_interval(ms, 0.90)
    assert low95 < low90 < icc_from_mean_squares(ms) < high90 < high95
    widths = []
    for copies in (1, 2, 4):  # the same targets rated again: more stories, the same disagreement
        tiled = mean_squares(np.tile(SHROUT_FLEISS, (copies, 1)))
        low, high = icc_interval(tiled)
        assert low < icc_from_mean_squares(tiled) < high
        widths.append(high - low)
    assert widths[0] > widths[1] > widths[2]


@pytest.mark.filterwarnings("error")
def test_icc_interval_on_degenerate_data() -> None:
    assert icc_interval(mean_squares(np.column_stack([HUMAN, HUMAN]))) == (1.0, 1.0)  # perfect agreement
    for human, judge in [([3.0, 3.0, 3.0], [3.0, 3.0, 3.0]),  # every score identical: no ICC
                         ([1.0, 1.0, 1.0], [0.0, 0.0, 0.0])]:  # both raters constant: ICC 0, no spread
        assert all(math.isnan(b) for b in icc_interval(mean_squares(np.column_stack([human, judge]))))
    # A negative estimate on 4 stories: the bare formula gives [-0.2073, -0.2071], which misses the
    # estimate -0.193; that is no interval.
    ms = mean_squares(np.column_stack([[2.5, 2.0, 1.0, 2.5], [0.0, 0.0, 1.0, 0.0]]))
    assert icc_from_mean_squares(ms) == pytest.approx(-0.1928, abs=1e-4)
    assert all(math.isnan(b) for b in icc_interval(ms))
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        icc_interval(ms, 95)


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


def test_bland_altman_intervals_by_hand() -> None:
    # t(0.975, 3 df) = 3.182446 (tables); SE of the bias s / sqrt(n) = 0.25, of each limit
    # sqrt(3 s^2 / n) = sqrt(0.1875) (Bland & Altman 1999).
    t = 3.182446
    bias_ci, low_ci, high_ci = bland_altman_intervals(HUMAN, JUDGE)
    assert bias_ci == pytest.approx((0.75 - t * 0.25, 0.75 + t * 0.25), abs=1e-6)
    half = t * math.sqrt(0.1875)
    assert low_ci == pytest.approx((-0.23 - half, -0.23 + half), abs=1e-6)
    assert high_ci == pytest.approx((1.73 - half, 1.73 + half), abs=1e-6)
    assert bland_altman_intervals(HUMAN, JUDGE, 0.90)[0][0] > bias_ci[0]


@pytest.mark.filterwarnings("error")
def test_bland_altman_intervals_of_equal_differences_have_zero_width() -> None:
    human = [1.0, 2.0, 4.0]
    assert bland_altman_intervals(human, [h + 0.5 for h in human]) == ((0.5, 0.5),) * 3
    assert bland_altman_intervals([1.0, 2.0], [2.0, 3.0]) == ((1.0, 1.0),) * 3  # n = 2, s = 0


def test_pearson_by_hand_and_scipy() -> None:
    # Centred human -1.5, -0.5, 0.5, 1.5; centred judge -1.25, -1.25, 0.75, 1.75.
    expected = 5.5 / math.sqrt(5 * 6.75)
    assert pearson_r(HUMAN, JUDGE) == pytest.approx(expected, rel=1e-12)
    rng = np.random.default_rng(0)
    h, s = rng.uniform(0, 5, size=30), rng.uniform(0, 5, size=30)
    assert pearson_r(h, s) == pytest.approx(stats.pearsonr(h, s).statistic, rel=1e-10)


def test_pearson_interval_is_fisher_z() -> None:
    # n = 4: z = atanh(r) ± 1.959964 / sqrt(n - 3), back through tanh.
    r = 5.5 / math.sqrt(5 * 6.75)
    expected = (math.tanh(math.atanh(r) - 1.959964), math.tanh(math.atanh(r) + 1.959964))
    assert pearson_interval(HUMAN, JUDGE) == pytest.approx(expected, abs=1e-6)
    rng = np.random.default_rng(1)
    h = rng.uniform(0, 5, size=30)
    s = h + rng.normal(0, 1, size=30)
    low, high = pearson_interval(h, s, 0.90)
    se = 1 / math.sqrt(27)
    assert (low, high) == pytest.approx((math.tanh(math.atanh(pearson_r(h, s)) - 1.644854 * se),
                                         math.tanh(math.atanh(pearson_r(h, s)) + 1.644854 * se)), abs=1e-6)


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize(("human", "judge"), [
    ([1.0, 2.0], [2.0, 1.0]),              # n = 2: r = -1, no Fisher z (scipy says [-1, 1])
    ([1.0, 2.0, 3.0], [2.0, 1.0, 4.0]),    # n = 3: standard error 1 / sqrt(0)
    ([3.0, 3.0, 3.0, 3.0], HUMAN),          # constant human consensus: no r (scipy would warn)
    (HUMAN, [4.0, 4.0, 4.0, 4.0]),          # constant judge
])
def test_pearson_interval_undefined_is_nan_without_warnings(human: list[float], judge: list[float]) -> None:
    assert all(math.isnan(b) for b in pearson_interval(human, judge))


def test_pearson_interval_of_a_perfect_line_has_zero_width() -> None:
    assert pearson_interval(HUMAN, [2 * h + 1 for h in HUMAN]) == pytest.approx((1.0, 1.0))


@pytest.mark.filterwarnings("error")
def test_undefined_statistics_are_nan() -> None:
    result = agreement([3.0, 3.0, 3.0], [3.0, 3.0, 3.0])
    assert math.isnan(result.icc_a1) and math.isnan(result.pearson_r)
    assert all(math.isnan(b) for b in result.icc_a1_ci + result.pearson_r_ci)
    assert (result.bias, result.loa_low, result.loa_high, result.n) == (0.0, 0.0, 0.0, 3)
    assert result.bias_ci == result.loa_low_ci == result.loa_high_ci == (0.0, 0.0)


def test_agreement_collects_every_interval_at_its_level() -> None:
    result = agreement(HUMAN, JUDGE, level=0.90)
    assert result.ci_level == 0.90
    assert result.icc_a1_ci == icc_interval(mean_squares(np.column_stack([HUMAN, JUDGE])), 0.90)
    assert result.pearson_r_ci == pearson_interval(HUMAN, JUDGE, 0.90)
    intervals = (result.bias_ci, result.loa_low_ci, result.loa_high_ci)
    assert intervals == bland_altman_intervals(HUMAN, JUDGE, 0.90)
    old_style = Agreement(0.5, 0.1, -1.0, 1.2, 0.6, 10)  # callers that build one from point estimates
    assert math.isnan(old_style.icc_a1_ci[0]) and old_style.ci_level == 0.95


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
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the constant "World" aspect must not warn
        assert main(["--ratings", str(_write(tmp_path, GOOD)), "--out", str(out)]) == 0
    printed = capsys.readouterr()
    assert printed.err == ""
    table = printed.out.splitlines()
    assert table[0].startswith("95% confidence intervals in brackets")
    assert max(len(line) for line in table) <= 100
    assert any(line.split()[3:] == ["0.83", "[-0.08,", "0.99]", "0.95", "[-0.16,", "1.00]"] for line in table)
    assert any(line.split()[3:] == ["+0.75", "[-0.05,", "+1.55]", "-0.23", "[-1.61,", "+1.15]", "+1.73",
                                    "[+0.35,", "+3.11]"] for line in table)
    assert any(line.split() == ["World", "2", "n/a", "n/a"] for line in table)
    result = json.loads(out.read_text())
    assert list(result) == ["Character Depth", "World"]
    depth = result["Character Depth"]
    assert depth["icc_a1"] == pytest.approx(44 / 53) and depth["n"] == 4
    assert depth["bias"] == pytest.approx(0.75) and depth["loa_high"] == pytest.approx(1.73)
    assert depth["bias_ci"] == pytest.approx([0.75 - 3.182446 * 0.25, 0.75 + 3.182446 * 0.25], abs=1e-6)
    assert depth["icc_a1_ci"] == pytest.approx(list(agreement(HUMAN, JUDGE).icc_a1_ci))
    assert depth["ci_level"] == 0.95 and len(depth["pearson_r_ci"]) == 2
    world = result["World"]
    assert world["pearson_r"] is None and world["icc_a1"] is None
    assert world["pearson_r_ci"] == [None, None] and world["icc_a1_ci"] == [None, None]
    assert world["loa_low_ci"] == [0.0, 0.0]


def test_the_bland_altman_plot_shows_each_story_and_the_tables_bias_and_limits(tmp_path: Path) -> None:
    """One panel per aspect: a point per story at (mean, judge - human), the bias and both limits
    as lines at the table's values, their intervals shaded; written beside the JSON."""
    from matplotlib.collections import PathCollection

    from eval.alignment import alignment_table, read_ratings
    from eval.alignment_plot import figure
    from eval.plotting import pyplot

    ratings = read_ratings(_write(tmp_path, GOOD))
    table = alignment_table(ratings)
    fig = figure(ratings, table)
    depth, world = fig.axes[:2]
    assert [ax.get_title() for ax in fig.axes[:2]] == ["Character Depth (n = 4)", "World (n = 2)"]
    points = next(c for c in depth.collections if isinstance(c, PathCollection)).get_offsets()
    assert np.allclose(points, [[1.5, 1.0], [2.0, 0.0], [3.5, 1.0], [4.5, 1.0]])
    a = table["Character Depth"]
    lines = sorted(line.get_ydata()[0] for line in depth.get_lines() if line.get_color() == "tab:red")
    assert lines == pytest.approx(sorted([a.loa_low, a.bias, a.loa_high]))
    shaded = sorted((p.get_y(), p.get_y() + p.get_height()) for p in depth.patches)  # axhspan's rectangles
    assert np.allclose(shaded, sorted([a.loa_low_ci, a.bias_ci, a.loa_high_ci]))
    assert len(fig.axes) == 2  # two aspects: one row of two panels
    pyplot().close(fig)
    out = tmp_path / "human" / "alignment.json"
    assert main(["--ratings", str(_write(tmp_path, GOOD)), "--out", str(out)]) == 0
    assert (out.parent / "alignment_bland_altman.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_json_has_a_manifest_beside_it_and_leaves_the_folder_s_own_alone(tmp_path: Path) -> None:
    ratings = _write(tmp_path, GOOD)
    folder = tmp_path / "human"
    folder.mkdir()
    (folder / "manifest.json").write_text('{"kind": "rating-export"}')  # what `rate export` writes there
    assert main(["--ratings", str(ratings), "--out", str(folder / "alignment.json")]) == 0
    manifest = json.loads((folder / "alignment.manifest.json").read_text())
    assert manifest["kind"] == "alignment" and manifest["config"]["level"] == 0.95
    assert manifest["ratings_sha256"] == hashlib.sha256(ratings.read_bytes()).hexdigest()
    assert json.loads((folder / "manifest.json").read_text()) == {"kind": "rating-export"}


def test_cli_level(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "alignment.json"
    assert main(["--ratings", str(_write(tmp_path, GOOD)), "--out", str(out), "--level", "0.9"]) == 0
    assert capsys.readouterr().out.startswith("90% confidence intervals")
    depth = json.loads(out.read_text())["Character Depth"]
    assert depth["ci_level"] == 0.9
    assert depth["bias_ci"] == pytest.approx(list(agreement(HUMAN, JUDGE, 0.9).bias_ci))
    with pytest.raises(SystemExit) as exit_info:
        run_cli(main, ["--ratings", str(out.with_name("ratings.csv")), "--level", "95"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "argument --level: must be in (0, 1), got 95" in err


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
        ("story_id,aspect,human,judge\ns1,A,3,4\ns1,A,2,4\n", "rated twice"),
        ("story_id,aspect,human,judge\n", "no ratings"),
        ("", "missing column(s)"),
    ],
    ids=[
        "missing-file", "missing-column", "non-numeric", "empty-value", "nan", "duplicate", "no-rows",
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


def test_an_aspect_with_one_story_is_undefined_and_leaves_the_others(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    # A rating export leaves out the stories the judge did not score: one sparsely judged aspect
    # must not cost the other aspects their statistics, nor make the file unreadable.
    text = GOOD + "s0,Ethics,3,4\n"
    out = tmp_path / "alignment.json"
    assert main(["--ratings", str(_write(tmp_path, text)), "--out", str(out)]) == 0
    table = json.loads(out.read_text(encoding="utf-8"))
    assert table["Ethics"]["n"] == 1
    assert all(table["Ethics"][k] is None for k in ("icc_a1", "bias", "loa_low", "pearson_r"))
    assert table["Ethics"]["icc_a1_ci"] == [None, None]
    assert table["Character Depth"]["icc_a1"] == pytest.approx(44 / 53)
    assert re.search(r"^Ethics +1 +n/a +n/a$", capsys.readouterr().out, re.MULTILINE)
