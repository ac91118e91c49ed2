"""GRPO rewards for creative writing, each a thin wrapper over the evaluation's metric code and
scorers (`eval.metrics`, `eval.judge`, `eval.scorers`).

Importing the package registers every reward in `REWARDS`; `build_rewards` turns a recipe's
`reward_funcs` / `reward_options` / `reward_gate` into the named callables trl expects, all sharing
one `RewardContext`.
"""

from rewards import diversity, judge, length, novelty, surprisal  # noqa: F401 - registers the rewards
from rewards import reward_model  # noqa: F401 - registers the reward model's reward (eval.scorers.reward_model)
from rewards import principle_judge  # noqa: F401 - registers the principle_judge reward (eval.scorers.principles)
from rewards.build import build_rewards, check_recipe
from rewards.context import RewardContext
from rewards.registry import REWARDS, get_reward, reward

__all__ = ["REWARDS", "RewardContext", "build_rewards", "check_recipe", "get_reward", "reward"]
