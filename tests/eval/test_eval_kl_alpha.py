"""`review-lab eval --kl-alpha` reaches the KL of every story, and its fingerprint says so."""

from __future__ import annotations

import json

import pytest

from eval.metrics.kl import unigram_kl
from eval.reference import ReferenceCorpus
from tests.embedders import CountingEmbedder
from tests.eval.test_eval_cli import Fakes, evaluate, rows, write_stories


def test_the_evaluations_kl_uses_the_configured_alpha(tmp_path, tiny_corpus, isolated_cache) -> None:
    """A smoothing the evaluation was given but did not use would be a number no one asked for,
    recorded as if it were the one asked for."""
    files = write_stories(tmp_path)
    texts = {json.loads(line)["story_id"]: json.loads(line)["text"]
             for f in files for line in f.read_text().splitlines()}
    out = evaluate(files, tmp_path / "eval", Fakes(), CountingEmbedder(dim=3), reference_dir=str(tiny_corpus),
                   kl_alpha=0.25, no_judge=True, no_surprisal=True)
    counts = ReferenceCorpus.load(tiny_corpus).counts
    for row in rows(out):
        text = texts[row["story_id"]]
        assert row["kl"] == pytest.approx(unigram_kl(text, counts, alpha=0.25), rel=1e-12)
        assert row["kl"] != pytest.approx(unigram_kl(text, counts, alpha=1.0), rel=1e-3)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["provenance"]["reference"]["kl_alpha"] == 0.25
