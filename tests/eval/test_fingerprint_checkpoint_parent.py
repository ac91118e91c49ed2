"""`content_hash` leaves out checkpoint folders below what it hashes, never the folders above it."""

from __future__ import annotations

from pathlib import Path

from eval.scorers.fingerprint import content_hash


def test_a_checkpoint_named_parent_does_not_empty_the_hash(tmp_path: Path) -> None:
    """A repository, --out or model folder named checkpoint-... once made every file skipped, so
    "A" and "B" hashed alike and a changed input passed for the old one."""
    run = tmp_path / "checkpoint-demo" / "run"
    run.mkdir(parents=True)
    stories = run / "stories.jsonl"
    stories.write_text("A")
    folder, single = content_hash(run), content_hash(stories)
    stories.write_text("B")
    assert content_hash(run) != folder
    assert content_hash(stories) != single


def test_checkpoint_folders_and_step_records_below_are_still_left_out(tmp_path: Path) -> None:
    model = tmp_path / "checkpoint-7" / "model"
    (model / "checkpoint-100").mkdir(parents=True)
    (model / "weights.bin").write_bytes(b"w")
    before = content_hash(model)
    (model / "checkpoint-100" / "optimizer.pt").write_bytes(b"state")
    (model / "step.json").write_text("{}")
    assert content_hash(model) == before
    (model / "weights.bin").write_bytes(b"v")
    assert content_hash(model) != before
