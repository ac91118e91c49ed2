"""The `principle_judge` reward: one batched call per step, P(good) or 0/1, empty = 0, failures = None."""

from __future__ import annotations

import asyncio
import time

import pytest

from eval.scorers.principles.texts import DEFAULT_STATE
from eval.signals import Signals
from generate.common.errors import UsageError
from generate.prompts import load_prompts
from rewards import RewardContext, build_rewards
from rewards.composite import score_batch
from rewards.principle_judge import task_text
from tests.principles.fakes import RoleBackend, _fenced_text, model_of, says_good
from tests.train.conftest import chat

PROMPTS = [[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Write about Mars."}]] * 3


@pytest.fixture
def judge_with(monkeypatch):
    """The reward built with a context whose judge model is the given scripted backend."""
    def install(backend, **options):
        monkeypatch.setattr("eval.scorers.principles.scorer.load_model", lambda *a, **k: model_of(backend))
        (func,) = build_rewards(["principle_judge"], {"principle_judge": options}, context=RewardContext())
        return func
    return install


def brilliant_is_good(backend):
    return RoleBackend({"detector": lambda r: says_good("brilliant" in _fenced_text(r), r, backend.templates, 0.9)})


def test_p_good_for_each_completion_in_one_batched_call(judge_with):
    backend = brilliant_is_good(RoleBackend())
    func = judge_with(backend)
    values, _ = score_batch([func], PROMPTS, [chat("a brilliant tale"), chat("a dull tale"), chat("")])
    assert values["principle_judge"] == pytest.approx([0.9, 0.1, 0.0])  # empty: 0 without a call
    assert backend.calls == [2 * 2]  # 2 non-empty completions x 2 label orders, one engine call
    assert all("Write about Mars." in r.messages[0]["content"] for _, r in backend.seen)


def test_sample_mode_is_binary_and_task_prompt_column_wins(judge_with):
    backend = RoleBackend({"detector": lambda r: "Score: 1" if "brilliant" in _fenced_text(r) else "Score: 0"})
    func = judge_with(backend, mode="sample")
    values, _ = score_batch([func], PROMPTS[:2], [chat("brilliant"), chat("dull")], task_prompt=["Mars.", "Venus."])
    assert values["principle_judge"] == [1.0, 0.0] and backend.calls == [2]
    assert {"Mars." in r.messages[0]["content"] for _, r in backend.seen} == {True, False}


def test_a_timed_out_or_failing_judge_gives_none_without_stalling(judge_with):
    func = judge_with(RoleBackend(delay=30), timeout=0.3)
    start = time.perf_counter()
    values = asyncio.run(func(PROMPTS[:2], [chat("a"), chat("")]))  # the raw values, before any group fill
    assert time.perf_counter() - start < 5 and values == [None, 0.0]
    func = judge_with(RoleBackend(error=RuntimeError("connection reset")))
    assert asyncio.run(func(PROMPTS[:1], [chat("a")])) == [None]


def test_a_judge_refusal_only_the_user_can_fix_stops_the_run(judge_with):
    """A wrong key or model name is no judge failure to average over: every call would fail alike."""
    func = judge_with(RoleBackend(error=UsageError("openai:x: the server refused the request (HTTP 404): no model")))
    with pytest.raises(UsageError, match="HTTP 404"):
        asyncio.run(func(PROMPTS[:1], [chat("a")]))


def test_options_are_checked_and_the_principles_file_is_used(judge_with, tmp_path):
    with pytest.raises(UsageError, match="unknown option"):
        build_rewards(["principle_judge"], {"principle_judge": {"rubric": "x"}})
    path = tmp_path / "p.yaml"
    path.write_text("principles: [Every tale must mention a comet.]\n")
    backend = RoleBackend()
    func = judge_with(backend, principles=str(path), orders=1)
    score_batch([func], PROMPTS[:1], [chat("a tale")])
    assert "1. Every tale must mention a comet." in backend.seen[0][1].messages[0]["content"]
    assert task_text("plain") == "plain" and task_text([]) == ""


def test_the_evaluations_signal_is_the_rewards_own_value(judge_with):
    """`eval.signals` calls the scorer the reward wraps: the same P(good) per story, the empty story
    included (0, not excellent, in both: one number for one text)."""
    backend = brilliant_is_good(RoleBackend())
    func = judge_with(backend)  # also makes the evaluation's scorer load the scripted model
    texts = ["a brilliant tale", "a dull tale", ""]
    rewarded = asyncio.run(func(PROMPTS, [chat(t) for t in texts]))
    signals = Signals(load_prompts(), principles=str(DEFAULT_STATE), judge="smollm2-135m-instruct", reward_model=None)
    measured = signals.measure(["Write about Mars."] * 3, texts)
    assert rewarded[2] == 0.0
    assert [m.values["principle_p"] for m in measured] == pytest.approx(rewarded)
    assert [m.values["principle_good"] for m in measured] == [1.0, 0.0, 0.0]
    assert backend.calls == [4, 4]  # one batched call each, the empty story asked nothing
