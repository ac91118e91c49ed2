"""A tiny prose corpus for the weak-label recipe (the evaluation's tiny corpus has no sentences)."""

from __future__ import annotations

import random

import pytest

from tests.eval.conftest import write_work

NOUNS = ["pilot", "engineer", "robot", "captain", "stranger", "child", "doctor", "signal"]
PLACES = ["the red desert", "the orbital dock", "the frozen moon", "the drowned city", "the long corridor"]


def prose(seed: int, sentences_: int = 120) -> str:
    rng = random.Random(seed)
    return " ".join(f"The {rng.choice(NOUNS)} walked toward {rng.choice(PLACES)} while the lamps burned low."
                    if i % 2 else f"Nobody spoke of the {rng.choice(NOUNS)} again, and the wind kept {i} secrets."
                    for i in range(sentences_))


@pytest.fixture
def prose_corpus(tmp_path):
    """Six Gutenberg-style works of ~1,500 words of plain sentences."""
    directory = tmp_path / "corpus"
    directory.mkdir()
    for i in range(6):
        write_work(directory, f"work{i}", "CONTENTS\n\nCHAPTER I\n\n" + prose(i))
    return directory
