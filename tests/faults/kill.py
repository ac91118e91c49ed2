"""Kill harness: run a real command, SIGKILL it at random moments several times in a row,
restarting it with the same command each time, then let the last run finish, so a test can
compare its outputs with those of an uninterrupted run at the same seeds.

A kill lands either at a random time after start (start-up, lock, repair, manifest) or right
after the process wrote to one of the watched files (a random fraction of a second later: mid
next call, mid next append). The whole process group is killed, as a machine failure would.
Optionally the harness also tears a watched JSONL file after a kill (half of its last record
appended again, without a newline: what a kill in the middle of an append leaves, which a
SIGKILL only rarely hits by chance), so every restart must repair what it finds.

    run = kill_and_resume([sys.executable, "-m", "generate", ...], watch=[out / "calls.jsonl"], kills=10)
    assert run.kills == 10 and run.final.returncode == 0
    # then compare out/ with an uninterrupted run (see `records`, `journal_texts`)

Use it for any resumable command: name the files it appends to in `watch`.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Attempt:
    """One start of the command: when it was killed (seconds after start) and why then."""

    seconds: float
    trigger: str  # "time" (random moment), "progress" (after a write), "finished" (never killed)
    returncode: int | None
    torn: list[str] = field(default_factory=list)  # files the harness tore after this kill
    journal: dict[str, str] = field(default_factory=dict)  # calls journaled when it was killed


@dataclass
class KillRun:
    attempts: list[Attempt]
    final: subprocess.CompletedProcess

    @property
    def kills(self) -> int:
        return sum(a.trigger != "finished" for a in self.attempts)

    def summary(self) -> str:
        return ", ".join(f"{a.trigger}@{a.seconds:.1f}s" + (f" tore {'+'.join(a.torn)}" if a.torn else "")
                         for a in self.attempts)


def kill_and_resume(cmd: list[str], *, watch: list[Path], kills: int = 10, seed: int = 0, env: dict | None = None,
                    cwd: str | Path | None = None, time_kills: int = 3, early: tuple[float, float] = (0.2, 5.0),
                    jitter: float = 0.5, tear: bool = True, journal: Path | None = None, log_dir: Path | None = None,
                    timeout: float = 600) -> KillRun:
    """Start `cmd`, SIGKILL it `kills` times (fewer if it finishes first), then run it to the end.

    Args:
        watch: files the command appends to; a write to any of them arms a "progress" kill.
        time_kills: how many of the kills (at seeded random places in the sequence) come at a
            random time in `early` seconds after start; the others follow a write. Each
            "progress" kill lets the command make some progress, so a workload with more
            writes than progress kills always gets all its kills in.
        jitter: a "progress" kill comes up to this many seconds after the write.
        tear: after a kill, with probability 1/2 tear one watched `.jsonl` file.
        journal: the command's call journal; its `key -> text` is recorded at each kill, so a
            test can check that every call finished before a kill was replayed, not redone.
        log_dir: where each attempt's stdout/stderr go (default: `kill-logs` beside the directory
            of the first watched file).
        timeout: seconds the final, uninterrupted run may take.
    """
    rng = random.Random(seed)
    timed = set(rng.sample(range(kills), min(time_kills, kills)))
    log_dir = Path(log_dir or Path(watch[0]).parent.parent / "kill-logs")
    log_dir.mkdir(parents=True, exist_ok=True)
    attempts: list[Attempt] = []
    deadline = time.monotonic() + timeout * 3
    for n in range(kills):
        with open(log_dir / f"attempt-{n}.log", "wb") as log:
            proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            started = time.monotonic()
            if n in timed:
                trigger, moment = "time", started + rng.uniform(*early)
            else:
                trigger, moment = "progress", None
            sizes = _sizes(watch)
            while proc.poll() is None and time.monotonic() < deadline:
                now = time.monotonic()
                if moment is None and _sizes(watch) != sizes:
                    moment = now + rng.uniform(0, jitter)
                if moment is not None and now >= moment:
                    break
                time.sleep(0.01)
            if proc.poll() is not None:  # it finished its work before this kill: nothing left to kill
                attempts.append(Attempt(time.monotonic() - started, "finished", proc.returncode))
                break
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        attempt = Attempt(time.monotonic() - started, trigger, proc.returncode)
        if journal is not None:
            attempt.journal = journal_texts(journal)
        if tear and rng.random() < 0.5:
            attempt.torn = _tear(rng, [p for p in watch if Path(p).suffix == ".jsonl"])
        attempts.append(attempt)
    final = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    return KillRun(attempts, final)


def records(path: Path) -> list[dict]:
    """A JSONL file's records, strictly: every line complete and valid (no torn or garbage line)."""
    raw = Path(path).read_bytes()
    assert not raw or raw.endswith(b"\n"), f"{path}: torn last line"
    return [json.loads(line) for line in raw.splitlines() if line.strip()]


def journal_texts(path: Path) -> dict[str, str]:
    """`key -> text` of a call journal's complete records (a torn tail is not a record)."""
    if not Path(path).exists():
        return {}
    raw = Path(path).read_bytes()
    lines = raw.splitlines(keepends=True)
    return {r["key"]: r["text"] for r in (json.loads(line) for line in lines if line.endswith(b"\n") and line.strip())}


def _sizes(paths: list[Path]) -> list[int]:
    return [p.stat().st_size if p.exists() else -1 for p in map(Path, paths)]


def _tear(rng: random.Random, paths: list[Path]) -> list[str]:
    """Append half of a file's last record without its newline: an append cut short by a kill."""
    candidates = [p for p in paths if p.exists() and p.stat().st_size > 0 and p.read_bytes().endswith(b"\n")]
    if not candidates:
        return []
    path = rng.choice(candidates)
    last = path.read_bytes().splitlines()[-1]
    with open(path, "ab") as fh:
        fh.write(last[: max(1, len(last) // 2)])
    return [path.name]
