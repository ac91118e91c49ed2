"""Retrieval index (build, cache, nearest), candidate loading, preference pairs, label agreement."""

from __future__ import annotations

import json

import numpy as np
import pytest

from eval.scorers.curation.retrieval import RetrievalIndex
from eval.scorers.curation.scorer import response_key
from generate.common.errors import UsageError
from rewards.curation.data import agreement, build_pairs, load_candidates
from tests.embedders import CountingEmbedder
from tests.train.conftest import write_corpus


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def sources(tmp_path, monkeypatch):
    monkeypatch.setenv("SCIFI_CACHE_DIR", str(tmp_path / "cache"))
    exemplars = write_jsonl(tmp_path / "exemplars.jsonl", [
        {"prompt": "A comet story", "response": "The comet's tail combed the dark like silver hair."},
        {"prompt": "A robot story", "response": "The robot kept a garden nobody asked for."},
    ])
    return exemplars, write_corpus(tmp_path / "corpus")


def test_the_index_is_built_once_and_then_read_from_the_cache(sources):
    exemplars, corpus = sources
    embedder = CountingEmbedder()
    index = RetrievalIndex.build(embedder, exemplars, corpus)
    assert embedder.calls == [2, 4]  # the exemplars, then the corpus's 4 chunks
    assert [e.id for e in index.examples] == ["exemplar:1", "exemplar:2", "oceans.txt#0", "robots.txt#0",
                                              "rockets.txt#0", "rockets.txt#1"]
    assert index.examples[4].text.startswith("rocket0 flew past the moon")  # the evaluation's own chunks
    again = RetrievalIndex.build(embedder, exemplars, corpus)
    assert embedder.calls == [2, 4]
    assert np.array_equal(again.vectors, index.vectors) and again.fingerprint == index.fingerprint
    exemplars.write_text(exemplars.read_text() + json.dumps({"response": "A new trusted passage."}) + "\n")
    RetrievalIndex.build(embedder, exemplars, corpus)
    assert embedder.calls == [2, 4, 3]  # new exemplar bytes: a new cache entry


class TokenEmbedder(CountingEmbedder):
    """An encoder that reads at most 120 tokens, 2 a word, and records every text it embedded: its
    chunks are 60 words, not the 250 a cut by words alone would make."""

    def __init__(self) -> None:
        super().__init__("token-fake")
        self.embedded: list[str] = []

    @property
    def token_limit(self) -> int:
        return 120

    def count_tokens(self, texts):
        return [np.full(len(t.split()), 2) for t in texts]

    def encode(self, texts, batch_size: int = 32, show_progress: bool = False) -> np.ndarray:
        self.embedded.extend(texts)
        return super().encode(texts, batch_size, show_progress)


def test_retrieved_corpus_passages_are_the_chunks_the_encoder_embedded(sources):
    """A passage's text must be the one its vector embeds: the corpus is cut by the encoder's tokens,
    so re-cutting it by words named other chunks (or failed with "no longer matches")."""
    _, corpus = sources
    embedder = TokenEmbedder()
    index = RetrievalIndex.build(embedder, reference_dir=corpus)
    assert len(embedder.embedded) > 4  # more, shorter chunks than the 4 of a cut by words
    assert [e.text for e in index.examples] == embedder.embedded
    cached = RetrievalIndex.build(TokenEmbedder(), reference_dir=corpus)  # ids from the cache, texts cut again
    assert [e.text for e in cached.examples] == embedder.embedded
    assert np.array_equal(cached.vectors, embedder.encode([e.text for e in cached.examples]))


def test_nearest_returns_the_k_most_similar_examples_per_query(sources):
    exemplars, _ = sources
    embedder = CountingEmbedder()
    index = RetrievalIndex.build(embedder, exemplars)
    target = index.examples[1]
    # CountingEmbedder maps equal texts to equal vectors: a query equal to an embedded text finds it.
    found = index.nearest([f"{target.source}\n{target.text}", "anything"], embedder, k=2)
    assert found[0][0] == target and len(found[1]) == 2
    assert index.nearest(["q"], embedder, k=0) == [[]]


def test_retrieval_needs_a_source_and_valid_exemplars(tmp_path):
    with pytest.raises(UsageError, match="--k 0"):
        RetrievalIndex.build(CountingEmbedder())
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"prompt": "p"}])
    with pytest.raises(UsageError, match="bad.jsonl:1"):
        RetrievalIndex.build(CountingEmbedder(), bad)


