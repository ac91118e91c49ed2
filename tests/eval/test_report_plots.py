"""The report and sweep plots draw a missing value as nothing marked "n/a", never as a 0 bar or a
zero-width error bar (homogenization n/a for the single agent read as "most diverse"); bars and
cells show the standard error where they say se, not the standard deviation."""

from __future__ import annotations

import math

import matplotlib.axes
import pytest

from eval.metrics.catalog import JUDGE, Catalog, MetricSpec, rule_spec
from eval.report import cell as table_cell
from eval.report import plot
from eval.sweep import plot_axis


def cell(mean: float | None, se: float | None, n: int) -> dict:
    """A summary cell whose std (3 se) differs from its se, so a plot that drew the one for the other fails."""
    return {"mean": mean, "std": None if se is None else 3 * se, "se": se, "n": n, "missing": {}}


@pytest.fixture
def drawn(monkeypatch):
    """What the plots hand matplotlib: each bar or errorbar call's heights and errors, each text."""
    calls: dict[str, list] = {"bar": [], "errorbar": [], "text": []}
    for name in calls:
        real = getattr(matplotlib.axes.Axes, name)

        def spy(ax, *args, _name=name, _real=real, **kwargs):
            calls[_name].append((args, kwargs))
            return _real(ax, *args, **kwargs)

        monkeypatch.setattr(matplotlib.axes.Axes, name, spy)
    return calls


def test_a_missing_mean_is_no_bar_and_an_undefined_se_no_error_bar(tmp_path, drawn):
    frameworks = {"single": {"homogenization": cell(None, None, 0)},
                  "review": {"homogenization": cell(0.4, 0.02, 10)},
                  "debate": {"homogenization": cell(0.5, None, 1)}}
    assert plot(frameworks, [rule_spec("homogenization")], tmp_path / "rule.png", "Rule-based metrics")
    [(args, kwargs)] = drawn["bar"]
    heights, errors = list(args[1]), list(kwargs["yerr"])
    assert math.isnan(heights[0]) and heights[1:] == [0.4, 0.5]
    assert math.isnan(errors[0]) and errors[1] == 0.02 and math.isnan(errors[2])
    assert [args[2] for args, _ in drawn["text"]] == ["n/a"]


def test_a_sweep_point_without_a_standard_error_has_no_error_bar(tmp_path, drawn):
    catalog = Catalog((MetricSpec("logic", "Logic", JUDGE), rule_spec("surprisal")))
    logic = cell(3.0, 0.1, 4)
    points = [{"value": 1, "summary": {"logic": logic, "surprisal": cell(2.0, None, 1)}, "cost": None},
              {"value": 2, "summary": {"logic": logic, "surprisal": cell(2.5, 0.1, 4)}, "cost": None},
              {"value": 3, "summary": {"logic": logic}, "cost": None}]
    plot_axis("rounds", points, catalog, tmp_path / "sweep.png")
    [(args, kwargs)] = [c for c in drawn["errorbar"] if c[1].get("label") == "Surprisal"]
    means, errors = list(args[1]), list(kwargs["yerr"])
    assert means[:2] == [2.0, 2.5] and math.isnan(means[2])
    assert math.isnan(errors[0]) and errors[1] == 0.1 and math.isnan(errors[2])
    assert [args[2] for args, _ in drawn["text"]] == ["n/a"]


def test_a_table_cell_is_mean_std_and_se_in_that_order():
    assert table_cell({"mean": 1.0, "std": 0.3, "se": 0.05, "n": 36}, 2) == "1.00 ± 0.30 (se 0.05)"
    assert table_cell({"mean": 1.0, "std": 0.3, "se": None, "n": 2}, 2) == "1.00 ± 0.30"
