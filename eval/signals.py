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
- `curation_good` (opt-in, `review-lab eval --curation-verdict`): the paper's Signal-1, the
  curation framework's own verdict (`eval.scorers.curation`: strengths, weaknesses, judge and
  reflect, with retrieval from the reference corpus), on which no writer here is trained, so it
  grades every writer from outside. It costs several model calls a story;

and the agreement rate of the two signals is the share of stories both give the same verdict.

The principles are judged in the mode and with the label orders the optimisation measured them
with (`principles.yaml` records them under `detector`; a file without that record, such as the
starting set, uses logprob mode with both orders). `fingerprint()` names each signal by content:
the reward model's weights hash and threshold, the principles' hash, mode and orders, and (so a
table can say whether a signal proved itself) its held-out measurement. The evaluation records it
in its manifest's provenance, refuses to resume with other signals, and `review-lab compare`
refuses signal metrics made by different ones.

An empty story gets P(good) 0 and is not excellent, the principle reward's value for it
(`rewards.principle_judge`): one number for one text, in training and in evaluation. The
curation verdict calls it bad (0) without asking the agents: there is nothing to weigh.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from eval.metrics.catalog import MetricSpec
from eval.metrics.story import Measured
from eval.scorers.fingerprint import content_hash
from eval.scorers.principles.detector import default_orders
from eval.scorers.principles.scorer import PrincipleScorer
from generate.common.config import load_yaml
from generate.common.errors import UsageError
from generate.prompts import PromptSet

if TYPE_CHECKING:
    from eval.embed import Embedder
    from eval.scorers.curation.scorer import CurationScorer
    from eval.scorers.reward_model import RewardModelScorer
    from generate.backends import Model

SIGNAL = "signal"
PRINCIPLE_TIMEOUT = 3600.0  # seconds for the principle judge's one batched call over every story
PRINCIPLE_METRICS = (MetricSpec("principle_good", "Excellent (principles)", SIGNAL),
                     MetricSpec("principle_p", "P(good), principles", SIGNAL))
RM_METRICS = (MetricSpec("rm_good", "Excellent (RM)", SIGNAL), MetricSpec("rm_score", "RM score", SIGNAL))
CURATION_METRICS = (MetricSpec("curation_good", "Excellent (curation)", SIGNAL),)


def curation_scorer(model: Model, embedder: Embedder, reference_dir: str | Path | None, *,
                    max_chunks: int | None, seed: int) -> CurationScorer:
    """Signal-1 on the evaluation's judge model, retrieving from the evaluation's own corpus sample
    (the same chunks and embeddings as its novelty metrics). Without a corpus the agents read no
    passages, and the scorer's fingerprint records `k` 0, so such verdicts never compare silently
    with retrieved ones."""
    from eval.scorers.curation import CurationScorer, RetrievalIndex

    index = (RetrievalIndex.build(embedder, reference_dir=reference_dir, max_chunks=max_chunks, seed=seed)
             if reference_dir else None)
    return CurationScorer(model, index=index, embedder=embedder)


def rm_metrics(model_dir: str | Path) -> dict:
    """The `metrics.json` that `train/reward_model.py` saved with the model (threshold, held-out
    accuracy): in the run directory, or beside `merged/` when given that directory itself. Any
    other directory (a `checkpoint-N` inside a run) has none of its own: the run's file measured
    the final model, not it, so {}."""
    from eval.scorers.reward_model import MERGED_DIR

    model_dir = Path(model_dir)
    path = model_dir / "metrics.json"
    if not path.is_file() and model_dir.name == MERGED_DIR:
        path = model_dir.parent / "metrics.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def rm_threshold(model_dir: str | Path) -> float:
    """The decision threshold `train/reward_model.py` saved with the model."""
    threshold = rm_metrics(model_dir).get("threshold")
    if threshold is None:
        raise UsageError(f"{model_dir}: no decision threshold (metrics.json of train/reward_model.py)")
    return float(threshold)


def rm_record(model_dir: str | Path) -> dict:
    """What names a reward model: its weights' hash, threshold and held-out measurement."""
    from eval.scorers.reward_model import resolve_rm_dir

    metrics = rm_metrics(model_dir)
    return {"weights_sha256": content_hash(resolve_rm_dir(model_dir)), "threshold": rm_threshold(model_dir),
            "heldout": metrics.get("heldout")}


def principles_record(path: str | Path) -> dict:
    """What names a principles file: its hash, and the detector mode, label orders and held-out
    measurement the optimisation recorded (none for an unoptimised file: logprob, both orders)."""
    data = load_yaml(Path(path))
    detector = data.get("detector") or {}
    mode = detector.get("verdict") or "logprob"
    return {"sha256": content_hash(path), "mode": mode, "orders": int(detector.get("orders") or default_orders(mode)),
            "heldout": data.get("heldout")}


