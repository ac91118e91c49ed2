"""Our GRPO trainer: trl's, with two definitions added: what a failed reward value means, and which
prompts a resumed run's later epochs see.

trl gathers every reward function's values into one (completions x rewards) matrix, NaN where a
reward returned None, and sums the weighted components with `nansum`, so a component that failed
for one completion counts as 0 for it while its siblings keep theirs. `GRPOTrainer` fills each
such value with the mean of its prompt group's present values right after the gather, so a
failure gives that component a zero advantage instead of a penalty (see `rewards.groups`, the
one implementation, which `rewards.composite.score_batch` also uses). The count of filled values
is logged per reward as `rewards/<name>/filled`, and `rewards/<name>/mean` and `/std` are over the
values the reward gave, not the fills: trl computes them after the fill, where a fill is an
estimate (its group's mean) counted as an observation, which moves the mean whenever groups fail
unevenly and always shrinks the spread. The total (`reward`) is what the advantages were computed
from, fills included.

trl's `RepeatSampler` draws each epoch's prompt order from one generator seeded once, so epoch e's
order is the generator's e-th draw. A run resumed from a checkpoint builds a fresh sampler, and
transformers only tells it the epoch (`set_epoch`): the resumed run's later epochs replayed epoch
0's order, another data order than the uninterrupted run's. `EpochRepeatSampler` makes epoch e's
order a function of (seed, e), the same draw an uninterrupted run makes, and the trainer sets the
epoch before each one. Everything else is trl's.
"""

from __future__ import annotations

import torch
import trl
from trl.trainer.utils import RepeatSampler, nanstd

from rewards.groups import fill_group_means


class EpochRepeatSampler(RepeatSampler):
    """trl's `RepeatSampler` whose order in epoch e is the e-th draw of a generator seeded with
    `seed`, however many epochs this instance has iterated (see the module docstring)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __iter__(self):
        if self.shuffle:
            self.generator = torch.Generator()
            self.generator.manual_seed(self.seed if self.seed is not None else 0)
            for _ in range(self.epoch):  # the draws of the epochs before this one
                torch.randperm(self.num_samples, generator=self.generator)
        self.epoch += 1  # a caller that never sets the epoch still gets a new order each time
        return super().__iter__()


class GRPOTrainer(trl.GRPOTrainer):
    """`trl.GRPOTrainer` whose failed reward values carry no advantage and whose resumed runs see
    the prompts in the uninterrupted run's order (see the module docstring)."""

    def _get_train_sampler(self, dataset=None):
        trl_sampler = super()._get_train_sampler(dataset)
        self._epoch_sampler = EpochRepeatSampler(
            trl_sampler.data_source, trl_sampler.mini_repeat_count, trl_sampler.batch_size,
            trl_sampler.repeat_count, trl_sampler.shuffle, trl_sampler.seed)
        return self._epoch_sampler

    def _run_epoch(self, *args, **kwargs):
        # Set here too: accelerate forwards `set_epoch` only through some of its sampler wrappers.
        sampler = getattr(self, "_epoch_sampler", None)
        if sampler is not None:
            sampler.set_epoch(kwargs["epoch"])
        return super()._run_epoch(*args, **kwargs)

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        rewards = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        mode = "train" if self.model.training else "eval"
        size = self.num_generations if mode == "train" else self.num_generations_eval
        # After the gather, rows are in global order and each prompt's generations are contiguous
        # (trl's RepeatSampler), which is how trl itself groups them: view(-1, num_generations).
        groups = [row // size for row in range(rewards.shape[0])]
        given = {}
        for i, name in enumerate(self.reward_func_names):
            given[name] = (torch.nanmean(rewards[:, i]).item(), nanstd(rewards[:, i]).item())
            filled, count = fill_group_means(rewards[:, i].tolist(), groups)
            if count:
                rewards[:, i] = torch.tensor([torch.nan if v is None else v for v in filled],
                                             dtype=rewards.dtype, device=rewards.device)
            self._metrics[mode][f"rewards/{name}/filled"].append(float(count))
        self._given_stats = (mode, given)
        return rewards

    def _generate_and_score_completions(self, inputs):
        """trl's, with each reward's logged mean and std over the values it gave (see the module
        docstring): trl appends them once per call, from the filled matrix; the last entry of each
        is replaced."""
        self._given_stats = None
        output = super()._generate_and_score_completions(inputs)
        if self._given_stats is not None:
            mode, given = self._given_stats
            for name, stats in given.items():
                for stat, value in zip(("mean", "std"), stats):
                    series = self._metrics[mode].get(f"rewards/{name}/{stat}")
                    if series:
                        series[-1] = value
        return output
