"""The three roles of the adversarial game, each a protocol: a generator of phases (`Step`s of chat
requests) that receives the completions and never calls a model itself.

- `detect`: the Detector judges one response under its principles.
- `damage`: the Generator damages a good response (or writes a bad one from a prompt) under its
  strategy; `attack`: `damage`, then the Detector judges the result: caught or fooled.
- `diagnose`: the Reflector diagnoses one of the Detector's mistakes on a labelled response
  (`detect` finds them; `mistakes` picks at most `Limits.max_diagnoses`, both kinds in turn).
- `revise`: from an iteration's outcomes, the Generator's strategy is pushed to be subtler (if
  some attacks were caught), the principles are rewritten from the attacks that fooled the
  Detector, then the Reflector rewrites them from its diagnoses. Unusable rewrites are recorded
  and the old text kept.

`run_phases` drives many protocols in lockstep (`generate.phases.drive`) over a fixed phase order,
padding each with empty steps (`aligned`), so every batch holds the calls of one phase only: all
generator calls of an iteration go out together, then all its detector calls, and so on. Which
mistakes get diagnosed, and what the rewrites read, depend on every verdict of the iteration, so
an iteration drives (generate, detect), then (diagnose), then (revise, reflect), then (evaluate).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Generator, Hashable
from dataclasses import dataclass, field
from typing import Any

from eval.scorers.principles.detector import THRESHOLD, Detector
from eval.scorers.principles.texts import State, Templates, fenced, numbered, unfenced
from generate.backends import ChatRequest, Completion, SamplingParams
from generate.clean import clean_story
from generate.phases import drive
from rewards.principles.texts import bounded, parse_principles, parse_strategy, reply_text

DIAGNOSIS_WORDS = 60
LIST_PREFILL = "- "
DIAGNOSIS_TOKENS = 96  # the Reflector is asked for two sentences; a longer reply is cut at 60 words anyway


@dataclass
class Step:
    phase: str
    requests: list[ChatRequest]


Protocol = Generator[Step, list[Completion], Any]
Complete = Callable[[list[ChatRequest], str], list[Completion]]


@dataclass(frozen=True)
class Example:
    """One labelled response; `group` keeps related rows (a passage and its damaged copy) together."""

    id: str
    prompt: str
    response: str
    label: int
    group: str = ""
    split: str | None = None


@dataclass
class Attempt:
    source: str
    text: str
    p_good: float | None = None
    skipped: str | None = None  # why no verdict was asked: blank or unchanged damage, a failed call

    @property
    def caught(self) -> bool:
        return self.p_good is not None and self.p_good < THRESHOLD

    @property
    def fooled(self) -> bool:
        return self.p_good is not None and self.p_good >= THRESHOLD


@dataclass
class Check:
    """The Detector's verdict on a labelled row, and the Reflector's diagnosis if it was wrong."""

    example: Example
    p_good: float | None
    diagnosis: str | None = None

    @property
    def label(self) -> int:
        return self.example.label

    @property
    def wrong(self) -> bool:
        return self.p_good is not None and (self.p_good >= THRESHOLD) != (self.example.label == 1)


@dataclass(frozen=True)
class Limits:
    max_principles: int = 8
    max_words: int = 30  # per principle
    strategy_words: int = 80
    max_examples: int = 3  # damaged texts shown in one rewrite request
    max_diagnoses: int = 8  # diagnoses shown to the Reflector


@dataclass
class Revision:
    state: State
    updates: list[dict] = field(default_factory=list)  # one record per rewrite asked


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def detect(example: Example, detector: Detector, phase: str = "detect", response: str | None = None) -> Protocol:
    """The Detector's P(good) (or 0/1) for `response` (default: the example's own)."""
    replies = yield Step(phase, detector.requests(example.prompt, example.response if response is None else response))
    return detector.verdict(replies)


def damage(source: Example, strategy: str, templates: Templates, params: SamplingParams, seed: int) -> Protocol:
    """The Generator alone: a damaged copy of a good response (or a bad response written from the
    prompt when the source is not good), as an `Attempt` without a verdict; `skipped` says why it
    is unusable (blank once cleaned, or the good response unchanged)."""
    if source.label == 1:
        text = templates.render("degrade", strategy=strategy, prompt=source.prompt, response=fenced(source.response))
    else:
        text = templates.render("write_bad", strategy=strategy, prompt=source.prompt)
    (reply,) = yield Step("generate", [ChatRequest(user(text), params, seed=seed)])
    if reply.error:
        return Attempt(source.id, "", skipped=f"failed: {reply.error}")
    bad = clean_story(unfenced(reply.text))
    if not bad or (source.label == 1 and " ".join(bad.split()) == " ".join(source.response.split())):
        return Attempt(source.id, bad, skipped="unchanged" if bad else "blank")
    return Attempt(source.id, bad)


def attack(source: Example, strategy: str, detector: Detector, templates: Templates, params: SamplingParams,
           seed: int) -> Protocol:
    """Generator then Detector: an `Attempt` with the Detector's P(good) of the damaged text."""
    attempt = yield from damage(source, strategy, templates, params, seed)
    if attempt.skipped is None:
        attempt.p_good = yield from detect(source, detector, response=attempt.text)
    return attempt


