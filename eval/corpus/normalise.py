"""The normal form of a reference work: the bytes every copy of the corpus must share.

GITenberg serves each work in its Gutenberg source encoding (utf-8, latin-1 or cp1252) with CRLF
line ends. The corpus's cache key and content hash cover the works' bytes, so a fetched copy must
equal the curated one byte for byte: decoded from the source encoding, CRLF -> LF, no byte-order
mark, written as UTF-8.
"""

from __future__ import annotations

import hashlib

BOM = "\ufeff"


def normalise(raw: bytes, encoding: str) -> bytes:
    """The normal form of `raw` served in `encoding`.

    Raises:
        UnicodeDecodeError: `raw` is not valid in `encoding`.
    """
    text = raw.decode(encoding).removeprefix(BOM).replace("\r\n", "\n")
    return text.encode("utf-8")


def source_form(normal: bytes, encoding: str) -> bytes:
    """What a source server holds for a work whose normal form is `normal` (CRLF, `encoding`);
    `normalise` inverts it. The manifest script and the tests build mirrors with it."""
    return normal.decode("utf-8").replace("\n", "\r\n").encode(encoding)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
