"""What every reward reads of a completion (`rewards/text.py`): the story as generation stores it, and
the floor, not None, where a value cannot exist."""

from __future__ import annotations

import asyncio

import pytest

from generate.clean import clean_reply
from rewards.diversity import group_diversity
from rewards.length import length
from rewards.novelty import NO_TEXT, kl, novelty_cos
from rewards.surprisal import surprisal
from rewards.text import completion_text
from tests.train.conftest import chat

STORY = "The comet's ice sang as the drill bit in.\n\nMira heard her mother's voice in the hum."
WRAPPED = f"Sure! Here's a story about a comet:\n\n**The Singing Ice**\n\n{STORY}\n\nI hope you enjoy it!"
PROMPT = [{"role": "user", "content": "Write about a comet."}]


class Scorer:
    """A surprisal scorer: log p = -1 for every word of the story."""

    context_length = None

    def score(self, pairs, batch_size=None):
        return [[-1.0] * len(story.split()) for _, story in pairs]


def test_a_reward_reads_the_reply_as_generation_cleans_it():
    assert clean_reply("write", WRAPPED) == STORY  # generation would store exactly the story
    assert completion_text(chat(WRAPPED)) == STORY == completion_text(WRAPPED)


def test_a_wrapped_reply_gets_the_reward_of_its_cleaned_story(fake_embedder, context, tiny_reference, monkeypatch):
    """The chatter, title and "I hope you enjoy it" that the evaluation never sees change no reward."""
    monkeypatch.setattr(context, "scorer", lambda model, batch_size: Scorer())
    other = chat("A lighthouse keeper counted the ships that never came back to the bay.")
    for reward, columns in ((length, {"target_words": 10}), (kl, {"context": context}),
                            (novelty_cos, {"context": context}), (group_diversity, {"context": context}),
                            (surprisal, {"context": context, "task_prompt": ["Comet."] * 2})):
        wrapped = reward([PROMPT] * 2, [chat(WRAPPED), other], **columns)
        clean = reward([PROMPT] * 2, [chat(STORY), other], **columns)
        assert wrapped == pytest.approx(clean), reward.__name__


def test_an_empty_story_gets_the_floor_in_surprisal_and_diversity(fake_embedder, context, monkeypatch):
    """Not None, which the trainer would fill with the group mean as if the call had failed."""
    monkeypatch.setattr(context, "scorer", lambda model, batch_size: Scorer())
    out = surprisal([PROMPT] * 2, [chat(""), chat("Ice sang.")], context=context, task_prompt=["Comet."] * 2)
    assert out == [NO_TEXT, pytest.approx(1.0)]
    assert group_diversity([PROMPT] * 3, [chat(""), chat("a"), chat("b")], context=context)[0] == NO_TEXT
    assert NO_TEXT == 0.0


def test_a_reply_that_is_only_chatter_is_an_empty_story(fake_embedder, context):
    """Cleaned to nothing, as generation would store it: the floor, as for an empty completion."""
    out = group_diversity([PROMPT] * 3, [chat("Sure! I'd be happy to help."), chat("a"), chat("b")], context=context)
    assert out[0] == NO_TEXT


def test_the_quality_gate_applies_to_an_empty_completion(fake_embedder, context):
    """With `reward_gate: judge` a None passed the gate as None (then filled with the group mean);
    the floor is gated like any value."""
    from rewards.gate import gated
    from rewards.registry import bind

    async def judge(prompts, completions, **columns):
        return [0.5] * len(completions)

    diversity = bind("group_diversity", group_diversity, {}, context)
    out = asyncio.run(gated(diversity, judge)([PROMPT] * 3, [chat(""), chat("a"), chat("b")]))
    assert out[0] == 0.0 and out[1] is not None
