"""Judge replies read as a score they do not hold: a hedged range ("Score: 3-4") or a decimal comma
("4,5") read as its first number, and a digit-like token ("²") among the top logprobs that stopped
the whole evaluation with a traceback."""

from __future__ import annotations

import math

import pytest
from fakes import LogprobBackend, ScriptedBackend, model

from eval.judge import Judge
from eval.rubric_reply import expected_score, parse_score, score_from_logprobs
from generate.backends import Completion, TokenLogprob

STORY = "The tide-locked moon turned its dark face toward the lighthouse, and the keeper lit the lamp."


@pytest.mark.parametrize("reply", [
    "Score: 3-4", "Score: 3 - 4", "Score: 3\u20134", "Score: 3 to 4", "Score: 3 or 4", "Score: 4,5",
    "Score: 1e3", "Score: 2-3/5", "Reasoning.\nScore: 4\nOn reflection, Score: 2-3",
])
def test_a_range_or_a_decimal_comma_is_no_score(reply):
    """Its first number would be read: a hedge between 3 and 4 became a 3, biasing scores low."""
    assert parse_score(reply) is None


@pytest.mark.parametrize(("reply", "expected"), [
    ("Score: 4, because the twist is earned.", 4), ("Score: 4 - the twist is earned.", 4), ("Score: 4.", 4),
    ("Score: 3/5.", 3), ("Score: 4 or so", 4), ("**Score: 4**", 4), ("Score: 2 (out of 5)", 2),
    ("Score: 2-3\nScore: 3", 3),
])
def test_a_score_followed_by_prose_is_still_that_score(reply, expected):
    assert parse_score(reply) == expected


def test_a_hedging_judge_is_reasked_and_its_hedge_never_counts():
    judge = Judge(model(ScriptedBackend({"*": ["Score: 3-4", "Score: 4"]})), mode="sample", samples=1,
                  max_parse_retries=1)
    [result] = judge.score([STORY])
    assert result.scores == {a: 4.0 for a in judge.aspects}
    assert result.parse_failures == len(judge.aspects)


def test_a_digit_like_token_that_is_no_number_is_ignored():
    """"²" is a digit to str.isdigit but int() refuses it: it raised ValueError."""
    top = {" 4": math.log(0.6), "²": math.log(0.3), " 2": math.log(0.1)}
    assert expected_score(top) == pytest.approx((4 * 0.6 + 2 * 0.1) / 0.7)
    reply = Completion("x", logprobs=[TokenLogprob(" 4", math.log(0.6), top)])
    assert score_from_logprobs(reply, True) == pytest.approx((4 * 0.6 + 2 * 0.1) / 0.7)
    judge = Judge(model(LogprobBackend([("²", {"²": math.log(0.5), " 3": math.log(0.4)})])), mode="logprob")
    [result] = judge.score([STORY])
    assert all(v is None for v in result.scores.values()) and result.parse_failures == len(judge.aspects)


@pytest.mark.parametrize(("reply", "expected"), [("Score: 4/5", 4), ("Score: 4 out of 5", 4), ("Score: 4/10", None),
                                                 ("Score: 2 out of 4", None)])
def test_a_score_on_another_scale_is_no_score(reply, expected):
    """"4/10" is 2 on a 0-5 scale, not 4: a denominator other than the scale's top refuses the reply."""
    assert parse_score(reply) == expected


def test_a_digit_below_the_scale_holds_no_mass():
    """On a 1-5 rubric a "0" token is off the scale: pooling it would pull the expectation down."""
    top = {"0": math.log(0.5), " 3": math.log(0.3), "5": math.log(0.2)}
    assert expected_score(top, 1, 5) == pytest.approx((3 * 0.3 + 5 * 0.2) / 0.5)
    assert parse_score("Score: 0", 1, 5) is None


def test_markdown_around_the_score_is_stepped_over_and_the_prefix_is_any_case():
    """`**Score:** **4**` and `score: 4` are scores: a bold marker after the prefix is no answer, and
    the prefix is matched whatever its case."""
    bold = TokenLogprob(" **", math.log(0.9), {" **": math.log(0.9), " 3": math.log(0.05)})
    digit = TokenLogprob("4", math.log(0.8), {"4": math.log(0.8), "2": math.log(0.2)})
    assert score_from_logprobs(Completion(" **4", logprobs=[bold, digit]), True) == pytest.approx(3.6)
    words = [TokenLogprob(t, 0.0, {}) for t in ("Final", " score", ":")]
    assert score_from_logprobs(Completion("Final score: 4", logprobs=[*words, digit]), False) == pytest.approx(3.6)
