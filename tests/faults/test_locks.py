"""One process per output directory: a second run is refused with one line naming the holder,
before it reads or writes anything; the lock of a process that died is taken over."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

from generate.common.lock import OutputLocked, output_lock
from tests.conftest import REPO
from tests.faults.conftest import PYTHON, cli_env

HOLD = ("import sys, time\nfrom generate.common.lock import output_lock\n"
        "with output_lock(sys.argv[1]):\n    print('held', flush=True)\n    time.sleep(120)\n")


def refused_in_one_line(proc: subprocess.CompletedProcess, pid: int) -> None:
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 2 and len(errors) == 1, proc.stderr
    assert f"is in use by another run (pid {pid} on host {socket.gethostname()}" in errors[0]
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("command", ["generate", "eval"])
def test_a_second_run_on_the_same_out_is_refused_naming_the_holder(tmp_path, fault_data, command):
    out = tmp_path / "run"
    args = {"generate": ["--model", "openai:m", "--base-url", "http://127.0.0.1:9/v1", "--limit", "1"],
            "eval": ["--stories", str(fault_data["stories"]), "--no-judge", "--no-surprisal"]}[command]
    with output_lock(out):
        proc = subprocess.run([PYTHON, "-m", command, *args, "--out", str(out)], cwd=REPO, env=cli_env(tmp_path),
                              capture_output=True, text=True, timeout=300)
    refused_in_one_line(proc, os.getpid())
    assert [p.name for p in out.iterdir()] == [".lock"]  # it wrote nothing


def test_a_live_holder_refuses_and_a_dead_one_is_taken_over(tmp_path, caplog):
    out = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(out)], cwd=REPO, stdout=subprocess.PIPE, text=True,
                              env=cli_env(tmp_path))
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(OutputLocked, match=f"pid {holder.pid} on host"), output_lock(out):
            pass
    finally:
        holder.kill()  # SIGKILL: no cleanup, the lock file still names it
        holder.wait()
    assert f'"pid": {holder.pid}' in (out / ".lock").read_text()
    with output_lock(out):
        assert f'"pid": {os.getpid()}' in (out / ".lock").read_text()
    assert f"taking over the lock of a process that is gone (pid {holder.pid}" in caplog.text
    assert (out / ".lock").read_text() == ""  # a clean exit leaves no owner behind
    with output_lock(out):  # and the next run takes it without a warning
        pass
    assert caplog.text.count("taking over") == 1


def test_two_runs_racing_for_one_out_never_both_write(tmp_path, stub):
    """Started together on the same directory: one writes, the other is refused (or, if the
    first was already done, finds nothing left to do); never two writers."""
    out = tmp_path / "run"
    cmd = [PYTHON, "-m", "generate", "--framework", "review", "--agents", "2", "--rounds", "2", "--limit", "3",
           "--model", "openai:stub", "--base-url", stub.base_url, "--api-key", "k", "--out", str(out)]
    procs = [subprocess.Popen(cmd, cwd=REPO, env=cli_env(tmp_path), stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    results = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    assert sorted(code for code, _ in results) in ([0, 0], [0, 2]), results
    for code, err in results:
        if code == 2:
            assert "is in use by another run" in err
    lines = (out / "stories.jsonl").read_text().splitlines()
    assert len(lines) == len(set(lines)) == 6
    keys = [line.split('"key": "')[1][:64] for line in (out / "calls.jsonl").read_text().splitlines()]
    assert len(keys) == len(set(keys)) == 18
