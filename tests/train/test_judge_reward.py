"""The judge reward: [0, 1] scaling, one batched call per step, timeouts and failures give None."""

from __future__ import annotations

import time

import pytest

from eval.judge import Judgement
from generate.backends.base import TransientBackendError
from generate.common.errors import UsageError
from rewards import RewardContext, build_rewards
from rewards.composite import score_batch
from rewards.judge import quality
from tests.train.conftest import chat
from tests.train.fakes import DigitJudgeBackend, fake_judge

PROMPT = [{"role": "user", "content": "Write a story."}]


@pytest.mark.parametrize(("scores", "expected"), [
    ({"a": 5, "b": 5}, 1.0),
    ({"a": 0, "b": 0}, 0.0),
    ({"a": 1, "b": 4}, 0.5),
    ({"a": 4, "b": None}, None),  # a failed aspect: no average (a failed value), neither 0 nor the others' mean
    ({"a": None, "b": None}, None),
])
def test_quality_is_the_mean_aspect_score_scaled_to_unit_interval(scores, expected):
    assert quality(Judgement(scores), 0, 5) == (pytest.approx(expected) if expected is not None else None)


def test_an_empty_story_is_the_rubric_floor_and_a_failed_call_is_no_value():
    empty = Judgement({"a": None, "b": None}, reasons={"a": "empty story", "b": "empty story"})
    assert quality(empty, 0, 5) == 0.0
    assert quality(None, 0, 5) is None


@pytest.fixture
def use_backend(monkeypatch):
    """A reward context whose every judge uses the given fake backend."""
    def install(backend):
        context = RewardContext()
        judge = fake_judge(backend)
        monkeypatch.setattr(context, "judge", lambda *args: judge)
        return context
    return install


def test_judge_scores_each_completion_in_one_batched_call(use_backend):
    backend = DigitJudgeBackend()
    (judge,) = build_rewards(["judge"], context=use_backend(backend))
    values, _ = score_batch([judge], [PROMPT] * 3, [chat("a brilliant tale"), chat("meh"), chat("brilliant!")])
    assert values["judge"] == pytest.approx([1.0, 0.2, 1.0])
    assert backend.calls == [3 * 5]  # 3 stories x 5 aspects, one engine call


def test_judge_and_gated_rewards_share_one_judge_call(use_backend, fake_embedder, tiny_reference):
    backend = DigitJudgeBackend()
    context = use_backend(backend)
    context._make_encoder = lambda name: fake_embedder
    funcs = build_rewards(["judge", "novelty_cos", "group_diversity"], gate="judge", context=context)
    completions = [chat("a brilliant tale"), chat("meh"), chat("brilliant!"), chat("dull")]
    values, _ = score_batch(funcs, [PROMPT] * 4, completions, prompt_id=["p"] * 4)
    assert backend.calls == [4 * 5]
    assert set(values) == {"judge", "gated_novelty_cos", "gated_group_diversity"}


def test_a_timed_out_judge_gives_none_without_stalling(use_backend):
    (judge,) = build_rewards(["judge"], {"judge": {"timeout": 0.3}}, context=use_backend(DigitJudgeBackend(delay=30)))
    start = time.perf_counter()
    values, totals = score_batch([judge], [PROMPT] * 2, [chat("a"), chat("b")])
    assert time.perf_counter() - start < 5
    assert values["judge"] == [None, None] and totals == [None, None]


def test_a_failing_judge_gives_none(use_backend):
    (judge,) = build_rewards(["judge"], context=use_backend(DigitJudgeBackend(error=RuntimeError("connection reset"))))
    values, _ = score_batch([judge], [PROMPT] * 2, [chat("a"), chat("b")])
    assert values["judge"] == [None, None]


def test_a_judge_server_that_is_down_gives_none(use_backend):
    down = TransientBackendError("connection failed (ConnectError)", cause="connection")
    (judge,) = build_rewards(["judge"], context=use_backend(DigitJudgeBackend(error=down)))
    values, _ = score_batch([judge], [PROMPT] * 2, [chat("a"), chat("b")])
    assert values["judge"] == [None, None]


def test_a_judge_refusal_only_the_user_can_fix_stops_training_in_one_line(use_backend):
    """A wrong key or model name fails every step the same way: a reward that is None at every step
    trains nothing, so the run stops with the server's reason instead of training on."""
    refused = UsageError("openai:gpt-x: the server refused the request (HTTP 401): bad key")
    (judge,) = build_rewards(["judge"], context=use_backend(DigitJudgeBackend(error=refused)))
    with pytest.raises(UsageError, match="HTTP 401"):
        score_batch([judge], [PROMPT] * 2, [chat("a"), chat("b")])


@pytest.mark.slow
@pytest.mark.train
def test_training_continues_when_the_judge_times_out(use_backend, tmp_path):
    """One real GRPO step with a judge that never answers in time: the step completes, the judge's
    reward is missing (None) and the other rewards still drive the update."""
    from trl import GRPOConfig

    from generate.datasets import load_dataset
    from train.data import prompt_dataset
    from train.model import resolve_model_path
    from train.trainer import GRPOTrainer

    context = use_backend(DigitJudgeBackend(delay=60))
    funcs = build_rewards(["judge", "length"], {"judge": {"timeout": 0.5}, "length": {"target_words": 5}},
                          context=context)
    args = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, max_steps=1, per_device_train_batch_size=2,
                      num_generations=2, max_completion_length=8, logging_steps=1, report_to="none",
                      save_strategy="no", gradient_checkpointing=False)
    trainer = GRPOTrainer(model=resolve_model_path("smollm2-135m-instruct"), reward_funcs=funcs, args=args,
                          train_dataset=prompt_dataset(load_dataset("default")[:2]))
    start = time.perf_counter()
    trainer.train()
    assert time.perf_counter() - start < 120
    logged = trainer.state.log_history[0]
    assert trainer.state.global_step == 1
    assert logged["rewards/judge/mean"] is None
    assert logged["rewards/length/mean"] is not None
