"""Our script arguments for `train/grpo.py`; model and trainer settings are trl's own
`ModelConfig` and `GRPOConfig` (reward weights included: `reward_weights`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from generate.common.errors import UsageError
from generate.common.ranges import HELD_OUT, OneOf, Range, check_options
from rewards.gate import GATES


@dataclass
class ScriptArguments:
    """What to train on and which rewards to use.

    Attributes:
        dataset: prompt dataset spec: `default` (bundled 20 prompts), `scifi100`, or a path.
        eval_fraction: share of prompts held out from training (stratified by aspect).
        split_seed: seed of the train/eval split.
        reward_funcs: registered reward names (see `rewards.REWARDS`), in `reward_weights` order.
        reward_options: per-reward keyword options, `{name: {option: value}}` (JSON on the CLI).
        reward_gate: `none` (weighted sum) or `judge` (novelty rewards x judge quality).
        save_merged: also save the LoRA-merged model in `<output_dir>/merged` for `generate`.
        allow_weak_signal: train on a `reward_model` / `principle_judge` signal whose held-out
            interval includes chance or that has no held-out measurement (`rewards.signal_check`);
            refused by default, recorded in the manifest when allowed.
    """

    RANGES: ClassVar[dict[str, Range]] = {"eval_fraction": HELD_OUT}  # trl's parser reads this class
    CHECKS: ClassVar[dict[str, Callable[[Any], None]]] = {"reward_gate": OneOf(GATES)}

    dataset: str = field(default="default", metadata={"help": "default, scifi100, or a .json/.jsonl path"})
    eval_fraction: float = field(default=0.2, metadata={"help": "share of prompts held out (by aspect)"})
    split_seed: int = field(default=0, metadata={"help": "seed of the train/eval prompt split"})
    reward_funcs: list[str] = field(default_factory=lambda: ["judge", "novelty_cos", "group_diversity", "length"],
                                    metadata={"help": "reward names, in reward_weights order"})
    reward_options: dict[str, Any] | str | None = field(
        default=None, metadata={"help": 'per-reward options, e.g. \'{"length": {"target_words": 300}}\''})
    reward_gate: str = field(default="none", metadata={"help": "none, judge: gate novelty rewards on judge quality"})
    save_merged: bool = field(default=True, metadata={"help": "save the merged model in <output_dir>/merged"})
    allow_weak_signal: bool = field(default=False, metadata={
        "help": "train on a learned signal whose held-out interval includes chance (recorded, marked in tables)"})

    def __post_init__(self) -> None:
        check_options(self)  # trl's parser builds this class, not `build_config`
        if isinstance(self.reward_options, str):
            try:
                self.reward_options = json.loads(self.reward_options)
            except json.JSONDecodeError as exc:
                raise UsageError(f"reward_options must be a JSON object: {exc}") from None
        self.reward_options = self.reward_options or {}
        options = self.reward_options
        if not isinstance(options, dict) or not all(isinstance(v, dict) for v in options.values()):
            raise UsageError("reward_options must map reward names to option mappings")
