"""Text preparation shared by the reference corpus and the story metrics.

Stories and reference works must go through the same tokenizer and chunker, otherwise the
lexical and semantic metrics would measure preprocessing differences instead of writing.
"""

from __future__ import annotations

import re

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


def chunk_words(text: str, size: int = 250) -> list[str]:
    """Split text into chunks of about `size` whitespace-separated words.

    The paper embeds its reference corpus in ~250-word chunks to stay within the encoder's input
    limit. A trailing tail shorter than `size / 2` joins the previous chunk so that no chunk is a
    near-empty fragment whose embedding would be dominated by a few words; a text of at most
    `size` words (a typical ~300-word story with a short tail) is a single chunk.

    Args:
        text: Text to split; whitespace (including newlines) is collapsed to single spaces.
        size: Target chunk length in words.

    Returns:
        The chunks; empty for a text without words.
    """
    if size < 1:
        raise ValueError(f"chunk size must be positive, got {size}")
    words = text.split()
    chunks = [words[i : i + size] for i in range(0, len(words), size)]
    if len(chunks) > 1 and len(chunks[-1]) < size / 2:
        chunks[-2].extend(chunks.pop())
    return [" ".join(chunk) for chunk in chunks]


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
