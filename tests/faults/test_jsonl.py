"""What a torn write is worth: nothing, to readers and writers alike. A torn last line is ignored
with a warning by readers, cut by `repair_jsonl` (which every writer runs before reading) and by
`append_jsonl` itself, so a record is never glued onto a fragment; a damaged line in the middle
is an error naming the line; a write that fails part-way leaves the file as it was."""

from __future__ import annotations

import errno
import json

import pytest

from generate.common import files
from generate.common.errors import UsageError
from generate.common.files import OutputError
from generate.common.jsonl import append_jsonl, read_jsonl, repair_jsonl, rewrite_jsonl
from generate.journal import FailureLog, Journal
from generate.runner import finished_prompts

A, B = {"key": "a", "text": "Ünïcödé ✓"}, {"key": "b", "text": "second"}


def torn(path, *records, tail: bytes) -> None:
    path.write_bytes(b"".join(json.dumps(r, ensure_ascii=False).encode() + b"\n" for r in records) + tail)


@pytest.mark.parametrize("tail", [
    b'{"key": "c", "te',                      # cut mid-record
    '{"key": "c", "text": "é'.encode()[:-1],  # cut inside a multi-byte character
    b'{"key": "c", "text": "x"}',             # whole JSON but its newline never written
    b"\0\0\0\0",                              # a zero-filled block (a crash on some filesystems)
])
def test_a_torn_last_line_is_no_record_for_readers_or_writers(tmp_path, caplog, tail):
    path = tmp_path / "f.jsonl"
    torn(path, A, B, tail=tail)
    assert list(read_jsonl(path)) == [A, B] and "unfinished last line" in caplog.text
    repair_jsonl(path)
    assert path.read_bytes().endswith(b"\n") and list(read_jsonl(path)) == [A, B]
    assert "cutting a torn last line" in caplog.text


def test_append_never_glues_a_record_onto_a_fragment(tmp_path):
    path = tmp_path / "f.jsonl"
    torn(path, A, tail=b'{"key": "b", "te')
    append_jsonl(path, B)  # a writer that forgot to repair first
    assert list(read_jsonl(path)) == [A, B]


def test_a_damaged_line_in_the_middle_is_an_error_naming_it(tmp_path):
    path = tmp_path / "f.jsonl"
    path.write_text(json.dumps(A) + "\n" + '{"key": "b", "te\n' + json.dumps(B) + "\n")
    with pytest.raises(UsageError, match=r"f\.jsonl:2: not valid JSON in the middle"):
        list(read_jsonl(path))


def test_every_writer_repairs_before_it_reads(tmp_path):
    """The call journal, the failure log and the stories file, each with a torn tail: their
    readers see the whole records only, and appends after them start on a fresh line."""
    journal = tmp_path / "calls.jsonl"
    torn(journal, {"key": "k1", "text": "t", "prompt_tokens": 1, "completion_tokens": 1}, tail=b'{"key": "k2"')
    assert Journal(journal).get("k1").text == "t" and journal.read_bytes().endswith(b"\n")
    failed = tmp_path / "failed.jsonl"
    torn(failed, {"prompt_id": "p"}, tail=b'{"prompt_id": "p"')
    assert FailureLog(failed).attempt("p") == 1 and failed.read_bytes().endswith(b"\n")
    stories = tmp_path / "stories.jsonl"
    torn(stories, {"prompt_id": "a", "n_stories": 1}, {"prompt_id": "b", "n_stories": 2},
         tail=b'{"prompt_id": "b", "n_sto')
    assert finished_prompts(stories) == {"a"}  # b's group lost its second story: dropped, re-run
    assert list(read_jsonl(stories)) == [{"prompt_id": "a", "n_stories": 1}]


def test_a_write_that_fails_part_way_leaves_the_file_as_it_was(tmp_path, monkeypatch):
    path = tmp_path / "f.jsonl"
    append_jsonl(path, A)
    before = path.read_bytes()

    def half_then_full(fd, data):
        files.os.write(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(files, "_write_all", half_then_full)
    with pytest.raises(OutputError, match="No space left on device"):
        append_jsonl(path, [B, B])
    with pytest.raises(OutputError):
        rewrite_jsonl(path, [B])
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["f.jsonl"]  # no temporary file left behind
