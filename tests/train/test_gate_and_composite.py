"""Quality-gate math and the weighted composite as trl computes it."""

from __future__ import annotations

import numpy as np
import pytest

from rewards.composite import score_batch, weighted_total
from rewards.gate import gate_value, gate_values, gated
from rewards.groups import fill_group_means
from tests.train.conftest import chat


@pytest.mark.parametrize(("quality", "values", "expected"), [
    ([1.0, 0.5, 0.0], [0.4, 0.4, 0.4], [0.4, 0.2, 0.0]),  # gibberish (quality 0) earns no novelty
    ([0.8, None], [2.0, 2.0], [1.6, None]),             # no judge score: no gated reward
    ([0.8, 0.5], [None, -1.0], [None, -1.5]),         # a negative novelty is pushed further down
])
def test_gate_values(quality, values, expected):
    out = gate_values(quality, values)
    assert [o is None for o in out] == [e is None for e in expected]
    assert [o for o in out if o is not None] == pytest.approx([e for e in expected if e is not None])


def test_gate_never_rewards_a_worse_story():
    """For every novelty value, positive or negative, the gated reward never decreases when the
    judge's quality rises (a plain product q * r does for r < 0: q = 0.1 beats q = 0.9), and never
    decreases when novelty rises at fixed quality; full quality keeps the value as it is."""
    qualities = np.linspace(0.0, 1.0, 41)
    novelties = np.concatenate([np.linspace(-5.0, 5.0, 201), [-1e-9, 0.0, 1e-9, -100.0, 100.0]])
    grid = np.array([[gate_value(q, r) for r in novelties] for q in qualities])
    assert np.all(np.diff(grid, axis=0) >= -1e-12)  # along quality
    order = np.argsort(novelties)
    assert np.all(np.diff(grid[:, order], axis=1) >= -1e-12)  # along novelty
    assert grid[-1] == pytest.approx(novelties)
    assert gate_value(0.9, -0.5) > gate_value(0.1, -0.5)


def test_a_failed_value_is_its_groups_mean_so_its_advantage_is_zero():
    values, filled = fill_group_means([1.0, None, 3.0, None, None, float("nan"), 5.0],
                                      ["a", "a", "a", "b", "b", "c", "c"])
    assert values == [1.0, 2.0, 3.0, None, None, 5.0, 5.0] and filled == 2
    # The group mean, hence every present sibling's advantage, is what it was without the failure.
    assert np.mean(values[:3]) == np.mean([1.0, 3.0])


def test_score_batch_fills_failures_like_the_trainer():
    async def flaky_judge(prompts, completions, **columns):
        return [0.2, None, 0.6, 0.9]

    values, totals = score_batch([flaky_judge], ["p"] * 4, [chat("x")] * 4, prompt_id=["a", "a", "a", "b"])
    assert values["flaky_judge"] == pytest.approx([0.2, 0.4, 0.6, 0.9])
    assert totals == pytest.approx([0.2, 0.4, 0.6, 0.9])


def test_gated_reward_multiplies_by_judge_quality_and_logs_the_raw_mean():
    async def judge(prompts, completions, **columns):
        return [1.0, 0.25, None]

    def novelty(prompts, completions, **columns):
        return [0.4, 0.8, 0.6]

    logged = {}
    reward = gated(novelty, judge)
    assert reward.__name__ == "gated_novelty"
    values, _ = score_batch([reward], ["p"] * 3, [chat("x")] * 3, log_metric=logged.__setitem__,
                            prompt_id=["a", "b", "c"])
    assert values["gated_novelty"][:2] == pytest.approx([0.4, 0.2]) and values["gated_novelty"][2] is None
    assert logged == {"ungated/novelty": pytest.approx(0.6)}


def test_weighted_total_skips_missing_values_like_trl_nansum():
    values = {"judge": [0.5, None, None], "length": [-1.0, -0.5, None]}
    totals = weighted_total(values, [2.0, 1.0])
    assert totals[0] == pytest.approx(0.0) and totals[1] == pytest.approx(-0.5) and totals[2] is None


def test_score_batch_runs_sync_and_async_rewards_in_recipe_order():
    async def a(prompts, completions, **columns):
        return [1.0] * len(completions)

    def b(prompts, completions, **columns):
        return [float(len(columns["prompt_id"][0]))] * len(completions)

    values, totals = score_batch([a, b], ["p", "p"], [chat("x"), chat("y")], [1.0, 0.5], prompt_id=["abc", "abc"])
    assert list(values) == ["a", "b"]
    assert totals == pytest.approx([2.5, 2.5])


def test_weighted_total_skips_a_nan_value_as_trl_nansum_does():
    totals = weighted_total({"judge": [float("nan"), float("nan")], "length": [-0.5, None]}, [2.0, 1.0])
    assert totals[0] == pytest.approx(-0.5) and totals[1] is None


def test_the_ungated_mean_is_over_the_values_the_reward_gave():
    """A completion the novelty reward could not score is no 0 in the logged raw mean."""
    async def judge(prompts, completions, **columns):
        return [1.0, 1.0, 1.0]

    def novelty(prompts, completions, **columns):
        return [0.4, None, 0.8]

    logged = {}
    score_batch([gated(novelty, judge)], ["p"] * 3, [chat("x")] * 3, log_metric=logged.__setitem__,
                prompt_id=["a", "b", "c"])
    assert logged == {"ungated/novelty": pytest.approx(0.6)}
