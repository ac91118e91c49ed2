"""Surprisal: teacher-forced mean negative log-probability of a story under the writer prompt."""

from __future__ import annotations

import math
import random

import pytest
from fakes import FakeScorer, ScriptedBackend, model

from eval.metrics.surprisal import surprisal
from generate.common.errors import UsageError
from generate.prompts import load_prompts

PROMPT = "A lighthouse keeper on a tidally locked moon narrates the night the dark side turns toward her."
REPEATED = "The keeper lit the lamp and the moon turned. " * 12


def values(measured) -> list:
    return [m.values["surprisal"] for m in measured]


def test_mean_negative_logprob_on_the_single_agent_prompt() -> None:
    scorer = FakeScorer()
    measured = surprisal(scorer, [PROMPT, PROMPT, PROMPT], ["ab cdef", "", "   "])
    assert values(measured)[0] == pytest.approx((1.2 + 1.4) / 2)
    assert values(measured)[1:] == [None, None]  # nothing to average: missing, not 0
    assert [m.missing.get("surprisal") for m in measured] == [None, "empty story", "empty story"]
    [(messages, story)] = scorer.pairs  # empty stories are not sent
    assert story == "ab cdef"
    assert messages == [{"role": "user", "content": load_prompts().render("single_write", prompt=PROMPT)}]


def test_model_wrapper_is_unwrapped_and_chat_only_backends_are_refused() -> None:
    assert values(surprisal(model(FakeScorer()), [PROMPT], ["abc"])) == [pytest.approx(1.3)]
    with pytest.raises(UsageError, match="local hf model"):
        surprisal(model(ScriptedBackend({})), [PROMPT], ["abc"])
    with pytest.raises(ValueError):
        surprisal(FakeScorer(), [PROMPT], ["a", "b"])


@pytest.mark.slow
def test_surprisal_on_the_real_default_model() -> None:
    from generate.backends import load_model

    words = REPEATED.split()
    random.Random(0).shuffle(words)
    shuffled = " ".join(words)
    writer = load_model("smollm2-135m-instruct", batch_size=4)
    repeated_s, shuffled_s = values(surprisal(writer, [PROMPT, PROMPT], [REPEATED, shuffled]))
    for value in (repeated_s, shuffled_s):
        assert value is not None and math.isfinite(value) and value > 0
    assert repeated_s < shuffled_s


@pytest.mark.slow
def test_a_story_longer_than_the_scorers_context_is_missing_with_the_limit(default_model) -> None:
    """A 20,000-word story does not fit SmolLM2's 8,192 positions: missing with the reason, and the
    short story batched with it still gets its value (the long one is never padded into a batch)."""
    huge = " ".join(["starlight"] * 20_000)
    short, long = surprisal(default_model, [PROMPT, PROMPT], [REPEATED, huge])
    assert short.values["surprisal"] > 0
    assert long.values["surprisal"] is None
    assert long.missing["surprisal"] == "longer than the scorer's context (8192 tokens)"
