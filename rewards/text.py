"""What the rewards read out of trl's batch: the story text and the group (prompt) it belongs to."""

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


def group_keys(prompts: list[Any], prompt_id: list[str] | None = None) -> list[str]:
    """One key per completion identifying its prompt group.

    The dataset's `prompt_id` column is the reliable key; without it the rendered prompt itself
    is used (two different rows with identical text then count as one group, which is harmless
    because their completions answer the same request).
    """
    if prompt_id is not None:
        return [str(k) for k in prompt_id]
    return [repr(p) for p in prompts]
