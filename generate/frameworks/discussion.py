"""LLM Discussion (Lu et al. 2024) for stories: personas as system prompts, an initiation round,
discussion rounds reading peers' previous-round stories, and a final convergence round.
Full chat history per agent, simultaneous updates.
"""

from __future__ import annotations

from generate.datasets import Task
from generate.frameworks.base import Agent, Protocol, Settings, chat_rounds, make_agents, peers_block, register
from generate.prompts import PromptSet


@register("discussion")
def discussion(task: Task, prompts: PromptSet, settings: Settings) -> Protocol:
    agents = make_agents(prompts, settings.agents)
    for a in agents:
        a.history += [{"role": "system", "content": prompts.render("discussion_system", persona=a.persona)},
                      {"role": "user", "content": prompts.render("discussion_initiate", prompt=task.prompt)}]

    def next_message(rnd: int, agent: Agent) -> str:
        name = "discussion_converge" if rnd == settings.rounds - 1 else "discussion_round"
        return prompts.render(name, peers=peers_block(agents, agent))

    yield from chat_rounds(agents, settings.rounds, next_message, phase="discussion")
    return agents
