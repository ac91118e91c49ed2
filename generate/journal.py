"""Call journal: every finished model call of a run, keyed by a hash of the full request.

Re-running a run replays journaled calls instead of recomputing them. Because per-call seeds
are derived from the run seed and the call's place in the protocol, a resumed run rebuilds the
same requests, hits the journal, and continues exactly where the crash stopped it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from generate.backends import ChatRequest, Completion
from generate.common.jsonl import append_jsonl, read_jsonl, repair_jsonl


def request_key(model: str, req: ChatRequest) -> str:
    blob = json.dumps([model, req.messages, req.params.__dict__, req.seed, req.logprobs, req.prefill],
                      sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def derive_seed(*parts: object) -> int:
    """A stable 31-bit seed from the run seed and a call's coordinates."""
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).hexdigest()
    return int(digest[:8], 16) & 0x7FFFFFFF


class Journal:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        repair_jsonl(self.path)
        self._done = {r["key"]: r for r in read_jsonl(self.path)}

    def get(self, key: str) -> Completion | None:
        row = self._done.get(key)
        if row is None:
            return None
        return Completion(text=row["text"], prompt_tokens=row["prompt_tokens"],
                          completion_tokens=row["completion_tokens"], finish_reason=row.get("finish_reason"))

    def add(self, keys: list[str], completions: list[Completion]) -> None:
        rows = [{"key": k, "text": c.text, "prompt_tokens": c.prompt_tokens, "completion_tokens": c.completion_tokens,
                 "finish_reason": c.finish_reason} for k, c in zip(keys, completions)]
        append_jsonl(self.path, rows)
        self._done.update({r["key"]: r for r in rows})
