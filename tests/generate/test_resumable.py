"""The resumable-run helper: the same command resumes, any change that would mix results is refused
with one line naming it, the done-set skips finished work, and the manifest follows every chunk."""

import json

import pytest

from generate.backends import Model
from generate.common.errors import UsageError
from generate.common.lock import OutputLocked
from generate.common.manifest import write_manifest
from generate.common.resumable import Resumable, difference, done_ids, keep_known, resumable, settings_of, text_hashes
from generate.runner import RunConfig, Runner
from tests.generate.fakes import RecordingEcho

KEYS = ("model", "rounds", "seed")
TEMPLATES = {"writer": "Write about {prompt}.", "reviewer": "Review {story}."}
PROVENANCE = {"judge": {"model": "m", "numerics": {"dtype": "bfloat16"}}, "reference": None}


def recorded(out, **extra):
    """A directory an earlier invocation left: its manifest as `write_manifest` writes it."""
    write_manifest(out, kind="test", config={"model": "m", "rounds": 3, "seed": 0, "out": str(out)},
                   templates=TEMPLATES, extra={"provenance": PROVENANCE, **extra})
    return Resumable(out, "a test run")


def test_the_same_settings_texts_and_provenance_resume(tmp_path):
    run = recorded(tmp_path)
    run.check_settings({"model": "m", "rounds": 3, "seed": 0, "out": "elsewhere", "batch_size": 7}, settings_of(KEYS))
    run.check_texts("template_sha256", text_hashes(TEMPLATES))
    for key, value in PROVENANCE.items():
        run.check_provenance(key, run.recorded["provenance"][key], value)


@pytest.mark.parametrize(("check", "message"), [
    (lambda run: run.check_settings({"model": "m", "rounds": 2, "seed": 0}, settings_of(KEYS)),
     r"holds a test run made with rounds=3 \(now 2\); use another --out"),
    (lambda run: run.check_texts("template_sha256", text_hashes({**TEMPLATES, "reviewer": "Judge {story}."})),
     r"another text for reviewer \(template_sha256\)"),
    (lambda run: run.check_provenance("judge", PROVENANCE["judge"], {"model": "m", "numerics": {"dtype": "float32"}}),
     r"another judge \(numerics.dtype 'bfloat16' then, 'float32' now\)"),
    (lambda run: run.check_provenance("reference", None, {"works": 150}),  # no corpus then: a value, not unknown
     r"another reference \(None then, \{'works': 150\} now\)"),
    (lambda run: run.check_provenance("backend numerics", {"dtype": "bfloat16"}, {"dtype": "float32"}, "move back"),
     r"made with another backend numerics \(dtype 'bfloat16' then, 'float32' now\); move back$"),
])
def test_each_kind_of_change_is_refused_with_one_line_naming_it(tmp_path, check, message):
    run = recorded(tmp_path)
    with pytest.raises(UsageError, match=message) as info:
        check(run)
    assert "\n" not in str(info.value) and str(tmp_path) in str(info.value)


def test_what_a_manifest_lacks_is_unknown_not_a_change(tmp_path):
    """Manifests of older versions resume: a removed option (`engine`), a field recorded later
    (a judge's numerics), a new id (a prompt added by a larger --limit)."""
    write_manifest(tmp_path, kind="test", config={"model": "m", "engine": "generate"},
                   extra={"prompts": {"p1": "h1"}, "provenance": {"judge": {"model": "m"}}})
    run = Resumable(tmp_path, "a test run")
    run.check_settings({"model": "m", "rounds": 2, "seed": 1}, settings_of(KEYS))
    run.check_texts("prompts", {"p1": "h1", "p2": "h2"})
    run.check_provenance("judge", run.recorded["provenance"]["judge"], {"model": "m", "numerics": {"dtype": "x"}})
    assert Resumable(tmp_path / "new", "a test run").recorded == {}


def test_difference_names_the_first_changed_path():
    assert difference({"a": {"b": 1, "c": 2}}, {"a": {"b": 1, "c": 3}}) == "a.c 2 then, 3 now"
    assert difference({"a": 1, "gone": 2}, {"a": 1, "new": 3}) is None
    assert difference([1, 2], [1, 3]) == "[1, 2] then, [1, 3] now"


def test_keep_known_keeps_what_the_record_knew_and_takes_what_is_told_now():
    before = {"served": {"root": "/a", "meta": {"n": 1}}, "dtype": "bfloat16"}
    assert keep_known(before, {"dtype": "float32"}) == {"served": {"root": "/a", "meta": {"n": 1}}, "dtype": "float32"}
    assert keep_known(before, {"served": {"root": "/b"}}) == {"served": {"root": "/b", "meta": {"n": 1}},
                                                             "dtype": "bfloat16"}
    assert keep_known(before, {"served": None}) == {"served": None, "dtype": "bfloat16"}  # None is a value
    assert keep_known(None, {"dtype": "float32"}) == {"dtype": "float32"}


def test_done_set_cuts_a_torn_line_and_drops_a_partial_group(tmp_path):
    path = tmp_path / "out.jsonl"
    rows = [{"id": "a", "n": 2}, {"id": "a", "n": 2}, {"id": "b", "n": 2}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"id": "c", "n')
    assert done_ids(path, "id") == {"a", "b"} and path.read_text().endswith("\n")
    assert done_ids(path, "id", group_size="n") == {"a"}
    assert [json.loads(line)["id"] for line in path.read_text().splitlines()] == ["a", "a"]
    assert done_ids(tmp_path / "missing.jsonl", "id") == set()


def test_the_directory_is_locked_while_a_run_holds_it(tmp_path):
    with resumable(tmp_path, "a test run") as run:
        assert run.needs_manifest([]) and run.out == tmp_path
        with pytest.raises(OutputLocked), resumable(tmp_path, "a test run"):
            pass
    with resumable(tmp_path, "a test run"):
        pass


def test_a_finished_run_keeps_its_manifest_and_record_keeps_earlier_invocations(tmp_path):
    run = recorded(tmp_path)
    assert not run.needs_manifest([]) and run.needs_manifest(["p1"])
    run.recorded["process"] = "an earlier process"  # as if another invocation wrote it
    (tmp_path / "manifest.json").write_text(json.dumps(run.recorded))
    write_manifest(tmp_path, kind="test", config={"model": "m"})
    run = Resumable(tmp_path, "a test run")
    run.record({"phases": {"draft": 1}})
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["phases"] == {"draft": 1} and len(manifest["earlier_invocations"]) == 1


def test_a_generation_rewrites_its_manifest_after_every_chunk(tmp_path, monkeypatch):
    """What the manifest says after each chunk is what an interruption there would leave."""
    seen = []
    record = Resumable.record

    def spy(self, fields):
        record(self, fields)
        seen.append(json.loads((self.out / "manifest.json").read_text()))

    monkeypatch.setattr(Resumable, "record", spy)
    cfg = RunConfig(framework="single", model="echo", limit=3, chunk_prompts=1, out=str(tmp_path / "run"))
    Runner(cfg, model=Model(RecordingEcho())).run()
    phases = [m["phases"] for m in seen if "phases" in m and "reliability" not in m]
    assert len(phases) >= 3 and phases[0] != phases[2]  # one update per chunk, each adding to the account
    assert "config" in seen[0] and "reliability" in seen[-1]
