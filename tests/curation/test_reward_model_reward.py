"""The `reward_model` reward with a tiny random reward model: batching, padding, limits, caching."""

from __future__ import annotations

import pytest

from eval.scorers.reward_model import RewardModelScorer, resolve_rm_dir
from generate.common.errors import UsageError
from rewards import RewardContext, build_rewards
from tests.curation.fakes import save_tiny_reward_model
from tests.train.conftest import chat

PROMPT = [{"role": "user", "content": "Write a story about a comet."}]


@pytest.fixture(scope="module")
def tiny_rm(tmp_path_factory):
    """A 1-layer Llama reward head with SmolLM2's tokenizer, saved like a trained run (`merged/`)."""
    return save_tiny_reward_model(tmp_path_factory.mktemp("rm_run"))


def test_a_batch_scores_like_one_at_a_time_and_long_ones_get_none(tiny_rm):
    scorer = RewardModelScorer(tiny_rm, device="cpu")
    texts = ["Ice.", "The comet's tail combed the dark like silver hair, and Mira listened.", "Short tale here."]
    batched = scorer.score([PROMPT] * 3, texts, batch_size=3)
    single = [scorer.score([PROMPT], [t], batch_size=1)[0] for t in texts]
    assert batched == pytest.approx(single, abs=1e-5) and len(set(batched)) == 3
    too_long = scorer.score([PROMPT], ["word " * 200], batch_size=4)
    assert too_long == [None]  # longer than the model's 96 positions: no value, never a truncated score
    assert scorer.score(["Plain prompt: "], ["a story"])[0] is not None  # trl's plain-text format


def test_the_sequence_is_the_chat_template_of_prompt_and_completion(tiny_rm):
    scorer = RewardModelScorer(tiny_rm, device="cpu")
    ids = scorer.encode(PROMPT, "Ice sang.")
    expected = scorer.tokenizer.apply_chat_template(PROMPT + [{"role": "assistant", "content": "Ice sang."}],
                                                    tokenize=True, return_dict=True)["input_ids"]
    assert ids == list(expected)


def test_the_registered_reward_loads_once_per_context_and_scores_a_step(tiny_rm):
    context = RewardContext()
    (func,) = build_rewards(["reward_model"], {"reward_model": {"model_dir": str(tiny_rm), "batch_size": 8}},
                            context=context)
    assert func.__name__ == "reward_model"
    values = func([PROMPT, PROMPT], [chat("Ice sang."), chat("The comet came.")])
    again = func([PROMPT], [chat("Ice sang.")])
    assert len(values) == 2 and again[0] == pytest.approx(values[0], abs=1e-5)
    assert len([k for k in context._resources if k[0] == "reward_model"]) == 1
    assert {name for name, _, _ in context.timer.take()} == {"reward_model"}


def test_a_missing_model_directory_is_a_usage_error(tmp_path, tiny_rm):
    assert resolve_rm_dir(tiny_rm) == tiny_rm / "merged"
    assert resolve_rm_dir(tiny_rm / "merged") == tiny_rm / "merged"
    with pytest.raises(UsageError, match="train one with train/reward_model.py"):
        resolve_rm_dir(tmp_path)


def test_the_scorer_sanitises_so_the_reward_and_the_evaluation_agree(tiny_rm):
    """The evaluation hands the scorer sanitised text, the GRPO reward the raw completion: the scorer
    sanitises itself, so a story with control characters gets one score whoever asks."""
    from eval.text import sanitize

    scorer = RewardModelScorer(tiny_rm, device="cpu")
    hostile = "Ice\x00 sang\x07 over the\x1b dark comet."
    clean = sanitize(hostile)[0]
    assert clean != hostile
    assert scorer.score([PROMPT], [hostile]) == pytest.approx(scorer.score([PROMPT], [clean]), abs=1e-6)
    (func,) = build_rewards(["reward_model"], {"reward_model": {"model_dir": str(tiny_rm)}}, context=RewardContext())
    assert func([PROMPT], [chat(hostile)]) == pytest.approx(scorer.score([PROMPT], [clean]), abs=1e-5)
