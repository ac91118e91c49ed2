"""LLM Review (arXiv 2601.08003): compose, blind peer review, private revision.

Blindness is structural: a revision request is built only from the writer's own drafts (its
latest story and, where its reviewers read another of them, that one), the prompt, its persona
and the feedback addressed to it in this round, so no peer story can reach a writer. Each review
is its own call for one (reviewer, target) pair, so feedback is routed by construction rather than
parsed out of a shared reply (the public code's regex routing drops or mis-routes feedback; see
README, "Deviations").

What a reviewer reads after the first round is the one choice the paper and its public code
disagree on (`Settings.review_variant`): `paper` shows only peers' initial drafts in every
round ("agents do not see peers' revised drafts (only the initial drafts and feedback)");
`public_code` shows peers' latest drafts. Under `paper`, from the second round on the feedback
is about a draft the writer has since revised, so its revision request shows that first draft,
labelled as what the reviewers read, next to its current story (`review_revise_later`; the paper,
section 3.5: agents revise using their initial draft and the feedback they received).

With R rounds there are R writing phases and R-1 review phases (the public code also runs a
last review phase whose output nobody reads; we skip it).
"""

from __future__ import annotations

from generate.datasets import Task
from generate.frameworks.base import Agent, Call, Protocol, Settings, Step, add_drafts, make_agents, register, user
from generate.prompts import PromptSet


@register("review")
def review(task: Task, prompts: PromptSet, settings: Settings) -> Protocol:
    agents = make_agents(prompts, settings.agents)
    compose = [Call(a.name, "write", user(prompts.render("review_write", persona=a.persona, prompt=task.prompt)))
               for a in agents]
    add_drafts(agents, (yield Step("compose", compose)))

    for rnd in range(1, settings.rounds):
        pairs = [(r, t) for r in agents for t in agents if r is not t]
        calls = [Call(r.name, "review", user(prompts.render(
            "review_feedback", persona=r.persona, prompt=task.prompt, story=reviewed_draft(t, settings))), to=t.name)
            for r, t in pairs]
        replies = yield Step(f"review-{rnd}", calls)
        for agent in agents:
            agent.feedback.append([])
        for (reviewer, target), reply in zip(pairs, replies, strict=True):
            target.feedback[-1].append({"from": reviewer.name, "text": reply})

        revise = [Call(a.name, "write", user(revision_request(a, task, prompts, settings))) for a in agents]
        add_drafts(agents, (yield Step(f"revise-{rnd}", revise)))
    return agents


def reviewed_index(target: Agent, settings: Settings) -> int:
    """Which of `target`'s drafts its reviewers read under the run's review variant."""
    return 0 if settings.review_variant == "paper" else len(target.drafts) - 1


def reviewed_draft(target: Agent, settings: Settings) -> str:
    """The draft of `target` its reviewers read under the run's review variant."""
    return target.drafts[reviewed_index(target, settings)]


def revision_request(writer: Agent, task: Task, prompts: PromptSet, settings: Settings) -> str:
    """The writer's revision request for this round's feedback. When its reviewers read an
    earlier draft than its current story (`paper`, rounds 2+), saying "they read it" of the
    current story would be false: the request shows the draft they read, then the current story."""
    fields = {"persona": writer.persona, "prompt": task.prompt, "story": writer.story,
              "feedback": feedback_block(writer.feedback[-1])}
    read = reviewed_index(writer, settings)
    if read == len(writer.drafts) - 1:
        return prompts.render("review_revise", **fields)
    return prompts.render("review_revise_later", reviewed=writer.drafts[read], **fields)


def feedback_block(items: list[dict]) -> str:
    """Number the reviews anonymously ("Reviewer 1"): writers see critiques, not who wrote what."""
    return "\n\n".join(f"Reviewer {i}: {item['text']}" for i, item in enumerate(items, 1))