def diagnose(example: Example, p_good: float, principles: tuple[str, ...], templates: Templates,
             params: SamplingParams, seed: int) -> Protocol:
    """The Reflector's diagnosis of one Detector mistake (None if the reply held nothing usable)."""
    name = {1: "good", 0: "bad"}
    text = templates.render("diagnose", principles=numbered(principles), prompt=example.prompt,
                            response=fenced(example.response), truth=name[example.label],
                            verdict=f"{name[int(p_good >= THRESHOLD)]} (P(good) = {p_good:.2f})")
    budget = SamplingParams(min(params.max_new_tokens, DIAGNOSIS_TOKENS), params.temperature, params.top_p)
    (reply,) = yield Step("diagnose", [ChatRequest(user(text), budget, seed=seed)])
    return None if reply.error else bounded(reply_text(reply, echo_of=text), DIAGNOSIS_WORDS) or None


def mistakes(checks: list[Check], limit: int, rng: random.Random) -> list[Check]:
    """At most `limit` of the Detector's mistakes, taken in turn from those it called good and those it
    called bad (a seeded draw within each), so the Reflector hears about both kinds of error."""
    kinds = [[c for c in checks if c.wrong and c.label == label] for label in (0, 1)]
    for kind in kinds:
        rng.shuffle(kind)
    return [c for pair in itertools.zip_longest(*kinds) for c in pair if c is not None][:limit]


def revise(state: State, attempts: list[Attempt], diagnoses: list[str], templates: Templates, limits: Limits,
           params: SamplingParams, seeds: dict[str, int], prefill: bool = False) -> Protocol:
    """The iteration's rewrites (strategy and adversarial feedback together, then the Reflector's):
    returns a `Revision` with the new state and a record of every rewrite. With `prefill` (a
    backend that honours it) a principles rewrite starts inside its list ("- "), the way the
    Detector's reply starts at "Score:": small models otherwise answer in prose, which is unusable."""
    start = LIST_PREFILL if prefill else None
    caught = [a.text for a in attempts if a.caught][:limits.max_examples]
    fooled = [a.text for a in attempts if a.fooled][:limits.max_examples]
    bounds = {"max_principles": limits.max_principles, "max_words": limits.max_words}
    asks: list[tuple[str, str]] = []
    if caught:
        asks.append(("generator", templates.render("subtler", strategy=state.strategy, examples=_examples(caught),
                                                   max_words=limits.strategy_words)))
    if fooled:
        asks.append(("feedback", templates.render("feedback", principles=numbered(state.principles),
                                                  strategy=state.strategy, examples=_examples(fooled), **bounds)))
    principles, strategy, updates = state.principles, state.strategy, []
    if asks:
        replies = yield Step("revise", [ChatRequest(user(t), params, seed=seeds[r], prefill=None if r == "generator"
                                                    else start) for r, t in asks])
        for (role, text), reply in zip(asks, replies, strict=True):
            if role == "generator":
                new, why = parse_strategy(reply_text(reply, echo_of=text), limits.strategy_words) \
                    if not reply.error else (None, reply.error)
                strategy = new or strategy
            else:
                new, why = parse_principles(reply_text(reply, prefill=start), **bounds) if not reply.error \
                    else (None, reply.error)
                principles = new or principles
            updates.append(_update(role, new, why, reply, len(caught if role == "generator" else fooled)))
    diagnoses = diagnoses[:limits.max_diagnoses]
    if diagnoses:
        text = templates.render("reflect", principles=numbered(principles),
                                diagnoses="\n".join(f"- {d}" for d in diagnoses), **bounds)
        (reply,) = yield Step("reflect", [ChatRequest(user(text), params, seed=seeds["reflector"], prefill=start)])
        new, why = parse_principles(reply_text(reply, prefill=start), **bounds) if not reply.error \
            else (None, reply.error)
        principles = new or principles
        updates.append(_update("reflector", new, why, reply, len(diagnoses)))
    return Revision(State(principles, strategy), updates)


def _examples(texts: list[str]) -> str:
    return "\n\n".join(f"Example {i}:\n{fenced(t)}" for i, t in enumerate(texts, 1))


def _update(role: str, new: object, why: str, reply: Completion, n_inputs: int) -> dict:
    return {"role": role, "inputs": n_inputs, "used": new is not None, "reason": None if new is not None else why,
            "reply": reply.text[:2000]}


def aligned(protocol: Protocol, phases: tuple[str, ...]) -> Protocol:
    """`protocol` padded with empty steps so that it yields exactly one step per phase of `phases`,
    in order, whether it needs that phase or not (or has already ended). A step whose phase is out
    of order is a bug and raises."""
    step, done, value = None, False, None
    try:
        step = next(protocol)
    except StopIteration as stop:
        done, value = True, stop.value
    for phase in phases:
        if done or step.phase != phase:
            yield Step(phase, [])
            continue
        replies = yield step
        try:
            step = protocol.send(replies)
        except StopIteration as stop:
            done, value = True, stop.value
    if not done:
        raise RuntimeError(f"a protocol yielded phase {step.phase!r}, not one of {phases} in order")
    return value


def run_phases(protocols: dict[Hashable, Protocol], phases: tuple[str, ...], complete: Complete) -> dict:
    """Drive `protocols` in lockstep, sending each phase's requests, across all of them, to
    `complete(requests, phase)` as one batch. Returns each protocol's result by key."""
    def answer(steps: dict[Hashable, Step]) -> dict[Hashable, list[Completion]]:
        (phase,) = {s.phase for s in steps.values()}
        flat = [(k, r) for k, s in steps.items() for r in s.requests]
        outs = complete([r for _, r in flat], phase) if flat else []
        replies: dict[Hashable, list[Completion]] = {k: [] for k in steps}
        for (k, _), out in zip(flat, outs, strict=True):
            replies[k].append(out)
        return replies

    return drive({k: aligned(p, phases) for k, p in protocols.items()}, answer)
