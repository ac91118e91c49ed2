"""The leak check on given candidate runs: no preference pair may answer an evaluation prompt."""

from __future__ import annotations

import json

import pytest

from generate.common.errors import UsageError
from generate.datasets import Task
from train.signals import candidates

EVAL = Task(id="e1", aspect="world-building", prompt="Write a story about a lighthouse on Europa.")


def _run(tmp_path, prompt: str):
    path = tmp_path / "stories.jsonl"
    path.write_text(json.dumps({"prompt_id": "p1", "prompt": prompt, "text": "story"}) + "\n")
    return str(path)


@pytest.mark.parametrize("prompt", [EVAL.prompt, "  write a story about a LIGHTHOUSE on Europa. ",
                                    "Write a story about a lighthouse\non  Europa."])
def test_a_candidate_answering_an_evaluation_prompt_is_refused_whatever_its_spacing_or_case(tmp_path, prompt):
    with pytest.raises(UsageError, match="answer evaluation prompts"):
        candidates(tmp_path / "out", [_run(tmp_path, prompt)], [], [EVAL], "w", 16, 0, {})


def test_candidates_on_other_prompts_are_kept(tmp_path):
    given = _run(tmp_path, "Write a story about a lighthouse on Titan.")
    assert candidates(tmp_path / "out", [given], [], [EVAL], "w", 16, 0, {}) == [tmp_path / "stories.jsonl"]
