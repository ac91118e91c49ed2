"""The length penalty on literal completions, and the reward registry's contract with trl."""

from __future__ import annotations

import pytest
from trl.trainer.utils import get_callable_name, is_async_callable

from generate.common.errors import UsageError
from rewards import REWARDS, build_rewards
from rewards.length import length, length_penalty
from tests.train.conftest import chat


@pytest.mark.parametrize(("words", "target", "tolerance", "expected"), [
    (300, 300, 0.15, 0.0),      # on target
    (255, 300, 0.15, 0.0),      # inside the band (15% short)
    (345, 300, 0.15, 0.0),      # inside the band (15% long)
    (150, 300, 0.15, -0.35 / 0.85),  # 50% short: (0.5 - 0.15) / 0.85
    (0, 300, 0.15, -1.0),       # empty story
    (600, 300, 0.15, -1.0),     # twice the target
    (900, 300, 0.15, -1.0),     # capped at -1
    (200, 100, 0.0, -1.0),
    (150, 100, 0.0, -0.5),
])
def test_length_penalty_values(words, target, tolerance, expected):
    assert length_penalty(words, target, tolerance) == pytest.approx(expected)


def test_length_reward_counts_words_of_chat_and_plain_completions():
    ten = "one two three four five six seven eight nine ten"
    out = length(["p"] * 3, [chat(ten), ten + " " + ten, chat("")], target_words=10, tolerance=0.0)
    assert out == pytest.approx([0.0, -1.0, -1.0])


def test_length_rejects_bad_options():
    from generate.common.errors import UsageError

    with pytest.raises(UsageError):
        length(["p"], ["x"], target_words=0)


def test_every_reward_is_registered_under_its_function_name():
    assert set(REWARDS) == {"judge", "kl", "novelty_cos", "volume_gain", "surprisal", "length", "group_diversity",
                            "reward_model", "principle_judge"}
    for name, entry in REWARDS.items():
        assert entry.func.__name__ == name


def test_built_rewards_carry_names_trl_logs_and_keep_async():
    funcs = build_rewards(["judge", "novelty_cos", "length"], {"length": {"target_words": 30}})
    assert [get_callable_name(f) for f in funcs] == ["judge", "novelty_cos", "length"]
    assert [is_async_callable(f) for f in funcs] == [True, False, False]
    # 3 of 30 words: the recipe's option is bound
    assert funcs[2](["p"], [chat("a b c")]) == pytest.approx([-(0.9 - 0.15) / 0.85])


def test_gated_rewards_are_async_and_named_gated():
    funcs = build_rewards(["judge", "kl", "group_diversity", "length"], {"judge": {"timeout": 5}}, gate="judge")
    assert [get_callable_name(f) for f in funcs] == ["judge", "gated_kl", "gated_group_diversity", "length"]
    assert [is_async_callable(f) for f in funcs] == [True, True, True, False]


@pytest.mark.parametrize(("names", "options", "gate", "message"), [
    (["lenght"], {}, "none", "valid rewards: group_diversity, judge, kl, length"),
    (["length"], {"length": {"target": 3}}, "none", "valid: target_words, tolerance"),
    (["length"], {"judge": {"timeout": 3}}, "none", "unselected reward(s) judge"),
    (["length", "length"], {}, "none", "twice"),
    (["length"], {}, "quality", "valid: none, judge"),
])
def test_bad_reward_configs_fail_with_the_valid_choices(names, options, gate, message):
    with pytest.raises(UsageError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build_rewards(names, options, gate)


def test_judge_options_are_allowed_for_the_gate_alone():
    funcs = build_rewards(["novelty_cos"], {"judge": {"timeout": 3}}, gate="judge")
    assert get_callable_name(funcs[0]) == "gated_novelty_cos"
