"""The judge reward's average is the evaluation's: missing unless every rubric aspect was judged,
so a judge failure on a story's weakest aspect cannot raise its reward."""

from __future__ import annotations

import math

import pytest

from eval.judge import Judgement
from eval.rubric import judge_average
from generate.backends import ChatRequest, Completion, TokenLogprob
from rewards import RewardContext, build_rewards
from rewards.composite import score_batch
from rewards.judge import quality
from tests.train.conftest import chat
from tests.train.fakes import DigitJudgeBackend, fake_judge

PROMPT = [{"role": "user", "content": "Write a story."}]


class NoEthicsBackend(DigitJudgeBackend):
    """The digit judge, except that it answers "N/A" on the ethics aspect of a "dull" story."""

    def reply(self, request: ChatRequest) -> Completion:
        content = request.messages[-1]["content"]
        if "dull" in content and "Ethical and Philosophical Themes" in content:
            return Completion(text=" N", logprobs=[TokenLogprob(" N", -1e-4, {" N": -1e-4, "5": -9.0})])
        return super().reply(request)


def test_the_reward_and_the_evaluation_share_one_average():
    scores = {"a": 1.0, "b": 4.0}
    assert quality(Judgement(scores), 0, 5) == pytest.approx(judge_average(scores, ["a", "b"]) / 5)
    # An aspect of the rubric that the judgement lacks counts as missing, as in the evaluation.
    assert quality(Judgement(scores), 0, 5, aspects=["a", "b", "c"]) is None
    assert judge_average({"a": 4.0, "b": math.nan}, ["a", "b"]) is None


def test_a_story_with_a_failed_aspect_gets_its_groups_mean_not_a_higher_reward(monkeypatch):
    """"dull" scores 1 on four aspects and gets no score on the fifth: the mean of the four it has
    (0.2) would stand in for a judgement never made. As a failed value it is filled with its
    group's mean of the present values (0.6), so it moves no advantage."""
    context = RewardContext()
    judge = fake_judge(NoEthicsBackend())
    monkeypatch.setattr(context, "judge", lambda *args: judge)
    (reward,) = build_rewards(["judge"], context=context)
    values, _ = score_batch([reward], [PROMPT] * 3, [chat("a brilliant tale"), chat("dull"), chat("meh")],
                            prompt_id=["p"] * 3)
    assert values["judge"] == pytest.approx([1.0, 0.6, 0.2])