class Signals:
    """Scores stories with the principle judge and/or the reward model (each optional), each
    loaded once, on first use.

    Args:
        prompts: the writer templates (the reward model sees each story as the answer to the
            single-agent writer request for its task, as GRPO's completions are).
        principles: a principles YAML, or None.
        judge: the principle judge's model spec.
        reward_model: a `train/reward_model.py` output directory, or None.
        curation: builds Signal-1's scorer (`curation_scorer`) when first needed, or None.
    """

    def __init__(self, prompts: PromptSet, *, principles: str | None, judge: str, reward_model: str | None,
                 curation: Callable[[], CurationScorer] | None = None):
        self.prompts, self.principles, self.judge, self.reward_model = prompts, principles, judge, reward_model
        self._curation_factory, self._curation = curation, None
        self.rm = rm_record(reward_model) if reward_model else None
        self.threshold = self.rm["threshold"] if self.rm else None
        self.principle = principles_record(principles) if principles else None
        self._principle_scorer: PrincipleScorer | None = None
        self._rm_scorer: RewardModelScorer | None = None

    @property
    def specs(self) -> tuple[MetricSpec, ...]:
        return ((PRINCIPLE_METRICS if self.principles else ()) + (RM_METRICS if self.reward_model else ())
                + (CURATION_METRICS if self._curation_factory else ()))

    def fingerprint(self) -> dict:
        """The signals by content (see the module docstring); paths are kept for the reader."""
        return {"principles": self.principles, "principle_judge": self.judge if self.principles else None,
                "principles_record": self.principle, "reward_model": self.reward_model, "rm_record": self.rm,
                "rm_threshold": self.threshold,
                "curation": self.curation.fingerprint() if self._curation_factory else None}

    @property
    def curation(self) -> CurationScorer:
        if self._curation is None:
            self._curation = self._curation_factory()
        return self._curation

    @property
    def principle_scorer(self) -> PrincipleScorer:
        if self._principle_scorer is None:
            self._principle_scorer = PrincipleScorer.load(self.principles, self.judge, self.principle["mode"],
                                                          self.principle["orders"])
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
            for m, v in zip(out, values):  # an empty story: the scorer's 0, as the reward gives it
                m.set("principle_p", v, "principle judge failed")
                m.set("principle_good", None if v is None else float(v >= 0.5), "principle judge failed")
        if self.reward_model:
            prompts = [self.prompts.writer_messages(t) for t in tasks]
            values = self.rm_scorer.score(prompts, texts)
            for m, v in zip(out, values):
                reason = "longer than the reward model's context or failed"
                m.set("rm_score", v, reason)
                m.set("rm_good", None if v is None else float(v >= self.threshold), reason)
        if self._curation_factory:
            self._curation_verdicts(tasks, texts, out)
        return out

    def _curation_verdicts(self, tasks: list[str], texts: list[str], out: list[Measured]) -> None:
        asked = [i for i, text in enumerate(texts) if text.strip()]
        for i in set(range(len(texts))) - set(asked):  # an empty story: bad, nothing to weigh
            out[i].set("curation_good", 0.0)
        verdicts = self.curation.verdicts([tasks[i] for i in asked], [texts[i] for i in asked]) if asked else []
        for i, v in zip(asked, verdicts):
            failed = v.get("status") == "failed"
            reason = f"curation verdict failed: {v.get('reason', 'unknown')}" if failed else ""
            out[i].set("curation_good", None if failed else float(v["final"]), reason)


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


SIGNAL_VALUES = ("principle_p", "rm_score", "curation_good")  # each signal's graded value per story
CONFOUNDS = ("words", "kl", "novelty_cos", "volume_gain")  # what a signal may be measuring instead


def confound_table(rows: list[dict]) -> dict[str, dict[str, dict]]:
    """Spearman's correlation of each signal with story length (`words`) and each novelty metric
    over the stories that have both values: a signal learnt from "like the classic corpus" may
    simply punish novelty, and one learnt from curated preferences may simply reward length.
    {signal: {confound: {"rho", "n"}}}; rho None with fewer than 3 stories or a constant column."""
    from scipy.stats import spearmanr

    out: dict[str, dict[str, dict]] = {}
    for signal in SIGNAL_VALUES:
        if not any(r.get(signal) is not None for r in rows):
            continue
        out[signal] = {}
        for confound in CONFOUNDS:
            both = [(r[signal], r[confound]) for r in rows if r.get(signal) is not None and r.get(confound) is not None]
            rho = None
            if len(both) >= 3 and len({a for a, _ in both}) > 1 and len({b for _, b in both}) > 1:
                rho = round(float(spearmanr([a for a, _ in both], [b for _, b in both]).statistic), 3)
            out[signal][confound] = {"rho": rho, "n": len(both)}
    return out


def render_confounds(table: dict[str, dict[str, dict]]) -> str:
    """The confound table as Markdown (rows: signals; columns: length and the novelty metrics)."""
    fmt = lambda c: "—" if c["rho"] is None else f"{c['rho']:+.2f} (n {c['n']})"  # noqa: E731
    lines = ["| signal | " + " | ".join(CONFOUNDS) + " |", "|---" * (len(CONFOUNDS) + 1) + "|"]
    lines += [f"| {signal} | " + " | ".join(fmt(row[c]) for c in CONFOUNDS) + " |" for signal, row in table.items()]
    return "\n".join(lines)
