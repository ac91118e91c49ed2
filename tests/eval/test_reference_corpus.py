"""Reference corpus loading, on-disk caching and the 'unavailable' path."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import numpy as np
import pytest

from eval.embed import Embedder
from eval.reference import ReferenceCorpus, ReferenceUnavailable, load_reference
from tests.embedders import CountingEmbedder

CHUNK_IDS = ["oceans.txt#0", "robots.txt#0", "rockets.txt#0", "rockets.txt#1"]


def test_load_strips_chunks_and_counts(tiny_corpus: Path, counting_embedder, tmp_path: Path) -> None:
    corpus = ReferenceCorpus.load(tiny_corpus, counting_embedder, cache_dir=tmp_path / "cache")
    assert corpus.chunk_ids == CHUNK_IDS
    assert corpus.embeddings.shape == (4, 8) and corpus.embeddings.dtype == np.float32
    assert (corpus.counts["moon"], corpus.counts["dreamed"], corpus.counts["waves"]) == (120, 100, 30)
    assert not {"gutenberg", "produced", "volunteers", "licence"} & set(corpus.counts)
    assert (corpus.embedder_name, corpus.chunk_size) == ("counting-fake", 250)


def test_second_load_reuses_cache(tiny_corpus: Path, counting_embedder, tmp_path: Path) -> None:
    first = ReferenceCorpus.load(tiny_corpus, counting_embedder, cache_dir=tmp_path)
    second = ReferenceCorpus.load(tiny_corpus, counting_embedder, cache_dir=tmp_path)
    assert counting_embedder.calls == [4]
    np.testing.assert_array_equal(first.embeddings, second.embeddings)
    assert (second.chunk_ids, second.counts) == (first.chunk_ids, first.counts)


def test_cache_key_covers_content_chunk_size_and_embedder(tiny_corpus: Path, counting_embedder, tmp_path: Path) -> None:
    ReferenceCorpus.load(tiny_corpus, counting_embedder, cache_dir=tmp_path)
    ReferenceCorpus.load(tiny_corpus, counting_embedder, cache_dir=tmp_path, chunk_size=100)
    (tiny_corpus / "oceans.txt").write_text("a different ocean story", encoding="utf-8")
    ReferenceCorpus.load(tiny_corpus, counting_embedder, cache_dir=tmp_path)
    renamed = type(counting_embedder)(name="another-fake")
    ReferenceCorpus.load(tiny_corpus, renamed, cache_dir=tmp_path)
    assert len(counting_embedder.calls) == 3 and len(renamed.calls) == 1


def test_another_encoder_under_the_same_name_is_not_served_the_cached_embeddings(
        tiny_corpus: Path, tmp_path: Path) -> None:
    """The cache key holds what the encoder is (here: its directory's files), not only its name."""
    model = tmp_path / "models" / "my-encoder"
    model.mkdir(parents=True)
    (model / "model.safetensors").write_bytes(b"first weights")
    first = CountingEmbedder(str(model))
    before = ReferenceCorpus.load(tiny_corpus, first, cache_dir=tmp_path / "cache")
    (model / "model.safetensors").write_bytes(b"other weights")
    second = CountingEmbedder(str(model), dim=4)
    after = ReferenceCorpus.load(tiny_corpus, second, cache_dir=tmp_path / "cache")
    assert first.calls == [4] and second.calls == [4]
    assert after.embeddings.shape == (4, 4)
    assert before.fingerprint()["embedder_id"] != after.fingerprint()["embedder_id"]
    assert before.fingerprint()["embedder"] == after.fingerprint()["embedder"] == str(model)


def test_the_fingerprint_names_the_encoder_and_its_token_limit(tiny_corpus: Path, counting_embedder,
                                                               tmp_path: Path) -> None:
    corpus = ReferenceCorpus.load(tiny_corpus, counting_embedder, cache_dir=tmp_path)
    cached = ReferenceCorpus.load(tiny_corpus, counting_embedder, cache_dir=tmp_path)
    assert corpus.fingerprint() == cached.fingerprint()
    assert corpus.fingerprint()["embedder_id"] == "counting-fake"
    assert corpus.fingerprint()["token_limit"] is None  # a fake without a tokenizer: cut by words


def test_a_cache_that_refuses_the_embeddings_does_not_lose_them(tiny_corpus: Path, counting_embedder, tmp_path: Path,
                                                                 monkeypatch, caplog) -> None:
    """Embedding the full corpus takes half an hour: a full disk or an unusable cache directory is
    one warning, and the corpus is still returned, with nothing half-written left behind."""
    not_a_dir = tmp_path / "cache-file"
    not_a_dir.write_text("a file where the cache directory should be", encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="eval.reference"):
        corpus = ReferenceCorpus.load(tiny_corpus, counting_embedder, cache_dir=not_a_dir)
    assert corpus.chunk_ids == CHUNK_IDS and corpus.embeddings.shape == (4, 8)
    assert "cannot cache the embeddings" in caplog.text

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(np, "save", disk_full)
    with caplog.at_level(logging.WARNING, logger="eval.reference"):
        corpus = ReferenceCorpus.load(tiny_corpus, counting_embedder, cache_dir=tmp_path / "cache")
    assert corpus.chunk_ids == CHUNK_IDS and "No space left on device" in caplog.text
    assert list((tmp_path / "cache" / "reference").iterdir()) == []  # no staging directory left


def test_hidden_files_beside_the_works_are_not_read_as_works(tiny_corpus: Path, counting_embedder,
                                                             tmp_path: Path) -> None:
    """A corpus copied from macOS has a `._<work>.txt` resource fork beside each work: binary noise
    that must not enter the counts, chunks or corpus hash."""
    clean = ReferenceCorpus.load(tiny_corpus, counting_embedder, cache_dir=tmp_path / "cache")
    (tiny_corpus / "._rockets.txt").write_bytes(b"\x00\x05\x16\x07Mac OS X        ATTR resource fork " * 40)
    copied = ReferenceCorpus.load(tiny_corpus, counting_embedder, cache_dir=tmp_path / "cache")
    assert copied.content_sha256 == clean.content_sha256 and copied.chunk_ids == CHUNK_IDS
    assert copied.counts == clean.counts and counting_embedder.calls == [4]


def test_a_partial_copy_of_the_manifests_corpus_is_named_as_such(tiny_corpus: Path, counting_embedder,
                                                                 tmp_path: Path, monkeypatch, caplog) -> None:
    """A directory is used as given, but a copy of the committed corpus cut short (or edited) does not
    pass for it without a word: one warning per directory says how it differs."""
    rows = ["file\tsource_encoding\turl\tsha256"] + [
        f"{name}\tutf-8\thttps://example.invalid/{name}\t"
        f"{hashlib.sha256((tiny_corpus / name).read_bytes()).hexdigest()}"
        for name in ("oceans.txt", "robots.txt", "rockets.txt")]
    manifest = tmp_path / "works.tsv"
    manifest.write_text("\n".join(rows) + "\n", encoding="utf-8")
    monkeypatch.setattr("eval.corpus.manifest.DEFAULT_MANIFEST", manifest)
    with caplog.at_level(logging.WARNING, logger="eval.reference"):
        ReferenceCorpus.load(tiny_corpus, counting_embedder, cache_dir=tmp_path / "cache")  # the whole corpus
        assert caplog.text == ""
        (tiny_corpus / "robots.txt").unlink()  # a copy cut short
        for _ in range(2):
            ReferenceCorpus.load(tiny_corpus, counting_embedder, cache_dir=tmp_path / "cache")
    (line,) = [r.getMessage() for r in caplog.records]
    assert line.startswith(f"reference corpus: {tiny_corpus} holds 2 of the manifest's 3 works (1 missing, 0 with "
                           "other bytes, 0 not in it)")


def test_max_chunks_samples_reproducibly(tiny_corpus: Path, counting_embedder, tmp_path: Path) -> None:
    full = ReferenceCorpus.load(tiny_corpus, counting_embedder, cache_dir=tmp_path)
    sample = ReferenceCorpus.load(tiny_corpus, counting_embedder, cache_dir=tmp_path, max_chunks=2, seed=1)
    again = ReferenceCorpus.load(tiny_corpus, counting_embedder, cache_dir=tmp_path, max_chunks=2, seed=1)
    assert counting_embedder.calls == [4, 2]
    assert len(sample.chunk_ids) == 2 and set(sample.chunk_ids) <= set(CHUNK_IDS)
    assert sample.chunk_ids == sorted(sample.chunk_ids, key=CHUNK_IDS.index)
    assert again.chunk_ids == sample.chunk_ids
    assert sample.counts == full.counts  # unigram counts always cover the whole corpus


def test_default_cache_dir_from_environment(tiny_corpus: Path, counting_embedder, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SCIFI_CACHE_DIR", str(tmp_path / "envcache"))
    ReferenceCorpus.load(tiny_corpus, counting_embedder)
    assert list((tmp_path / "envcache" / "reference").glob("*/embeddings.npy"))


def test_reference_dir_from_environment(tiny_corpus: Path, counting_embedder, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SCIFI_REFERENCE_DIR", str(tiny_corpus))
    corpus = load_reference(embedder=counting_embedder, cache_dir=tmp_path)
    assert corpus is not None and corpus.chunk_ids == CHUNK_IDS


def _with(tmp: Path, add) -> Path:
    """A corpus of one readable work plus what `add` puts beside it (a work that cannot be read)."""
    directory = tmp / "corpus"
    directory.mkdir()
    (directory / "pg1.txt").write_text("A readable tale of Mars.\n", encoding="utf-8")
    add(directory)
    return directory


@pytest.mark.parametrize(
    ("make_dir", "reason"),
    [
        (None, "no corpus found; run `review-lab corpus fetch`"),
        (lambda tmp: tmp / "nowhere", "is not a directory"),
        (lambda tmp: tmp, "no .txt files"),
        (lambda tmp: _with(tmp, lambda d: (d / "pg35.txt").symlink_to(tmp / "moved-away.txt")),
         "pg35.txt: No such file or directory"),
        (lambda tmp: _with(tmp, lambda d: (d / "notes.txt").mkdir()), "notes.txt: Is a directory"),
    ],
    ids=["unset", "missing", "empty", "dangling-link", "directory"],
)
def test_unavailable_reference_returns_none_with_message(
    tmp_path: Path, counting_embedder, monkeypatch, caplog: pytest.LogCaptureFixture, make_dir, reason: str
) -> None:
    monkeypatch.delenv("SCIFI_REFERENCE_DIR", raising=False)
    monkeypatch.setenv("SCIFI_CACHE_DIR", str(tmp_path / "cache"))  # no fetched copy either
    directory = make_dir(tmp_path) if make_dir else None
    with caplog.at_level(logging.WARNING, logger="eval.reference"):
        assert load_reference(directory, counting_embedder, cache_dir=tmp_path / "cache") is None
    assert "reference metrics unavailable: " in caplog.text and reason in caplog.text
    assert counting_embedder.calls == []


def test_corpus_without_words_is_unavailable(tmp_path: Path, counting_embedder) -> None:
    (tmp_path / "blank.txt").write_text("  \n\n\t\n", encoding="utf-8")
    with pytest.raises(ReferenceUnavailable, match="hold no words"):
        ReferenceCorpus.load(tmp_path, counting_embedder, cache_dir=tmp_path / "cache")


@pytest.mark.slow
def test_real_minilm_cache_reuse(tiny_corpus: Path, tmp_path: Path, monkeypatch) -> None:
    embedder = Embedder()
    calls = []
    encode = embedder.encode
    monkeypatch.setattr(embedder, "encode", lambda texts, **kw: calls.append(len(texts)) or encode(texts, **kw))
    first = ReferenceCorpus.load(tiny_corpus, embedder, cache_dir=tmp_path)
    second = ReferenceCorpus.load(tiny_corpus, embedder, cache_dir=tmp_path)
    n = len(first.chunk_ids)  # more than the 4 chunks cut by words: 250 words are over 254 word-pieces
    assert calls == [n] and n > 4 and first.fingerprint()["token_limit"] == second.fingerprint()["token_limit"] == 254
    assert first.embeddings.shape == (n, 384) and first.embeddings.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(first.embeddings, axis=1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(first.embeddings, second.embeddings)
    assert embedder.encode([]).shape == (0, 384)