def story(sid, prompt, text, **extra):
    return {"story_id": sid, "prompt_id": "p", "framework": "single", "prompt": prompt, "text": text, **extra}


def test_candidates_are_distinct_responses_identified_by_prompt_and_text(tmp_path):
    a = write_jsonl(tmp_path / "a.jsonl", [story("single/p/single", "Comets", "Tale one."),
                                           story("single/p/single2", "Comets", "Tale one.")])  # same text: one
    b = write_jsonl(tmp_path / "b.jsonl", [story("single/p/single", "Comets", "Tale two."),  # id reused by a run
                                           {"prompt": "Robots", "response": "A labelled tale.", "label": 1}])
    candidates = load_candidates([str(a), str(b)])
    assert [c.text for c in candidates] == ["Tale one.", "Tale two.", "A labelled tale."]
    assert candidates[0].key == response_key("Comets", "Tale one.") and candidates[2].label == 1
    assert candidates[0].prompt_sha256 == candidates[1].prompt_sha256 != candidates[2].prompt_sha256
    with pytest.raises(UsageError, match="label must be 0 or 1"):
        load_candidates([str(write_jsonl(tmp_path / "c.jsonl", [{"prompt": "x", "response": "y", "label": 3}]))])
    with pytest.raises(UsageError, match="not found"):
        load_candidates([str(tmp_path / "missing.jsonl")])


def judged(key, prompt_hash, final, text=None, label=None):
    return {"key": key, "story_id": f"s/{key}", "prompt_sha256": prompt_hash, "prompt_id": prompt_hash,
            "aspect": "a", "prompt": f"task {prompt_hash}", "text": text or f"text {key}", "final": final,
            "label": label}


def test_pairs_join_good_and_bad_responses_to_the_same_prompt_only():
    writer = lambda task: [{"role": "user", "content": f"Write: {task}"}]
    judgments = [judged("g1", "P", 1), judged("b1", "P", 0), judged("b2", "P", 0, text="text g1"),  # same text
                 judged("g2", "Q", 1), judged("b3", "R", 0), judged("g3", "P", 1)]
    pairs = build_pairs(judgments, writer)
    assert [(p["chosen_key"], p["rejected_key"]) for p in pairs] == [("g1", "b1"), ("g3", "b1"), ("g3", "b2")]
    assert all(p["prompt_sha256"] == "P" for p in pairs)
    assert pairs[0]["prompt"] == [{"role": "user", "content": "Write: task P"}]
    assert pairs[0]["chosen"] == [{"role": "assistant", "content": "text g1"}]
    assert pairs[0]["rejected"] == [{"role": "assistant", "content": "text b1"}]
    assert build_pairs([judged("g", "P", 1), judged("g", "P", 0)], writer) == []  # never a self-pair


def test_agreement_with_labels_uses_the_papers_metrics():
    rows = [judged("a", "P", 1, label=1), judged("b", "P", 1, label=0), judged("c", "P", 0, label=1),
            judged("d", "P", 0, label=0), judged("e", "P", 1)]
    assert agreement(rows) == {"n": 4, "accuracy": 0.5, "precision": 0.5, "recall": 0.5, "f1": 0.5}
    assert agreement([judged("e", "P", 1)]) is None


class SameNameEmbedder(CountingEmbedder):
    """Another model under the same name (a new package version, retrained local weights)."""

    def __init__(self, version: str, sign: float) -> None:
        super().__init__("same-name")
        self.version, self.sign = version, sign

    @property
    def identity(self) -> str:
        return f"same-name=={self.version}"

    def encode(self, texts, batch_size: int = 32, show_progress: bool = False) -> np.ndarray:
        return self.sign * super().encode(texts, batch_size, show_progress)


def test_cached_exemplar_embeddings_are_keyed_by_what_the_encoder_is(sources):
    """The exemplar cache was keyed by the encoder's name only: another model under that name got
    the first one's vectors back (the corpus cache, keyed by identity, re-embedded)."""
    exemplars, _ = sources
    old, new = SameNameEmbedder("1", 1.0), SameNameEmbedder("2", -1.0)
    first = RetrievalIndex.build(old, exemplars)
    second = RetrievalIndex.build(new, exemplars)
    assert new.calls == [2]  # embedded again, not read from the other model's entry
    assert np.allclose(second.vectors, -first.vectors)
    assert first.fingerprint["embedder_id"] != second.fingerprint["embedder_id"]
    RetrievalIndex.build(old, exemplars)
    assert old.calls == [2]  # its own entry is still reused
