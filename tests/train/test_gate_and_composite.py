"""Quality-gate math and the weighted composite as trl computes it."""

from __future__ import annotations

import pytest

from rewards.composite import score_batch, weighted_total
from rewards.gate import gate_values, gated
from tests.train.conftest import chat


@pytest.mark.parametrize(("quality", "values", "expected"), [
    ([1.0, 0.5, 0.0], [0.4, 0.4, 0.4], [0.4, 0.2, 0.0]),  # gibberish (quality 0) earns no novelty
    ([0.8, None], [2.0, 2.0], [1.6, None]),             # no judge score: no gated reward
    ([0.8, 0.5], [None, -1.0], [None, -0.5]),
])
def test_gate_values(quality, values, expected):
    out = gate_values(quality, values)
    assert [o is None for o in out] == [e is None for e in expected]
    assert [o for o in out if o is not None] == pytest.approx([e for e in expected if e is not None])


def test_gated_reward_multiplies_by_judge_quality_and_logs_the_raw_mean():
    async def judge(prompts, completions, **columns):
        return [1.0, 0.25, None]

    def novelty(prompts, completions, **columns):
        return [0.4, 0.8, 0.6]

    logged = {}
    reward = gated(novelty, judge)
    assert reward.__name__ == "gated_novelty"
    values, _ = score_batch([reward], ["p"] * 3, [chat("x")] * 3, log_metric=logged.__setitem__)
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
