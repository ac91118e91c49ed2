"""Every chunk the semantic metrics embed is read whole by the encoder (the bundled MiniLM).

MiniLM reads 256 word-pieces and drops the rest; ~250 words of fiction are ~330 of them, so
chunks cut by words alone lost their last quarter, and a ~300-word story (one chunk) its ending.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from eval.embed import Embedder
from eval.metrics.story import encode_chunks
from eval.reference import ReferenceCorpus

pytestmark = pytest.mark.slow  # loads the real encoder

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data" / "scifi-reference" / "texts"
SENTENCES = [
    "The quasar-lit orchards of Tycho-7 whispered while the navigator, Okonkwo-Reyes, recalibrated the gyroscopes.",
    "Nobody aboard the 2049 colony ship remembered rain; the hydroponic archivists catalogued its absence nightly.",
    "'Antidisestablishmentarianism,' muttered the xenolinguist, tracing phosphorescent glyphs on the bulkhead.",
    "Beyond Europa's ice, submarine cathedrals hummed with bioluminescent choirs and unfathomable arithmetic.",
]


@pytest.fixture(scope="module")
def minilm() -> Embedder:
    return Embedder()


def prose(n_words: int) -> str:
    words: list[str] = []
    while len(words) < n_words:
        words.extend(SENTENCES[len(words) % len(SENTENCES)].split())
    return " ".join(words[:n_words])


def record_encoded(embedder: Embedder, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts `embedder` is asked to embed (it still embeds them)."""
    seen: list[str] = []
    encode = embedder.encode
    monkeypatch.setattr(embedder, "encode", lambda texts, **kw: seen.extend(texts) or encode(texts, **kw))
    return seen


def token_lengths(embedder: Embedder, texts: list[str]) -> list[int]:
    """Word-pieces of each text as the encoder tokenizes it, special tokens included."""
    return [len(ids) for ids in embedder.model.tokenizer(texts, verbose=False)["input_ids"]]


def test_no_chunk_of_a_long_story_exceeds_the_encoders_input(minilm, monkeypatch) -> None:
    story = prose(3000)
    seen = record_encoded(minilm, monkeypatch)
    (chunks,) = encode_chunks(minilm, [story])
    assert len(chunks.vectors) == len(seen) > 1
    assert max(token_lengths(minilm, seen)) <= minilm.model.max_seq_length
    assert " ".join(seen) == story  # every word embedded once, in order
    assert max(len(c.split()) for c in seen) <= 250


def test_no_chunk_of_a_reference_work_exceeds_the_encoders_input(minilm, monkeypatch, tmp_path) -> None:
    works = sorted(SHARED.glob("*.txt"), key=lambda p: p.stat().st_size)[:2] if SHARED.is_dir() else []
    if not works:
        pytest.skip(f"no reference corpus at {SHARED}")
    corpus_dir = tmp_path / "corpus"
    corpus_dir.mkdir()
    for work in works:
        shutil.copy(work, corpus_dir / work.name)
    seen = record_encoded(minilm, monkeypatch)
    corpus = ReferenceCorpus.load(corpus_dir, minilm, cache_dir=tmp_path / "cache")
    assert len(seen) == len(corpus.chunk_ids) > 10
    assert max(token_lengths(minilm, seen)) <= minilm.model.max_seq_length
    assert corpus.fingerprint()["token_limit"] == minilm.model.max_seq_length - 2  # [CLS] and [SEP]
    texts = corpus.chunk_texts(minilm)
    assert [texts[cid] for cid in corpus.chunk_ids] == seen  # cut again as the embedded chunks were


def test_a_storys_last_words_change_its_embedding(minilm) -> None:
    """A ~300-word story was one chunk of ~400 word-pieces: its last ~100 words were never read."""
    story = prose(300)
    other_ending = " ".join(story.split()[:-40] + ["silence"] * 40)
    a, b = encode_chunks(minilm, [story, other_ending])
    assert float(np.dot(a.story_vector, b.story_vector)) < 0.99
