"""`scripts/gpu_run.sh`, the lent machine's side of the GPU check, run here with a stand-in
`python3`: the payload joined and checked, the check started whatever the version line says, its
parts' outputs kept out of $OUT (the device tool brings back at most 8 files from there)."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# Stands in for the image's python3: pip installs nothing, the version line fails (a carried
# package that does not import there), the check prints the arguments it was given.
STUB = """#!/bin/sh
case "$1" in
  -m) exit 0 ;;
  -c) echo "ModuleNotFoundError: No module named 'trl'" >&2; exit 1 ;;
  scripts/gpu_check.py) shift; echo "gpu_check $*"; exit 0 ;;
esac
exit 3
"""


def stash(folder: Path, parts: int = 2) -> Path:
    """A payload as `scripts/gpu_pack.py` splits it: parts and the whole's hash."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, data in (("payload/wheels/x-1.0-py3-none-any.whl", b"w"), ("payload/site/m.py", b""),
                           ("payload/data/scifi100.json", b"[]")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    data = buffer.getvalue()
    folder.mkdir()
    size = -(-len(data) // parts)
    for k in range(parts):
        (folder / f"payload.tar.part{k + 1:02d}").write_bytes(data[k * size:(k + 1) * size])
    (folder / "payload.sha256").write_text(hashlib.sha256(data).hexdigest() + "\n")
    return folder


def run(tmp_path: Path, folder: Path, *args: str) -> subprocess.CompletedProcess:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "python3").write_text(STUB)
    (bin_dir / "python3").chmod(0o755)
    (tmp_path / "tmp").mkdir(exist_ok=True)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "OUT": str(tmp_path / "out"),
           "GPU_RUN_TMP": str(tmp_path / "tmp"), "GPU_CALL_LIMIT": "600"}
    return subprocess.run(["bash", str(REPO / "scripts" / "gpu_run.sh"), str(folder), *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60)


def test_the_check_runs_even_when_the_version_line_fails_and_writes_its_parts_outside_out(tmp_path):
    proc = run(tmp_path, stash(tmp_path / "stash"), "--only", "static", "engines")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "warning: the versions above could not all be read" in proc.stdout
    check = next(line for line in proc.stdout.splitlines() if line.startswith("gpu_check "))
    args = check.split()
    work = Path(args[args.index("--work") + 1])
    assert args[args.index("--out") + 1] == str(tmp_path / "out") and tmp_path / "out" not in work.parents
    assert work.parent == tmp_path / "tmp"
    assert args[args.index("--scifi100") + 1] == str(tmp_path / "tmp" / "payload" / "data" / "scifi100.json")
    assert 500 < int(args[args.index("--budget") + 1]) <= 560 and args[-3:] == ["--only", "static", "engines"]


def test_a_missing_part_stops_the_run_with_one_error_line(tmp_path):
    folder = stash(tmp_path / "stash")
    (folder / "payload.tar.part01").unlink()
    proc = run(tmp_path, folder)
    assert proc.returncode == 2 and "error: the payload's parts do not add up" in proc.stdout
    assert "the stash holds: payload.sha256 payload.tar.part02" in proc.stdout  # which call to make again
    assert "gpu_check " not in proc.stdout
