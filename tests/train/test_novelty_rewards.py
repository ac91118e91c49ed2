"""Reference rewards equal the evaluation metrics on the same text; encoder runs once per step."""

from __future__ import annotations

import pytest

from eval.metrics import CosineNovelty, UnigramReference, naive_volume_gain, unigram_kl
from eval.reference import load_reference
from eval.text import chunk_words
from rewards import build_rewards
from rewards.composite import score_batch
from rewards.novelty import kl, novelty_cos, volume_gain
from tests.train.conftest import chat

STORIES = [
    "The rocket hummed beneath a violet moon while the robot counted tides.",
    " ".join(f"word{i % 40} drifted over ochre dunes" for i in range(90)),  # ~450 words: two chunks
    "Quasar-lit orchards whispered; nobody on Mars remembered rain.",
]
PROMPTS = [[{"role": "user", "content": "Write."}]] * len(STORIES)


@pytest.fixture
def corpus(fake_embedder, tiny_reference):
    return load_reference(tiny_reference, fake_embedder)


def test_kl_reward_is_the_unigram_kl_metric(corpus, context):
    out = kl(PROMPTS, [chat(s) for s in STORIES], context=context, alpha=0.01)
    expected = [unigram_kl(s, UnigramReference(corpus.counts), alpha=0.01) for s in STORIES]
    assert out == pytest.approx(expected)


def test_novelty_cos_reward_is_the_cosine_novelty_metric(corpus, fake_embedder, context):
    out = novelty_cos(PROMPTS, [chat(s) for s in STORIES], context=context)
    metric = CosineNovelty(corpus.embeddings)
    expected = [metric(fake_embedder.encode(chunk_words(s, corpus.chunk_size))) for s in STORIES]
    assert out == pytest.approx(expected)


def test_volume_gain_reward_is_the_volume_gain_metric(corpus, fake_embedder, context):
    out = volume_gain(PROMPTS, [chat(s) for s in STORIES], context=context)
    expected = [naive_volume_gain(corpus.embeddings, fake_embedder.encode(chunk_words(s, corpus.chunk_size)))
                for s in STORIES]
    assert out == pytest.approx(expected, rel=1e-6, abs=1e-8)


def test_a_completion_without_words_is_worth_the_floor_not_a_group_mean(corpus, context):
    """Empty or emoji-only text has no novelty value; None would be filled with the group mean as if
    the call had failed, paying an empty story its siblings' average."""
    completions = [chat(""), chat(STORIES[0]), chat("\U0001F680\U0001F31F")]
    for reward in (kl, novelty_cos, volume_gain):
        out = reward(PROMPTS, completions, context=context)
        assert out[0] == 0.0 and out[1] not in (None, 0.0)  # a gain may be negative
    assert kl(PROMPTS, completions, context=context)[2] == 0.0  # emoji only: no word to count


def test_a_failed_encoding_stays_missing_for_the_group_mean(corpus, context, monkeypatch):
    """Only a value that cannot exist pays the floor: one whose encoding failed carries no
    information and stays None, which the trainer fills with its group's mean."""
    from eval.metrics.story import Chunks

    monkeypatch.setattr(context, "chunks", lambda texts, embedder, chunk_size: [
        Chunks(None, "encoder failed on this story: out of memory") for _ in texts])
    for reward in (novelty_cos, volume_gain):
        assert reward(PROMPTS[:1], [chat(STORIES[0])], context=context) == [None]


def test_a_volume_gain_reward_on_no_more_reference_chunks_than_dimensions_is_refused(corpus, context):
    """With N <= d reference chunks the evaluation reports every gain missing: the reward would be None
    for every completion, each filled with its group's mean, and train nothing while it seems to run."""
    from generate.common.errors import UsageError

    with pytest.raises(UsageError, match=r"3 chunks, not more than the 3 embedding dimensions.*max_chunks") as err:
        volume_gain(PROMPTS, [chat(s) for s in STORIES], context=context, max_chunks=3)
    assert "\n" not in str(err.value)
    for reward in (kl, novelty_cos):  # they need no more chunks than dimensions
        assert None not in reward(PROMPTS, [chat(s) for s in STORIES], context=context, max_chunks=3)
    assert None not in volume_gain(PROMPTS, [chat(s) for s in STORIES], context=context)  # 4 chunks > 3


def test_the_reference_sample_takes_the_evaluations_seed(corpus, context):
    """`seed` picks the seeded reference sample as the evaluation's --seed does, and is recorded."""
    kl(PROMPTS[:1], [chat(STORIES[0])], context=context, max_chunks=2, seed=7)
    assert 7 in [key[-1] for key in context._metrics]


def test_embedding_rewards_share_one_encoder_pass_per_step(corpus, fake_embedder, context):
    funcs = build_rewards(["novelty_cos", "volume_gain", "group_diversity"], context=context)
    fake_embedder.calls.clear()
    completions = [chat(s) for s in STORIES]
    score_batch(funcs, PROMPTS, completions, prompt_id=["p"] * 3)
    assert fake_embedder.calls == [4]  # 1 + 2 + 1 chunks, one call for all three rewards
    score_batch(funcs, PROMPTS, [chat(s + " again") for s in STORIES], prompt_id=["p"] * 3)
    assert len(fake_embedder.calls) == 2  # a new step's batch is embedded anew


def test_reference_is_loaded_once_per_context(corpus, fake_embedder, context, monkeypatch):
    from eval.reference import ReferenceCorpus

    loads = []
    real = ReferenceCorpus.load.__func__
    monkeypatch.setattr(ReferenceCorpus, "load",
                        classmethod(lambda cls, *a, **k: loads.append(1) or real(cls, *a, **k)))
    for _ in range(3):
        novelty_cos(PROMPTS, [chat(s) for s in STORIES], context=context)
        kl(PROMPTS, [chat(s) for s in STORIES], context=context)
    assert len(loads) == 1


def test_missing_reference_is_a_clear_error(context, monkeypatch):
    from generate.common.errors import UsageError

    monkeypatch.delenv("SCIFI_REFERENCE_DIR", raising=False)
    with pytest.raises(UsageError, match="SCIFI_REFERENCE_DIR"):
        novelty_cos(PROMPTS, [chat(STORIES[0])] * 3, context=context)


def test_surprisal_reward_is_the_surprisal_metric(context, monkeypatch):
    from eval.metrics.surprisal import surprisal as metric
    from rewards.surprisal import surprisal

    class Scorer:  # log p = -1 for every token of a 1-token-per-word story
        context_length = None

        def score(self, pairs, batch_size=None):
            return [[-1.0] * len(story.split()) for _, story in pairs]

    monkeypatch.setattr(context, "scorer", lambda model, batch_size: Scorer())
    tasks = ["A comet.", "A moon.", "Mars."]
    out = surprisal(PROMPTS, [chat(s) for s in STORIES], context=context, task_prompt=tasks)
    assert out == pytest.approx([m.values["surprisal"] for m in metric(Scorer(), tasks, STORIES)])
    assert out == pytest.approx([1.0] * 3)
