"""An output location that refuses writes: one `error:` line, exit code 2, and everything written
before intact (no torn line, a whole manifest) and resumable to the same stories.

A full disk is simulated two ways: portably, by replacing the one function every run output goes
through (`generate.common.files._write_all`) with one that writes half its bytes and raises
ENOSPC at the n-th write; and for real, on a tiny tmpfs nearly filled by another file, where the
kernel itself cuts a write short (needs root to mount; skipped otherwise). An unwritable
directory is a read-only tmpfs (root, where permissions do not bind) or a mode-555 directory.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess

import pytest

from generate.cli import main as generate_main
from generate.common import files
from generate.common.cli import run_cli
from generate.common.jsonl import read_jsonl
from tests.conftest import REPO
from tests.faults.conftest import PYTHON, RUBRIC, cli_env
from tests.faults.kill import records

REVIEW = ["--framework", "review", "--agents", "2", "--rounds", "2", "--limit", "3", "--model", "openai:stub",
          "--api-key", "k", "--chunk-prompts", "1"]


def generate(stub, out, capsys=None) -> tuple[int, str]:
    """`review-lab generate` in this process: (exit code, the `error:` lines)."""
    with pytest.raises(SystemExit) as info:
        run_cli(generate_main, [*REVIEW, "--base-url", stub.base_url, "--out", str(out)])
    err = capsys.readouterr().err if capsys else ""
    return info.value.code, [line for line in err.splitlines() if line.startswith("error:")]


def stories(out) -> dict:
    return {s["story_id"]: s["text"] for s in read_jsonl(out / "stories.jsonl")}


def assert_intact(out) -> None:
    for path in out.glob("*.jsonl"):
        records(path)  # every line whole and valid
    json.loads((out / "manifest.json").read_text())


def written_file(fd: int) -> str:
    """The output file a write goes to: `manifest.json` for its atomic temporary copy too."""
    name = os.path.basename(os.readlink(f"/proc/self/fd/{fd}"))
    return name[1:].rsplit(".", 2)[0] if name.startswith(".") and name.endswith(".tmp") else name


def fill_at(fail_at: int, writes: list[str]):
    """A `_write_all` that records each write's file and, at write number `fail_at` (from 1),
    writes half its bytes, then finds the disk full."""
    real = files._write_all

    def disk_fills(fd: int, data: bytes) -> None:
        writes.append(written_file(fd))
        if len(writes) == fail_at:
            real(fd, data[: len(data) // 2])  # the kernel took half, then the disk was full
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(fd, data)

    return disk_fills


def nth_write(order: list[str], name: str, nth: int) -> int:
    """The number (from 1) of the `nth` write (0-based; -1 the last) to `name` in `order`."""
    return [i for i, written in enumerate(order, 1) if written == name][nth]


@pytest.fixture(scope="module")
def clean_run(stub, tmp_path_factory):
    """The stories of an undisturbed run, and the files its writes went to, in order."""
    out, order = tmp_path_factory.mktemp("clean"), []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(files, "_write_all", fill_at(0, order))
        code, _ = generate(stub, out)
    assert code == 0
    return stories(out), order


@pytest.fixture(scope="module")
def clean(clean_run):
    return clean_run[0]


# Where the disk fills, by the file being written (not by position, so that a change in how often a
# run updates its manifest moves nothing): the first manifest, the first call, the first and the
# second prompt's stories, the manifest's last update (the retry counts).
@pytest.mark.parametrize("name, nth", [("manifest.json", 0), ("calls.jsonl", 0), ("stories.jsonl", 0),
                                       ("stories.jsonl", 1), ("manifest.json", -1)])
def test_disk_full_mid_run_is_one_line_and_resumable(stub, clean_run, tmp_path, monkeypatch, capsys, name, nth):
    clean, order = clean_run
    fail_at = nth_write(order, name, nth)
    out, writes = tmp_path / "run", []
    with monkeypatch.context() as mp:
        mp.setattr(files, "_write_all", fill_at(fail_at, writes))
        code, errors = generate(stub, out, capsys)
    assert writes[-1] == name
    assert code == 2 and len(errors) == 1, errors
    assert "No space left on device (disk full?)" in errors[0] and "re-run the same command" in errors[0]
    if fail_at > 1:  # the first write is the manifest: nothing before it to keep
        assert_intact(out)
    code, errors = generate(stub, out, capsys)
    assert code == 0 and not errors
    assert stories(out) == clean


@pytest.fixture
def tmpfs(tmp_path):
    """A 1 MiB tmpfs of our own, or a skip where mounting is not allowed."""
    mount = tmp_path / "mnt"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def cli(stub, out, tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run([PYTHON, "-m", "generate", *REVIEW, "--base-url", stub.base_url, "--out", str(out)],
                          cwd=REPO, env=cli_env(tmp_path), capture_output=True, text=True, timeout=300)


def one_error_line(proc: subprocess.CompletedProcess, text: str) -> None:
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 2 and len(errors) == 1 and text in errors[0], proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr


def test_a_real_disk_that_fills_mid_run(stub, clean, tmpfs, tmp_path):
    """Tried at several fill levels, since where the kernel cuts a run short depends on the size of
    what it writes first (a manifest of a few more bytes, on another machine, takes another page):
    at every level the run ends in one error line or finishes, leaves whole files and resumes to
    the clean stories, and at some level it stops mid-run with the calls made before kept."""
    out, filler, kept = tmpfs / "run", tmpfs / "filler", []
    for pages in (3, 4, 5, 6, 8):
        stat = os.statvfs(tmpfs)
        filler.write_bytes(b"\0" * (stat.f_bavail * stat.f_frsize - pages * 4096))  # `pages` pages left
        full = cli(stub, out, tmp_path)
        if full.returncode != 0:
            one_error_line(full, "No space left on device")
            assert_intact(out)
            mid_run = "stories.jsonl" in full.stderr or "calls.jsonl" in full.stderr
            if mid_run and (out / "calls.jsonl").is_file() and records(out / "calls.jsonl"):
                kept.append(pages)
        filler.unlink()
        done = cli(stub, out, tmp_path)
        assert done.returncode == 0, done.stderr[-2000:]
        assert stories(out) == clean
        shutil.rmtree(out)
    assert kept, "no fill level stopped the run mid-way with the calls made before kept"


def test_an_unwritable_output_directory(stub, clean, tmpfs, tmp_path):
    """A finished part of a run on a disk that became read-only: refused in one line, untouched,
    and resumed once the disk is writable again."""
    out = tmpfs / "run"
    first = subprocess.run([PYTHON, "-m", "generate", *REVIEW[:-4], "--limit", "1", "--api-key", "k",
                            "--base-url", stub.base_url, "--out", str(out)], cwd=REPO, env=cli_env(tmp_path),
                           capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr[-2000:]
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)], check=True)
    one_error_line(cli(stub, out, tmp_path), "Read-only file system")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    subprocess.run(["mount", "-o", "remount,rw", str(tmpfs)], check=True)
    done = cli(stub, out, tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert stories(out) == clean


@pytest.mark.skipif(os.geteuid() == 0, reason="permissions do not bind root (the tmpfs test covers it)")
def test_a_directory_without_write_permission(stub, tmp_path):
    parent = tmp_path / "locked"
    parent.mkdir(mode=0o555)
    one_error_line(cli(stub, parent / "run", tmp_path), "Permission denied")


def test_disk_full_during_an_evaluation(stub, fault_data, tmp_path, monkeypatch, capsys):
    """The evaluation's writes go through the same path: one line, exit 2, nothing torn, and the
    re-run scores the rest to the same scores as a run on a disk with room."""
    from eval.cli import main as eval_main

    def evaluate(out) -> int:
        argv = ["--stories", str(fault_data["stories"]), "--judge", "openai:stub", "--base-url", stub.base_url,
                "--api-key", "k", "--rubric", str(RUBRIC), "--no-surprisal", "--chunk-stories", "1",
                "--embedder", str(tmp_path / "no-encoder"), "--out", str(out)]
        with pytest.raises(SystemExit) as info:
            run_cli(eval_main, argv)
        return info.value.code

    order = []
    with monkeypatch.context() as mp:
        mp.setattr(files, "_write_all", fill_at(0, order))
        assert evaluate(tmp_path / "clean") == 0
    out, writes = tmp_path / "full", []
    capsys.readouterr()
    with monkeypatch.context() as mp:  # the disk fills while the third chunk's scores are written
        mp.setattr(files, "_write_all", fill_at(nth_write(order, "scores.jsonl", 2), writes))
        assert evaluate(out) == 2
    assert writes[-1] == "scores.jsonl"
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "scores.jsonl: No space left on device" in errors[0]
    assert len(records(out / "scores.jsonl")) == 2
    assert evaluate(out) == 0
    assert records(out / "scores.jsonl") == records(tmp_path / "clean" / "scores.jsonl")
