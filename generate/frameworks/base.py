"""What a framework is: a per-prompt protocol written as a generator of phases.

A framework yields one `Step` per phase (all model calls it needs at that point) and receives
the replies, in order. It never calls a model itself, so the runner can gather the steps of
every prompt in a run and send them to the backend as one batch (phase-synchronous batching),
and tests can drive a framework with scripted replies.

Replies arrive clean (`generate.clean.clean_reply`, by the call's role) and never blank: the
runner re-asks a blank reply and abandons the prompt if it stays blank, so a framework never
has to decide what an empty story or an empty review means.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field

from generate.common.errors import UsageError
from generate.datasets import Task
from generate.phases import drive
from generate.prompts import PromptSet


@dataclass
class Call:
    """One stateless model call: `agent` owns it (for cost accounting), `to` receives a review."""

    agent: str
    role: str  # write (the reply is a story) | review | advice | critique (the reply is feedback)
    messages: list[dict[str, str]]
    to: str | None = None


@dataclass
class Step:
    phase: str
    calls: list[Call]


@dataclass
class Agent:
    name: str
    persona: str | None = None
    drafts: list[str] = field(default_factory=list)
    feedback: list[list[dict]] = field(default_factory=list)  # per revision round: [{"from", "text"}]
    history: list[dict[str, str]] = field(default_factory=list)  # chat history (Debate, Discussion)

    @property
    def story(self) -> str:
        return self.drafts[-1]


# Review only: what a reviewer reads of a peer after the first round (README, "Deviations").
REVIEW_VARIANTS = {
    "paper": "reviewers read peers' initial drafts in every round (the paper's reading)",
    "public_code": "reviewers read peers' latest drafts (the authors' public code)",
}


@dataclass(frozen=True)
class Settings:
    """Interaction structure, shared by every framework so comparisons are like for like."""

    agents: int = 3
    rounds: int = 3
    review_variant: str = "paper"  # a key of REVIEW_VARIANTS

    def __post_init__(self) -> None:
        if self.agents < 1 or self.rounds < 1:
            raise UsageError("agents and rounds must be at least 1")
        if self.review_variant not in REVIEW_VARIANTS:
            raise UsageError(f"unknown review_variant {self.review_variant!r}; choose one of: "
                             + ", ".join(REVIEW_VARIANTS))


Protocol = Generator[Step, list[str], list[Agent]]
FrameworkFn = Callable[[Task, PromptSet, Settings], Protocol]
FRAMEWORKS: dict[str, FrameworkFn] = {}
MIN_AGENTS: dict[str, int] = {}  # framework -> the fewest agents its protocol makes sense with


def register(name: str, *, min_agents: int = 2) -> Callable[[FrameworkFn], FrameworkFn]:
    """Register a framework. A multi-agent one needs 2 agents at least: with one, a writer has no
    peer, so a reviser would get an empty feedback block and a debater an empty list of stories."""
    def deco(fn: FrameworkFn) -> FrameworkFn:
        FRAMEWORKS[name] = fn
        MIN_AGENTS[name] = min_agents
        return fn
    return deco


def check_agents(name: str, agents: int) -> None:
    """Refuse too few agents for framework `name` (an unknown name is refused elsewhere). Every
    run config calls it when built, so the command line, a sweep's grid point and a benchmark
    are refused the same way, before their run writes anything."""
    need = MIN_AGENTS.get(name, 1)
    if agents < need:
        raise UsageError(f"--agents {agents}: {name} needs at least {need} agents (with fewer, a writer would "
                         "receive no peer's story and no feedback)")


def get_framework(name: str) -> FrameworkFn:
    if name not in FRAMEWORKS:
        raise UsageError(f"unknown framework {name!r}; choose one of: {', '.join(sorted(FRAMEWORKS))}")
    return FRAMEWORKS[name]


def planned_calls(framework: FrameworkFn, task: Task, prompts: PromptSet, settings: Settings) -> int:
    """The calls `framework` makes for `task` when every reply is usable (re-asks aside): driven
    with a placeholder reply, since a framework's calls do not depend on what the replies say."""
    count = 0

    def placeholder(steps: dict[str, Step]) -> dict[str, list[str]]:
        nonlocal count
        count += sum(len(step.calls) for step in steps.values())
        return {k: ["A story about a comet."] * len(step.calls) for k, step in steps.items()}

    drive({task.id: framework(task, prompts, settings)}, placeholder)
    return count


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def make_agents(prompts: PromptSet, n: int, personas: bool = True) -> list[Agent]:
    if personas:
        return [Agent(*prompts.persona(i)) for i in range(n)]
    return [Agent(f"agent-{i + 1}") for i in range(n)]


def add_drafts(agents: list[Agent], replies: list[str]) -> None:
    for agent, reply in zip(agents, replies, strict=True):
        agent.drafts.append(reply)


def story_block(story: str) -> str:
    """Delimit a story so that its text reads as material, not as instructions."""
    return f"<<<STORY\n{story}\nSTORY>>>"


def numbered(agents: list[Agent], exclude: Agent | None = None) -> list[tuple[int, Agent]]:
    """The number each agent's story carries in a `peers_block` (1, 2, ...; `exclude` left out):
    the one numbering, so a writer told "yours is Story n" is told the number its reader saw."""
    return list(enumerate((a for a in agents if a is not exclude), 1))


def peers_block(agents: list[Agent], exclude: Agent | None, label: str = "Story") -> str:
    return "\n\n".join(f"{label} {i}:\n{story_block(a.story)}" for i, a in numbered(agents, exclude))


def chat_rounds(agents: list[Agent], rounds: int, next_message: Callable[[int, Agent], str],
                phase: str) -> Generator[Step, list[str], None]:
    """Run `rounds` rounds of multi-turn chat; `next_message(round, agent)` builds the next user
    turn from the previous round's stories (computed before anyone's history changes)."""
    for rnd in range(rounds):
        if rnd:
            messages = [next_message(rnd, a) for a in agents]
            for a, msg in zip(agents, messages):
                a.history.append({"role": "user", "content": msg})
        calls = [Call(a.name, "write", list(a.history)) for a in agents]
        replies = yield Step(f"{phase}-{rnd + 1}", calls)
        add_drafts(agents, replies)
        for a in agents:
            a.history.append({"role": "assistant", "content": a.story})
