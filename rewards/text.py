"""What the rewards read out of trl's batch: the story text of each completion."""

from __future__ import annotations

from typing import Any


def completion_text(completion: Any) -> str:
    """The story text of one completion.

    trl passes strings for plain-text prompts and `[{"role": "assistant", "content": ...}]` for
    conversational ones (ours); the last assistant message is the story.
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion:
        content = completion[-1].get("content", "")
        if isinstance(content, list):  # content blocks
            return "".join(part.get("text", "") for part in content if isinstance(part, dict))
        return str(content)
    return ""


def completion_texts(completions: list[Any]) -> list[str]:
    return [completion_text(c) for c in completions]
