"""The GRPO prompt dataset: the single-agent writer request for each SciFi task, as a chat message.

The policy is trained on exactly the request a single-agent writer gets at evaluation time
(`PromptSet.writer_messages`, the one place it is built), so a trained writer drops into
`review-lab generate` unchanged. Extra columns reach the reward functions: `prompt_id` groups
siblings (group_diversity, failure imputation), `task_prompt` is the bare task (surprisal's
context), `aspect` is kept for analysis.
"""

from __future__ import annotations

from datasets import Dataset

from generate.datasets import Task
from generate.prompts import PromptSet, load_prompts


def prompt_dataset(tasks: list[Task], prompt_set: PromptSet | None = None) -> Dataset:
    """A `datasets.Dataset` with trl's conversational `prompt` column plus our reward columns."""
    prompt_set = prompt_set or load_prompts()
    return Dataset.from_list([
        {"prompt": prompt_set.writer_messages(t.prompt), "prompt_id": t.id, "aspect": t.aspect,
         "task_prompt": t.prompt}
        for t in tasks
    ])
