"""The weak-label recipe: passages of reference works, damaged copies, split by work, deterministic."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from generate.backends import Completion
from generate.backends.model import GAVE_UP
from generate.common.errors import PartialFailure, UsageError
from generate.common.jsonl import read_jsonl
from rewards.principles.cli import main
from rewards.principles.weak_labels import (
    WeakLabelConfig,
    build,
    cliche,
    corrupt,
    passages,
    repetition,
    sentences,
    shuffled,
)
from tests.principles.conftest import prose
from tests.principles.fakes import RoleBackend, model_of


def cfg(tmp_path, corpus, **kw):
    return WeakLabelConfig(reference_dir=str(corpus), out=str(tmp_path / "out" / "weak.jsonl"), per_work=2,
                           words=40, heldout_fraction=0.34, **kw)


def test_good_and_damaged_passages_split_by_work(tmp_path, prose_corpus):
    rows = list(read_jsonl(build(cfg(tmp_path, prose_corpus))))
    goods = [r for r in rows if r["label"] == 1]
    bads = [r for r in rows if r["label"] == 0]
    assert len(goods) == len(bads) == 12 and {b["source"] for b in bads} == {g["id"] for g in goods}
    split_of = {}
    for r in rows:
        assert split_of.setdefault(r["work"], r["split"]) == r["split"]  # a work lies in one split only
    assert Counter(split_of.values()) == {"optimisation": 4, "heldout": 2}
    assert Counter(b["kind"] for b in bads) == {"shuffled": 4, "repetition": 4, "cliche": 4}
    for g in goods:
        assert len(g["response"].split()) >= 40 and g["response"][0].isupper() and g["response"].endswith(".")
        assert "CHAPTER" not in g["response"] and g["prompt"]
    by_id = {r["id"]: r for r in rows}
    assert all(b["response"] != by_id[b["source"]]["response"] for b in bads)
    assert (tmp_path / "out" / "weak.manifest.json").is_file()


def test_the_recipe_is_deterministic_per_seed(tmp_path, prose_corpus):
    one = build(cfg(tmp_path, prose_corpus)).read_bytes()
    assert build(cfg(tmp_path, prose_corpus)).read_bytes() == one
    assert build(cfg(tmp_path, prose_corpus, seed=1)).read_bytes() != one
    text = " ".join(sentences(prose(0, 8)))
    for kind in ("shuffled", "repetition", "cliche"):
        a = corrupt(kind, text, 0, "w#1", ("A cliche here.", "Another one.", "A third."))
        assert a == corrupt(kind, text, 0, "w#1", ("A cliche here.", "Another one.", "A third."))
        assert a != text


def test_each_corruption_does_what_it_says():
    text = " ".join(sentences(prose(3, 10)))
    rng = random.Random(0)
    out = shuffled(text, rng)
    assert sorted(sentences(out)) == sorted(sentences(text)) and out != text
    looped = repetition(text, rng)
    assert len(looped.split()) == len(text.split()) and looped.split()[-3:] != text.split()[-3:]
    inserted = cliche(text, rng, ("The silence was deafening.", "Only time would tell.", "It was a day."))
    assert all(c in inserted for c in ("The silence was deafening.", "Only time would tell.", "It was a day."))
    assert passages("Too short. Far too short.", 40) == []


def test_the_generator_degrades_some_passages(tmp_path, prose_corpus):
    backend = RoleBackend()
    rows = list(read_jsonl(build(cfg(tmp_path, prose_corpus, model="role-fake"), model_of(backend))))
    made = [r for r in rows if r["kind"] == "generator"]
    assert made and all(r["response"].startswith("DAMAGED") for r in made)
    assert set(backend.roles()) == {"degrade"} and len(backend.calls) == 1  # one batch
    assert (tmp_path / "out" / "weak.calls.jsonl").is_file()

    blank = RoleBackend({"degrade": lambda r: "  "})
    rows = list(read_jsonl(build(cfg(tmp_path, prose_corpus, model="blank-fake"), model_of(blank))))
    fallback = [r for r in rows if r.get("note")]
    assert fallback and all(r["kind"] in ("shuffled", "repetition", "cliche") for r in fallback)


def test_a_generator_call_whose_retries_ran_out_writes_nothing_and_a_rerun_completes(tmp_path, prose_corpus):
    """A transient failure was turned into a rule-based row ("blank or unchanged"): the set then
    depended on the outage, and a re-run gave another one."""
    down = RoleBackend({"degrade": lambda r: Completion(text="", error="timeout", finish_reason=GAVE_UP)})
    config = cfg(tmp_path, prose_corpus, model="role-fake")
    with pytest.raises(PartialFailure, match="transient"):
        build(config, model_of(down))
    assert not (tmp_path / "out" / "weak.jsonl").exists()
    rows = list(read_jsonl(build(config, model_of(RoleBackend()))))
    assert [r for r in rows if r["kind"] == "generator"] and not [r for r in rows if r.get("note")]
    refused = RoleBackend({"degrade": lambda r: Completion(text="", error="context length exceeded")})
    rows = list(read_jsonl(build(cfg(tmp_path, prose_corpus, model="other-fake"), model_of(refused))))
    assert {r["note"] for r in rows if r.get("note")} == {"generator reply failed: context length exceeded"}


def test_bad_input_is_one_error_line(tmp_path, capsys):
    with pytest.raises(UsageError, match="reference-dir"):
        build(WeakLabelConfig(reference_dir=str(tmp_path), out=str(tmp_path / "x.jsonl")))
    from generate.common.cli import run_cli

    with pytest.raises(SystemExit) as exit_:
        run_cli(main, ["weak-labels", "--reference-dir", str(tmp_path / "missing")])
    assert exit_.value.code == 2 and capsys.readouterr().err.startswith("error: weak labels need")


@pytest.mark.parametrize("kind", ["dangling-link", "directory"])
def test_a_work_that_cannot_be_read_is_one_error_line(tmp_path, prose_corpus, kind):
    """As the novelty metrics' loader does: one line naming the work, not a traceback."""
    bad = prose_corpus / "zz-unreadable.txt"
    if kind == "dangling-link":
        bad.symlink_to(tmp_path / "gone.txt")
    else:
        bad.mkdir()
    with pytest.raises(UsageError, match="cannot read .*zz-unreadable.txt"):
        build(cfg(tmp_path, prose_corpus))
