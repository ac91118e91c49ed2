"""LLM Teacher: a teacher advises, students (personas) draft, the teacher critiques the whole
class at once (one-to-many feedback), students revise.

With R rounds: advice, draft, then R-1 times (class critique, revision). All calls are
stateless, like Review's, so the two differ only in who gives feedback and to whom. The critique
reads the stories numbered (Story 1, 2, ...) and may name them so; each student is told its own
number, taken from the same numbering (`numbered`), or "Story 2 lacks a turn" would be lost on it.
"""

from __future__ import annotations

from generate.datasets import Task
from generate.frameworks.base import (
    Call,
    Protocol,
    Settings,
    Step,
    add_drafts,
    make_agents,
    numbered,
    peers_block,
    register,
    user,
)
from generate.prompts import PromptSet

TEACHER = "teacher"


@register("teacher")
def teacher(task: Task, prompts: PromptSet, settings: Settings) -> Protocol:
    students = make_agents(prompts, settings.agents)
    advise = Call(TEACHER, "advice", user(prompts.render("teacher_advice", prompt=task.prompt)))
    (advice,) = yield Step("advice", [advise])
    drafts = [Call(s.name, "write", user(prompts.render("teacher_write", persona=s.persona, prompt=task.prompt,
                                                         advice=advice))) for s in students]
    add_drafts(students, (yield Step("draft", drafts)))

    for rnd in range(1, settings.rounds):
        critique_msg = prompts.render("teacher_critique", prompt=task.prompt, peers=peers_block(students, None))
        (critique,) = yield Step(f"critique-{rnd}", [Call(TEACHER, "critique", user(critique_msg))])
        for s in students:
            s.feedback.append([{"from": TEACHER, "text": critique}])
        revise = [Call(s.name, "write", user(prompts.render("teacher_revise", persona=s.persona, prompt=task.prompt,
                                                             story=s.story, feedback=critique, number=str(n))))
                  for n, s in numbered(students)]
        add_drafts(students, (yield Step(f"revise-{rnd}", revise)))
    return students
