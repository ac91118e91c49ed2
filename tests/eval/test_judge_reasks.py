"""The judge's sample mode re-asks an unparseable reply itself, so it is the one layer that re-asks a
blank one: the `Model` under it, which re-asks blank sampled replies on its own by default, must not
multiply the requests ((1 + 2) x (1 + retries) for a reply that stays blank)."""

from __future__ import annotations

import pytest
from fakes import ScriptedBackend

from eval.judge import Judge
from generate.backends import Model, RetryPolicy
from generate.journal import Journal

ASPECTS = 5  # the default rubric's
STORY = "The tide-locked moon turned its dark face toward the lighthouse, and the keeper lit the lamp."


def blank_model() -> tuple[ScriptedBackend, Model]:
    """A backend that always replies blank, under a `Model` that would re-ask blank replies twice."""
    backend = ScriptedBackend({"*": [""]})
    policy = RetryPolicy(retries=1, backoff=0.0, max_backoff=0.0)
    assert policy.empty_retries == 2
    return backend, Model(backend, policy=policy)


@pytest.mark.parametrize("retries", [0, 2])
def test_a_reply_that_stays_blank_is_sent_once_per_judge_attempt(retries):
    backend, model = blank_model()
    (j,) = Judge(model, mode="sample", samples=2, max_parse_retries=retries).score([STORY])
    per_sample = 1 + retries
    assert len(backend.requests) == ASPECTS * 2 * per_sample
    # Every request the backend got is one the judgement counts (none hidden in the model's re-asks).
    assert j.requests == j.parse_failures == len(backend.requests)
    assert all(v is None for v in j.scores.values())
    assert len({r.seed for r in backend.requests}) == len(backend.requests)  # each attempt its own seed


def test_every_attempt_is_journaled(tmp_path):
    """A resumed evaluation replays every attempt: each is its own journaled call."""
    backend, model = blank_model()
    journal = Journal(tmp_path / "judge_calls.jsonl")
    Judge(model, mode="sample", samples=1, max_parse_retries=2, journal=journal).score([STORY])
    assert len(backend.requests) == ASPECTS * 3 == len(journal.path.read_text().splitlines())
    again, model = blank_model()
    Judge(model, mode="sample", samples=1, max_parse_retries=2, journal=Journal(journal.path)).score([STORY])
    assert not again.requests

