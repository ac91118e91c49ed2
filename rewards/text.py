"""What the rewards read out of trl's batch: the story text of each completion, cleaned as
generation cleans a writer's reply, and the one value of a completion whose metric cannot exist.

A reward must be the evaluation's number for the same reply. Generation stores a writer's reply
only after `generate.clean.clean_reply` has taken its wrappers off (chatter, a title line, "I hope
you enjoy it"), and the evaluation scores that stored story; so every reward reads a completion
through the same function, else GRPO would pay for (or against) wrappers the evaluation never sees.
"""

from __future__ import annotations

from typing import Any

from eval.metrics.story import EMPTY, NO_WORDS
from generate.clean import clean_reply

WRITE = "write"  # the role of a writer's call: its reply is a story (`generate.frameworks.base.Call.role`)
NO_TEXT = 0.0  # the value of a completion without words: the floor of every metric a reward floors
CANNOT_EXIST = (EMPTY, NO_WORDS)  # the evaluation's reasons for a value that cannot exist, not one that failed


def raw_text(completion: Any) -> str:
    """The text of one completion as the policy wrote it.

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


def completion_text(completion: Any) -> str:
    """The story of one completion: its text cleaned as generation cleans a writer's reply."""
    return clean_reply(WRITE, raw_text(completion))


def completion_texts(completions: list[Any]) -> list[str]:
    return [completion_text(c) for c in completions]


def floored(value: float | None, reason: str | None) -> float | None:
    """A reward value, with `NO_TEXT` where it cannot exist (`reason` is the evaluation's EMPTY or
    NO_WORDS): a text without words adds nothing new, and an empty story is information, not a failed
    call. None would be filled with the group mean (`rewards.groups`, for failed calls only) and
    escape the quality gate. A value that failed (an encoder error, say) stays None."""
    return NO_TEXT if value is None and reason in CANNOT_EXIST else value
