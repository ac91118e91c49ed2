"""What a prompt's calls cost (calls, prompt and completion tokens), the unit of every cost column.

A prompt's `prompt_usage` covers every call spent on it: every agent's, a teacher's, and the calls
of earlier attempts that the journal cannot replay. A call that stayed blank after its re-asks is
asked again with a new seed by the next attempt, so its tokens were spent but appear in no finished
attempt; `failed.jsonl` records them (`lost_usage`) and the finished attempt adds them back. The
calls an earlier attempt finished are replayed, and counted, by the attempt that finishes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, fields

from generate.backends import Completion


@dataclass
class Usage:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add(self, c: Completion) -> None:
        self.calls += 1
        self.prompt_tokens += c.prompt_tokens
        self.completion_tokens += c.completion_tokens

    @classmethod
    def total(cls, parts: Iterable[Usage | dict]) -> Usage:
        """The sum of usages (or their `asdict` forms, as `failed.jsonl` holds them)."""
        parts = [asdict(p) if isinstance(p, Usage) else p for p in parts]
        return cls(*(sum(int(p.get(f.name, 0)) for p in parts) for f in fields(cls)))


def total_usage(by_agent: dict[str, Usage]) -> Usage:
    """A prompt's whole cost in one attempt: every agent's calls, a teacher's included."""
    return Usage.total(by_agent.values())
