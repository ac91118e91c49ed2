"""Single Agent: one zero-shot call per prompt, the base model's own ability.

No persona (a declared choice, README "Deviations"): the paper describes this baseline as plain
zero-shot prompting, and GRPO trains on exactly this request (`PromptSet.writer_messages`).
"""

from generate.datasets import Task
from generate.frameworks.base import Agent, Call, Protocol, Settings, Step, add_drafts, register
from generate.prompts import PromptSet


@register("single", min_agents=1)  # one writer whatever --agents says
def single(task: Task, prompts: PromptSet, settings: Settings) -> Protocol:
    agent = Agent("single")
    call = Call(agent.name, "write", prompts.writer_messages(task.prompt))
    add_drafts([agent], (yield Step("write", [call])))
    return [agent]
