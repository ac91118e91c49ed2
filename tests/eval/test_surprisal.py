"""Surprisal: teacher-forced mean negative log-probability of a story under the writer prompt."""

from __future__ import annotations

import math
import random

import pytest
from fakes import FakeScorer, ScriptedBackend, model

from eval.surprisal import surprisal
from generate.common.errors import UsageError
from generate.prompts import load_prompts

PROMPT = "A lighthouse keeper on a tidally locked moon narrates the night the dark side turns toward her."
REPEATED = "The keeper lit the lamp and the moon turned. " * 12


def test_mean_negative_logprob_on_the_single_agent_prompt() -> None:
    scorer = FakeScorer()
    values = surprisal(scorer, [PROMPT, PROMPT, PROMPT], ["ab cdef", "", "   "])
    assert values[0] == pytest.approx((1.2 + 1.4) / 2)
    assert values[1:] == [None, None]  # nothing to average: missing, not 0
    [(messages, story)] = scorer.pairs  # empty stories are not sent
    assert story == "ab cdef"
    assert messages == [{"role": "user", "content": load_prompts().render("single_write", prompt=PROMPT)}]


def test_model_wrapper_is_unwrapped_and_chat_only_backends_are_refused() -> None:
    assert surprisal(model(FakeScorer()), [PROMPT], ["abc"]) == [pytest.approx(1.3)]
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
    repeated_s, shuffled_s = surprisal(writer, [PROMPT, PROMPT], [REPEATED, shuffled])
    for value in (repeated_s, shuffled_s):
        assert value is not None and math.isfinite(value) and value > 0
    assert repeated_s < shuffled_s
