"""Steps of a multi-step flow keyed by their inputs: a step's output is reused only when it was
made from the same inputs, never because a file exists.

`review-lab story` / `review-lab signals` chain steps whose outputs feed later steps (curation ->
reward model -> GRPO writer -> its stories -> their evaluation). Each step directory holds a
`step.json` with the step's inputs (its config, the content hashes of the upstream artefacts it
reads, seeds and step counts) and their fingerprint. A step whose recorded fingerprint equals the
current one and that finished is reused; any other state of the directory (other inputs, a step
that never finished, a directory from before fingerprints) is cleared and the step redone. Since
a step's inputs hold the content hashes of what the step before it produced, a changed input
redoes that step and, through the changed hashes, everything after it.

`step.json` also holds the seconds its output took (`seconds`): summed over the invocations
that worked on it and finished, restarted from 0 when the step is redone (the time spent on an
output that was thrown away is not its cost), unchanged by an invocation that found it finished.
`step_seconds` reads them back: the timings `story.json` reports.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
from pathlib import Path
from typing import Any

from eval.scorers.fingerprint import content_hash
from generate.common.files import make_dir

__all__ = ["STEP_FILE", "Step", "content_hash", "digest", "step_seconds"]

log = logging.getLogger("end_to_end")
STEP_FILE = "step.json"  # left out of content hashes (generate.common.fingerprint.SKIPPED)


def digest(value: Any) -> str:
    """sha256 of a JSON-able value, keys sorted."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


class Step:
    """One step's directory and the inputs it is made from.

    Args:
        out: the step's own directory (cleared when stale: never point it at shared data).
        what: the step's name in the log.
        inputs: everything the step's output depends on (JSON-able).
    """

    def __init__(self, out: str | Path, what: str, inputs: dict[str, Any]):
        self.out, self.what, self.inputs = Path(out), what, inputs
        self.fingerprint = digest(inputs)
        self._spent = 0.0  # seconds of earlier invocations on this output
        self._was_done = False  # found finished: this invocation adds nothing to it
        self._started: float | None = None

    def recorded(self) -> dict[str, Any] | None:
        try:
            return json.loads((self.out / STEP_FILE).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    @property
    def done(self) -> bool:
        """Finished with these inputs: its output can be reused."""
        rec = self.recorded()
        return bool(rec and rec.get("fingerprint") == self.fingerprint and rec.get("done"))

    def start(self) -> None:
        """Make the directory hold this step's inputs: kept when they are the recorded ones (a
        resumable command then continues), cleared otherwise."""
        rec = self.recorded()
        self._started = time.perf_counter()
        if rec is not None and rec.get("fingerprint") == self.fingerprint:
            self._spent, self._was_done = float(rec.get("seconds") or 0.0), bool(rec.get("done"))
            return
        self._spent, self._was_done = 0.0, False
        if self.out.exists() and any(self.out.iterdir()):
            changed = sorted(k for k in {*self.inputs, *(rec or {}).get("inputs", {})}
                             if (rec or {}).get("inputs", {}).get(k) != self.inputs.get(k))
            log.info("%s: inputs changed (%s): redoing it in %s", self.what,
                     ", ".join(changed) if rec else "no step.json", self.out)
            shutil.rmtree(self.out)
        make_dir(self.out)
        self._write(done=False)

    def finish(self) -> None:
        if not self._was_done and self._started is not None:
            self._spent += time.perf_counter() - self._started
        self._write(done=True)

    def _write(self, done: bool) -> None:
        record = {"what": self.what, "fingerprint": self.fingerprint, "done": done, "inputs": self.inputs,
                  "seconds": round(self._spent, 1)}
        (self.out / STEP_FILE).write_text(json.dumps(record, indent=2, default=str) + "\n", encoding="utf-8")


def step_seconds(root: str | Path) -> dict[str, float]:
    """step name -> the seconds its current output took, for every finished step under `root`, in
    the order they finished; a step.json without seconds (written before they were recorded) is
    left out rather than reported as 0."""
    found = []
    for path in Path(root).rglob(STEP_FILE):
        try:
            rec = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(rec, dict) and rec.get("done") and isinstance(rec.get("seconds"), (int, float)):
            found.append((path.stat().st_mtime, rec["what"], float(rec["seconds"])))
    return {what: seconds for _, what, seconds in sorted(found)}
