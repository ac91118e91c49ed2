"""Our GRPO trainer: trl's, with one definition added: what a failed reward value means.

trl gathers every reward function's values into one (completions x rewards) matrix, NaN where a
reward returned None, and sums the weighted components with `nansum`, so a component that failed
for one completion counts as 0 for it while its siblings keep theirs. `GRPOTrainer` fills each
such value with the mean of its prompt group's present values right after the gather, so a
failure gives that component a zero advantage instead of a penalty (see `rewards.groups`, the
one implementation, which `rewards.composite.score_batch` also uses). Everything else is trl's.
The count of filled values is logged per reward as `rewards/<name>/filled`.
"""

from __future__ import annotations

import torch
import trl

from rewards.groups import fill_group_means


class GRPOTrainer(trl.GRPOTrainer):
    """`trl.GRPOTrainer` whose failed reward values carry no advantage (see the module docstring)."""

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        mode = "train" if self.model.training else "eval"
        size = self.num_generations if mode == "train" else self.num_generations_eval
        # After the gather, rows are in global order and each prompt's generations are contiguous
        # (trl's RepeatSampler), which is how trl itself groups them: view(-1, num_generations).
        groups = [row // size for row in range(rewards.shape[0])]
        for i, name in enumerate(self.reward_func_names):
            filled, count = fill_group_means(rewards[:, i].tolist(), groups)
            if count:
                rewards[:, i] = torch.tensor([torch.nan if v is None else v for v in filled],
                                             dtype=rewards.dtype, device=rewards.device)
            self._metrics[mode][f"rewards/{name}/filled"].append(float(count))
        return rewards
