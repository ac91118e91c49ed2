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
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from pathlib import Path
from typing import Any

from eval.scorers.fingerprint import content_hash

__all__ = ["STEP_FILE", "Step", "content_hash", "digest"]

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
        if rec is not None and rec.get("fingerprint") == self.fingerprint:
            return
        if self.out.exists() and any(self.out.iterdir()):
            changed = sorted(k for k in {*self.inputs, *(rec or {}).get("inputs", {})}
                             if (rec or {}).get("inputs", {}).get(k) != self.inputs.get(k))
            log.info("%s: inputs changed (%s): redoing it in %s", self.what,
                     ", ".join(changed) if rec else "no step.json", self.out)
            shutil.rmtree(self.out)
        self.out.mkdir(parents=True, exist_ok=True)
        self._write(done=False)

    def finish(self) -> None:
        self._write(done=True)

    def _write(self, done: bool) -> None:
        record = {"what": self.what, "fingerprint": self.fingerprint, "done": done, "inputs": self.inputs}
        (self.out / STEP_FILE).write_text(json.dumps(record, indent=2, default=str) + "\n", encoding="utf-8")
