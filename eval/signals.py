"""The second paper's two reward signals as evaluation metrics: is a story excellent?

arXiv 2508.21476 reports an "excellence rate": the share of outputs a signal calls good. Here the
two signals are the principle judge (`eval.scorers.principles`: P(good) under optimised
principles) and the Bradley-Terry reward model trained on curated preferences
(`eval.scorers.reward_model`: a score, called good above the model's own decision threshold,
saved by `train/reward_model.py`: halfway between its mean score of curated good and bad
stories). They are computed by the scorers the GRPO rewards wrap, with the rewards' defaults, so a
story's value here is what GRPO with that signal would have been given for it. Per story:

- `principle_p` (P(good)) and `principle_good` (1 when P(good) >= 0.5): the mean of
  `principle_good` over stories is the principle judge's excellence rate;
- `rm_score` and `rm_good` (1 above the threshold): the reward model's excellence rate;

and the agreement rate of the two signals is the share of stories both give the same verdict.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from eval.metrics.catalog import MetricSpec
from eval.metrics.story import EMPTY, Measured
from eval.scorers.principles.scorer import PrincipleScorer
from generate.common.errors import UsageError
from generate.prompts import PromptSet

if TYPE_CHECKING:
    from eval.scorers.reward_model import RewardModelScorer

SIGNAL = "signal"
PRINCIPLE_TIMEOUT = 3600.0  # seconds for the principle judge's one batched call over every story
PRINCIPLE_METRICS = (MetricSpec("principle_good", "Excellent (principles)", SIGNAL),
                     MetricSpec("principle_p", "P(good), principles", SIGNAL))
RM_METRICS = (MetricSpec("rm_good", "Excellent (RM)", SIGNAL), MetricSpec("rm_score", "RM score", SIGNAL))


def rm_threshold(model_dir: str | Path) -> float:
    """The decision threshold `train/reward_model.py` saved with the model."""
    path = Path(model_dir) / "metrics.json"
    if not path.is_file():
        path = Path(model_dir).parent / "metrics.json"  # given the merged/ directory itself
    try:
        threshold = json.loads(path.read_text(encoding="utf-8"))["threshold"]
    except (OSError, ValueError, KeyError):
        threshold = None
    if threshold is None:
        raise UsageError(f"{model_dir}: no decision threshold (metrics.json of train/reward_model.py)")
    return float(threshold)


class Signals:
    """Scores stories with the principle judge and/or the reward model (each optional), each
    loaded once, on first use.

    Args:
        prompts: the writer templates (the reward model sees each story as the answer to the
            single-agent writer request for its task, as GRPO's completions are).
        principles: a principles YAML, or None.
        judge: the principle judge's model spec.
        reward_model: a `train/reward_model.py` output directory, or None.
    """

    def __init__(self, prompts: PromptSet, *, principles: str | None, judge: str, reward_model: str | None):
        self.prompts, self.principles, self.judge, self.reward_model = prompts, principles, judge, reward_model
        self.threshold = rm_threshold(reward_model) if reward_model else None
        self._principle_scorer: PrincipleScorer | None = None
        self._rm_scorer: RewardModelScorer | None = None

    @property
    def specs(self) -> tuple[MetricSpec, ...]:
        return (PRINCIPLE_METRICS if self.principles else ()) + (RM_METRICS if self.reward_model else ())

    def fingerprint(self) -> dict:
        return {"principles": self.principles, "principle_judge": self.judge if self.principles else None,
                "reward_model": self.reward_model, "rm_threshold": self.threshold}

    @property
    def principle_scorer(self) -> PrincipleScorer:
        if self._principle_scorer is None:
            self._principle_scorer = PrincipleScorer.load(self.principles, self.judge)
        return self._principle_scorer

    @property
    def rm_scorer(self) -> RewardModelScorer:
        if self._rm_scorer is None:
            from eval.scorers.reward_model import RewardModelScorer  # torch and transformers: only when asked

            self._rm_scorer = RewardModelScorer(self.reward_model)
        return self._rm_scorer

    def measure(self, tasks: list[str], texts: list[str]) -> list[Measured]:
        out = [Measured() for _ in texts]
        if self.principles:
            values = self.principle_scorer.score(tasks, texts, timeout=PRINCIPLE_TIMEOUT)
            for m, text, v in zip(out, texts, values):
                reason = EMPTY if not text.strip() else "principle judge failed"
                m.set("principle_p", v if text.strip() else None, reason)
                m.set("principle_good", None if m.values["principle_p"] is None else float(v >= 0.5), reason)
        if self.reward_model:
            prompts = [self.prompts.writer_messages(t) for t in tasks]
            values = self.rm_scorer.score(prompts, texts)
            for m, v in zip(out, values):
                reason = "longer than the reward model's context or failed"
                m.set("rm_score", v, reason)
                m.set("rm_good", None if v is None else float(v >= self.threshold), reason)
        return out


def agreement(rows: list[dict]) -> dict:
    """Excellence rates of both signals and how often they agree, over the stories that have both."""
    both = [r for r in rows if r.get("principle_good") is not None and r.get("rm_good") is not None]
    rate = lambda key: (sum(r[key] for r in rows if r.get(key) is not None)  # noqa: E731
                        / max(1, sum(r.get(key) is not None for r in rows)))
    return {"principle_excellence": rate("principle_good") if any(r.get("principle_good") is not None for r in rows)
            else None,
            "rm_excellence": rate("rm_good") if any(r.get("rm_good") is not None for r in rows) else None,
            "agreement": sum(r["principle_good"] == r["rm_good"] for r in both) / len(both) if both else None,
            "n_both": len(both)}
