"""GRPO rewards for creative writing, each a thin wrapper over the evaluation's metric code.

Importing the package registers every reward in `REWARDS`; `build_rewards` turns a recipe's
`reward_funcs` / `reward_options` / `reward_gate` into the named callables trl expects.
"""

from rewards import diversity, judge, length, novelty, surprisal  # noqa: F401 - registers the rewards
from rewards.registry import REWARDS, build_rewards, get_reward, reward

__all__ = ["REWARDS", "build_rewards", "get_reward", "reward"]
