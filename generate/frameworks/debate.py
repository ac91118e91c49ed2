"""LLM Debate (Du et al. 2023) for stories: no personas; every agent keeps its chat history and,
each round after the first, reads the other agents' previous-round stories as advice.

Updates are simultaneous: round r sees only round r-1 stories.
"""

from __future__ import annotations

from generate.datasets import Task
from generate.frameworks.base import Protocol, Settings, chat_rounds, make_agents, peers_block, register
from generate.prompts import PromptSet


@register("debate")
def debate(task: Task, prompts: PromptSet, settings: Settings) -> Protocol:
    agents = make_agents(prompts, settings.agents, personas=False)
    for a in agents:
        a.history.append({"role": "user", "content": prompts.render("debate_write", prompt=task.prompt)})
    yield from chat_rounds(agents, settings.rounds, lambda rnd, a: prompts.render(
        "debate_update", peers=peers_block(agents, a)), phase="debate")
    return agents

