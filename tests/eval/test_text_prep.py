"""Tokenizing, chunking and Gutenberg boilerplate removal."""

from __future__ import annotations

import numpy as np
import pytest

from eval.text import chunk_words, strip_gutenberg, word_tokens


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The Ship's AI said: don't!", ["the", "ship's", "ai", "said", "don't"]),
        ("Don\u2019t panic, 42 robots.", ["don't", "panic", "42", "robots"]),
        ("_italic_ words--dashed", ["italic", "words", "dashed"]),
        ("'quoted' rock'n'roll", ["quoted", "rock'n'roll"]),
        ("café naïve", ["café", "naïve"]),
        ("", []),
    ],
)
def test_word_tokens(text: str, expected: list[str]) -> None:
    assert word_tokens(text) == expected


def _words(n: int) -> str:
    return " ".join(f"w{i}" for i in range(n))


@pytest.mark.parametrize(
    ("n_words", "size", "expected_lengths"),
    [
        (0, 250, []),
        (1, 250, [1]),
        (250, 250, [250]),
        (300, 250, [300]),  # tail of 50 < 125 merges: a ~300-word story is one chunk
        (374, 250, [374]),  # tail of 124 < 125 merges
        (375, 250, [250, 125]),  # tail of exactly size/2 stays separate
        (600, 250, [250, 350]),
        (750, 250, [250, 250, 250]),
        (10, 4, [4, 4, 2]),
        (9, 4, [4, 5]),
    ],
)
def test_chunk_lengths(n_words: int, size: int, expected_lengths: list[int]) -> None:
    assert [len(c.split()) for c in chunk_words(_words(n_words), size)] == expected_lengths


def test_chunks_keep_word_order_and_collapse_whitespace() -> None:
    text = "alpha  beta\n\ngamma\tdelta epsilon"
    assert chunk_words(text, size=2) == ["alpha beta", "gamma delta", "epsilon"]
    assert chunk_words(text, size=4) == ["alpha beta gamma delta epsilon"]
    assert " ".join(chunk_words(_words(1000))) == _words(1000)


def test_chunk_size_must_be_positive() -> None:
    with pytest.raises(ValueError):
        chunk_words("a b c", size=0)


def _token_lengths(chunks: list[str], tokens: dict[str, int]) -> list[int]:
    return [sum(tokens[w] for w in chunk.split()) for chunk in chunks]


@pytest.mark.parametrize("seed", range(20))
def test_token_limited_chunks_never_exceed_the_limit_nor_the_word_size(seed: int) -> None:
    """The encoder drops what is past its limit: a chunk cut by words alone lost its end."""
    rng = np.random.default_rng(seed)
    n, size, limit = int(rng.integers(1, 1500)), int(rng.integers(20, 300)), int(rng.integers(30, 400))
    words = [f"w{i}" for i in range(n)]
    tokens = dict(zip(words, rng.integers(1, 4, size=n).tolist()))
    chunks = chunk_words(" ".join(words), size, token_counts=[tokens[w] for w in words], token_limit=limit)
    assert " ".join(chunks) == " ".join(words)
    assert max(_token_lengths(chunks, tokens)) <= limit
    merged_tail = len(chunks[-1].split()) < 1.5 * size  # only a merged short tail may pass `size` words
    assert all(len(c.split()) <= size for c in chunks[:-1]) and merged_tail


@pytest.mark.parametrize(
    ("n_words", "tokens_per_word", "limit", "expected_lengths"),
    [
        (300, 1, 400, [300]),  # a short tail merges when the merged chunk still fits
        (300, 2, 600, [300]),
        (300, 2, 500, [150, 150]),  # 250 + 50 words: 600 tokens do not fit, so split evenly
        (600, 2, 300, [150, 150, 150, 150]),  # token-bound: 150 words a chunk
        (500, 2, 300, [150, 150, 100, 100]),  # a 50-word tail: the last two chunks split evenly
        (120, 2, 100, [50, 35, 35]),  # the tail is short in tokens (40 < 100 / 2)
        (130, 2, 100, [50, 50, 30]),  # 60 tokens: not short, kept
    ],
)
def test_token_limited_chunk_lengths(n_words, tokens_per_word, limit, expected_lengths) -> None:
    chunks = chunk_words(_words(n_words), 250, token_counts=[tokens_per_word] * n_words, token_limit=limit)
    assert [len(c.split()) for c in chunks] == expected_lengths


def test_a_word_longer_than_the_limit_is_a_chunk_of_its_own() -> None:
    chunks = chunk_words("a b huge c d", 250, token_counts=[1, 1, 50, 1, 1], token_limit=10)
    assert chunks == ["a b", "huge", "c d"]


def test_token_counts_must_match_the_words() -> None:
    with pytest.raises(ValueError):
        chunk_words("a b c", 250, token_counts=[1, 1], token_limit=10)


MODERN = """The Project Gutenberg EBook of Star Tale, by A. Writer

This eBook is for the use of anyone anywhere at no cost.

*** START OF THIS PROJECT GUTENBERG EBOOK STAR TALE ***




Produced by Jane Doe and the Online Distributed
Proofreading Team


STAR TALE

The comet sang over the dunes.

It was the last night.



End of the Project Gutenberg EBook of Star Tale, by A. Writer

*** END OF THIS PROJECT GUTENBERG EBOOK STAR TALE ***

***** This file should be named 123.txt *****
Section 1. General Terms of Use
"""

SMALL_PRINT = """Project Gutenberg Etext: Old Voyage, by B. Author

Copyright laws are changing all over the world.

**Welcome To The World of Free Plain Vanilla Electronic Texts**

***START**THE SMALL PRINT!**FOR PUBLIC DOMAIN ETEXTS**START***
Why is this "Small Print!" statement here?  You know: lawyers.
*END*THE SMALL PRINT! FOR PUBLIC DOMAIN ETEXTS*Ver.04.29.93*END*

This etext was prepared by John Smith.

OLD VOYAGE

We sailed to the moon in a brass shell.

End of Project Gutenberg Etext: Old Voyage, by B. Author
"""

NO_SPACE_MARKERS = """header words
***START OF THE PROJECT GUTENBERG EBOOK RALPH***
The body stays.
***END OF THE PROJECT GUTENBERG EBOOK RALPH***
footer words
"""


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (MODERN, "STAR TALE\n\nThe comet sang over the dunes.\n\nIt was the last night."),
        (SMALL_PRINT, "OLD VOYAGE\n\nWe sailed to the moon in a brass shell."),
        (NO_SPACE_MARKERS, "The body stays."),
        (
            "Legal words.\n*END THE SMALL PRINT! FOR PUBLIC DOMAIN EBOOKS*Ver.02/11/02*END*\nA tale.\n",
            "A tale.",
        ),
        ("*** START OF THE PROJECT GUTENBERG EBOOK X ***\nNo footer here.\n", "No footer here."),
        ("  Just a story, no boilerplate.\n", "Just a story, no boilerplate."),
    ],
    ids=["modern", "small-print", "no-space-markers", "small-print-2002", "no-footer", "plain"],
)
def test_strip_gutenberg(raw: str, expected: str) -> None:
    assert strip_gutenberg(raw) == expected
