"""Text preparation shared by the reference corpus and the story metrics.

Stories and reference works must go through the same tokenizer and chunker, otherwise the
lexical and semantic metrics would measure preprocessing differences instead of writing.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import numpy as np

# A word is a run of letters/digits, optionally joined by apostrophes ("don't", "ship's").
# `[^\W_]` excludes the underscore, which Gutenberg uses to mark italics (_word_).
_WORD_RE = re.compile(r"[^\W_]+(?:'[^\W_]+)*")
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})

_FLAGS = re.IGNORECASE | re.MULTILINE
_START_MARKER = re.compile(r"^[ \t]*\*{3}[ \t]*START OF (?:THE|THIS) PROJECT GUTENBERG[^\n]*$", _FLAGS)
# Pre-2000 texts have no START marker: their legal header ends with this line instead.
_SMALL_PRINT_END = re.compile(r"^[^\n]*\*END\*?[ \t]*THE SMALL PRINT[^\n]*$", _FLAGS)
# Matches "*** END OF THIS PROJECT GUTENBERG EBOOK X ***" and the plain-text lines that precede
# or replace it ("End of the Project Gutenberg EBook of X", "End of Project Gutenberg Etext").
_END_MARKER = re.compile(r"^[ \t]*(?:\*{3}[ \t]*)?END OF (?:THE |THIS )?PROJECT GUTENBERG", _FLAGS)
# Digitisation credits right after the header ("Produced by ...", "This etext was prepared by
# ...") are Gutenberg's, not the work's. Transcriber's notes are left alone: they sit anywhere in
# the front matter and weigh a few dozen words per work.
_CREDIT_PARAGRAPH = re.compile(
    r"\A\s*(?:produced by|e-?text prepared by|this (?:project gutenberg )?e-?(?:text|book) was"
    r"|note: project gutenberg)[^\n]*(?:\n[ \t]*\S[^\n]*)*",
    re.IGNORECASE,
)


def word_tokens(text: str) -> list[str]:
    """Lowercased word tokens for unigram statistics.

    Curly apostrophes are folded into ASCII ones so that "don’t" and "don't" count as one word
    whether the text came from a model or from a Gutenberg file.

    Args:
        text: Any text.

    Returns:
        The words in order of appearance.
    """
    return _WORD_RE.findall(text.lower().translate(_APOSTROPHES))


def chunk_words(text: str, size: int = 250, *, token_counts: Sequence[int] | None = None,
                token_limit: int | None = None) -> list[str]:
    """Split text into chunks of at most `size` whitespace-separated words that the encoder reads whole.

    The paper embeds its reference corpus in ~250-word chunks so that each fits its encoder. An
    encoder reads a fixed number of word-pieces (MiniLM 256, mpnet 384, special tokens included)
    and silently drops the rest, and 250 words of fiction are ~330 word-pieces: cut by words
    alone, most chunks lost their last quarter. So with `token_counts` (each word's word-pieces
    in the encoder's tokenizer, `eval.embed.Embedder.chunk`) a chunk also ends before it would
    exceed `token_limit`.

    A trailing tail shorter than half a chunk (`size / 2` words and `token_limit / 2` tokens)
    joins the previous chunk when the merged chunk still fits the encoder, so that no chunk is a
    near-empty fragment whose embedding a few words dominate (a ~300-word story is one chunk when
    the encoder reads it whole); when it does not fit, the last two chunks are split evenly by
    tokens instead. Without token counts only the word rule applies. A single word longer than
    `token_limit` is a chunk of its own (the encoder truncates it; nothing else can be done).

    Args:
        text: Text to split; whitespace (including newlines) is collapsed to single spaces.
        size: Most words per chunk (before a short tail is merged).
        token_counts: Tokens of each of `text.split()`'s words; None to chunk by words alone.
        token_limit: Most tokens per chunk (the encoder's input less its special tokens).

    Returns:
        The chunks; empty for a text without words.
    """
    if size < 1:
        raise ValueError(f"chunk size must be positive, got {size}")
    words = text.split()
    if token_counts is None or token_limit is None:
        counts, limit = np.ones(len(words), dtype=np.int64), math.inf
    else:
        counts, limit = np.asarray(token_counts, dtype=np.int64), token_limit
        if len(counts) != len(words) or limit < 1:
            raise ValueError(f"need one token count per word ({len(counts)} for {len(words)}) and a positive limit")
    bounds = np.concatenate([[0], np.cumsum(counts)])
    return [" ".join(words[a:b]) for a, b in _spans(bounds, size, limit)]


def _spans(bounds: np.ndarray, size: int, limit: float) -> list[tuple[int, int]]:
    """Word ranges [a, b) of the chunks; `bounds[i]` is the number of tokens before word i."""
    n, spans, start = len(bounds) - 1, [], 0
    while start < n:
        fits = int(np.searchsorted(bounds, bounds[start] + limit, side="right")) - 1
        end = max(start + 1, min(start + size, n, fits))
        spans.append((start, end))
        start = end
    if len(spans) < 2:
        return spans
    (a, b), (_, d) = spans[-2], spans[-1]
    if d - b < size / 2 and bounds[d] - bounds[b] < limit / 2:  # a short tail
        if bounds[d] - bounds[a] <= limit:
            spans[-2:] = [(a, d)]
        elif bounds[b] - bounds[a] <= limit:  # (not after a lone word over the limit)
            spans[-2:] = _even(bounds, a, d, size, limit)
    return spans


def _even(bounds: np.ndarray, a: int, d: int, size: int, limit: float) -> list[tuple[int, int]]:
    """Words [a, d) in two chunks of about equal tokens, each within `size` words and `limit` tokens."""
    low = max(a + 1, d - size, int(np.searchsorted(bounds, bounds[d] - limit, side="left")))
    high = min(d - 1, a + size, int(np.searchsorted(bounds, bounds[a] + limit, side="right")) - 1)
    middle = int(np.searchsorted(bounds, (bounds[a] + bounds[d]) / 2))
    cut = min({min(max(c, low), high) for c in (middle - 1, middle)},
              key=lambda c: max(bounds[c] - bounds[a], bounds[d] - bounds[c]))
    return [(a, cut), (cut, d)]


def strip_gutenberg(text: str) -> str:
    """Remove Project Gutenberg header, footer and licence boilerplate.

    Handles the modern "*** START OF THE/THIS PROJECT GUTENBERG EBOOK ..." / "*** END OF ..."
    markers, the pre-2000 header that ends with "*END*THE SMALL PRINT! ...", and the
    "End of the Project Gutenberg EBook of ..." line. A text with no recognised marker is
    returned unchanged apart from surrounding whitespace.

    Args:
        text: The full contents of a Gutenberg plain-text file.

    Returns:
        The body of the work.
    """
    header = _START_MARKER.search(text) or _SMALL_PRINT_END.search(text)
    start = header.end() if header else 0
    footer = _END_MARKER.search(text, start)
    body = text[start : footer.start() if footer else len(text)].strip()
    while credit := _CREDIT_PARAGRAPH.match(body):
        body = body[credit.end() :].strip()
    return body


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# A Python string holds code points: json.loads joins valid surrogate pairs, so any surrogate
# left in a string is a lone half.
_SURROGATE = re.compile("[\ud800-\udfff]")


def sanitize(text: str) -> tuple[str, list[str]]:
    """Text every model and encoder can take, and what had to change to get it.

    NUL and other control bytes (tab and newlines excepted) are removed: C tokenizers and servers
    treat NUL as the end of a string. Lone surrogates (invalid UTF-16 halves that JSON can carry)
    become U+FFFD: they cannot be encoded as UTF-8, so hashing, tokenizing or writing them fails.

    Returns:
        (clean text, notes): one note per kind of change, e.g. "removed 2 control characters";
        no notes when the text was already clean.
    """
    notes = []
    fixed, n = _SURROGATE.subn("\ufffd", text)
    if n:
        notes.append(f"replaced {n} invalid surrogate(s)")
    stripped, n = _CONTROL.subn("", fixed)
    if n:
        notes.append(f"removed {n} control character(s)")
    return stripped, notes
