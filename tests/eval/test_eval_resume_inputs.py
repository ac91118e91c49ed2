"""Resuming one evaluation with another set of stories files keeps the hashes of the stories it
scored before: rewriting the manifest with only the current files' stories let a later run change
an earlier story's text behind its scores unnoticed."""

from __future__ import annotations

import json

import pytest
from test_eval_cli import Fakes, evaluate, rows, write_stories

from generate.common.errors import UsageError


def test_a_story_scored_by_an_earlier_invocation_keeps_its_hash(tmp_path, counting_embedder, isolated_cache):
    review, single = write_stories(tmp_path)
    out = evaluate([review], tmp_path / "eval", Fakes(), counting_embedder)
    evaluate([single], out, Fakes(), counting_embedder)  # adds the single run to the same evaluation
    manifest = json.loads((out / "manifest.json").read_text())
    assert set(manifest["story_sha256"]) == {r["story_id"] for r in rows(out)}
    assert set(manifest["inputs"]) == {str(review), str(single)}
    review.write_text(review.read_text().replace("sang the names", "hummed the names"))
    with pytest.raises(UsageError, match=r"another text for review/p1/humanistic \(story_sha256\)"):
        evaluate([review], out, Fakes(), counting_embedder)
