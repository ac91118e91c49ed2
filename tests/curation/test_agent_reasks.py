"""The curation agents re-ask an unusable reply themselves, so they are the one layer that re-asks a
blank one: the `Model` under their drivers (the scorer, the curation pipeline), which re-asks blank
sampled replies on its own by default, must not multiply the requests, and every attempt is a call
whose tokens are counted."""

from __future__ import annotations

import pytest

from eval.scorers.curation import CurationScorer, Settings
from generate.backends import Backend, ChatRequest, Completion, Model, RetryPolicy
from generate.common.errors import PartialFailure
from generate.common.jsonl import read_jsonl
from rewards.curation import CurateConfig, Curator
from tests.curation.test_retrieval_and_pairs import story, write_jsonl

LIST_CUES = ("looking for what works", "looking for what fails")


class BlankBackend(Backend):
    """Replies blank (7 prompt tokens, 1 completion token: an end of turn) to every request, or
    only to the verdicts, answering the Positive and Negative agents with a list."""

    batch_size = 64

    def __init__(self, lists: bool = False):
        super().__init__("blank")
        self.lists = lists
        self.requests: list[ChatRequest] = []

    async def generate(self, requests: list[ChatRequest]) -> list[Completion]:
        self.requests.extend(requests)
        return [self.answer(r) for r in requests]

    def answer(self, r: ChatRequest) -> Completion:
        if self.lists and any(cue in r.messages[-1]["content"] for cue in LIST_CUES):
            return Completion(text=" Vivid.\n2. Fresh.", prompt_tokens=40, completion_tokens=6)
        return Completion(text="", prompt_tokens=7, completion_tokens=1)


def reasking_model(backend: Backend) -> Model:
    """A `Model` that would re-ask a blank sampled reply twice of its own accord."""
    policy = RetryPolicy(retries=0, backoff=0.0, max_backoff=0.0)
    assert policy.empty_retries == 2
    return Model(backend, policy=policy)


@pytest.mark.parametrize("retries", [0, 2])
def test_a_list_that_stays_blank_is_sent_once_per_agent_attempt(retries):
    backend = BlankBackend()
    scorer = CurationScorer(reasking_model(backend), settings=Settings(max_parse_retries=retries))
    (result,) = scorer.verdicts(["Comets"], ["A comet hums."])
    assert result["status"] == "failed" and result["phase"] == "debate"
    assert len(backend.requests) == 2 * (1 + retries)  # Positive and Negative, each 1 + its re-asks


@pytest.mark.parametrize("retries", [0, 1])
def test_a_sampled_verdict_that_stays_blank_is_sent_once_per_agent_attempt(retries):
    backend = BlankBackend(lists=True)
    scorer = CurationScorer(reasking_model(backend), settings=Settings(verdict="sample", max_parse_retries=retries))
    (result,) = scorer.verdicts(["Comets"], ["A comet hums."])
    assert result["status"] == "failed" and result["agent"] == "judge"
    verdicts = [r for r in backend.requests if not any(c in r.messages[-1]["content"] for c in LIST_CUES)]
    assert len(verdicts) == 4 * (1 + retries)  # four views, each 1 + its re-asks


def test_the_pipeline_sends_and_counts_each_attempt_once(tmp_path, monkeypatch):
    monkeypatch.setenv("SCIFI_CACHE_DIR", str(tmp_path / "cache"))
    stories = write_jsonl(tmp_path / "stories.jsonl", [story("single/p/0", "Comets", "A comet hums.")])
    cfg = CurateConfig(candidates=[str(stories)], out=str(tmp_path / "out"), k=0, max_parse_retries=2)
    backend = BlankBackend()
    with pytest.raises(PartialFailure, match="1 response"):
        Curator(cfg, model=reasking_model(backend)).run()
    assert len(backend.requests) == 2 * 3
    (failure,) = read_jsonl(tmp_path / "out" / "failed.jsonl")
    assert failure["usage"] == {"calls": 6, "prompt_tokens": 6 * 7, "completion_tokens": 6}
    assert len(list(read_jsonl(tmp_path / "out" / "calls.jsonl"))) == 6  # every attempt journaled, replayable
