"""Scripted backends for testing our own logic (protocols, the optimisation loop, resume, the
reward's batching): never a stand-in for a judge's quality."""

from __future__ import annotations

import math
import string
from collections.abc import Callable

from generate.backends import Backend, ChatRequest, Completion, Model, RetryPolicy, TokenLogprob
from eval.scorers.principles.texts import Templates, load_templates
from tests.backends import RecordingBackend


def role_of(request: ChatRequest, templates: Templates) -> str:
    """Which template a request was rendered from: the one whose literal text it all contains."""
    text = request.messages[-1]["content"]
    roles = [name for name, tpl in templates.templates.items()
             if all(lit.strip() in text for lit, *_ in string.Formatter().parse(tpl) if lit.strip())]
    assert len(roles) == 1, roles
    return roles[0]


def good_digit(request: ChatRequest, templates: Templates) -> str:
    """The digit that means "good" in a Detector request (the label order)."""
    return "0" if f"0: {templates.labels['good']}" in request.messages[-1]["content"] else "1"


def digit_reply(digit: str, p: float = 0.99) -> Completion:
    """A logprob-mode reply whose first position puts probability `p` on `digit`."""
    other = "1" if digit == "0" else "0"
    top = {digit: math.log(p), other: math.log(1 - p)}
    return Completion(text=digit, completion_tokens=1, logprobs=[TokenLogprob(digit, top[digit], top)])


def says_good(good: bool, request: ChatRequest, templates: Templates, p: float = 0.99) -> Completion:
    g = good_digit(request, templates)
    return digit_reply(g if good else ("1" if g == "0" else "0"), p)


class RoleBackend(RecordingBackend):
    """Answers each request by its role: `rules[role](request) -> str | Completion`.

    Default rules: the Detector calls a text good unless it holds "DAMAGED"; the Generator prefixes
    "DAMAGED" to the text it was shown; rewrites return usable lists and strategies; diagnoses a
    sentence. Records every request with its role, and the size of each engine call.
    """

    batch_size = 64
    supports_prefill = True

    def __init__(self, rules: dict[str, Callable] | None = None, templates: Templates | None = None,
                 delay: float = 0.0, error: Exception | None = None):
        super().__init__("role-fake", delay, error)
        self.templates = templates or load_templates()
        self.rules = {**self.defaults(), **(rules or {})}
        self.seen: list[tuple[str, ChatRequest]] = []

    def defaults(self) -> dict[str, Callable]:
        t = self.templates
        return {
            "detector": lambda r: says_good("DAMAGED" not in _fenced_text(r), r, t),
            "degrade": lambda r: "DAMAGED " + _fenced_text(r),
            "write_bad": lambda r: "DAMAGED a response written from the prompt.",
            "subtler": lambda r: f"Hide the damage better, variant {len(r.messages[0]['content']) % 97}.",
            "feedback": lambda r: "- Reject any text that holds damage of any kind.\n- Keep the good texts as they are.",
            "diagnose": lambda r: "Principle 2 is too vague about damage.",
            "reflect": lambda r: "1. Look for damage in every sentence.\n2. A clean text is a good text.\n"
                                 "3. Read the whole response before deciding.",
        }

    def reply(self, request: ChatRequest) -> str | Completion:
        role = role_of(request, self.templates)
        self.seen.append((role, request))
        return self.rules[role](request)

    def roles(self) -> list[str]:
        return [role for role, _ in self.seen]


def _fenced_text(request: ChatRequest) -> str:
    """The (first) fenced text of a request, between its hash markers."""
    text = request.messages[-1]["content"]
    start = text.index("<<<STORY-")
    body = text[text.index("\n", start) + 1:]
    return body[:body.index("\nSTORY-")]


def model_of(backend: Backend) -> Model:
    return Model(backend, policy=RetryPolicy(retries=0, empty_retries=0))
