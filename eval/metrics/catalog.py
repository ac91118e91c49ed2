"""Every metric's name, label, direction and display digits, in one place.

Tables (the evaluation summary, the benchmark, the sweep, the comparison) take their columns from a
`Catalog` instead of spelling metric names out, so a metric cannot be renamed in one table and
silently missing (n/a) in another. The judge's aspects are not listed here: they come from the
rubric file (`configs/judge/rubric.yaml`), and an evaluation records the catalog it was made with
in its `summary.json`, so later tables read the aspects that were actually scored.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass

JUDGE = "judge"
RULE = "rule"
JUDGE_AVERAGE = "judge_average"


@dataclass(frozen=True)
class MetricSpec:
    """How a metric is named, read and shown.

    Attributes:
        key: the field name in `scores.jsonl`.
        label: the column header (the paper's Table 1 names where it has them).
        group: `judge` (a rubric aspect or their average) or `rule` (rule-based).
        higher_is_better: the direction a gain is good in.
        digits: decimals shown in tables.
        per_prompt: one value per prompt group (the same on each of its stories), so summaries
            count each prompt once.
    """

    key: str
    label: str
    group: str = RULE
    higher_is_better: bool = True
    digits: int = 3
    per_prompt: bool = False


RULE_METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("surprisal", "Surprisal"),
    MetricSpec("kl", "KL Div."),
    MetricSpec("novelty_cos", "1-Cos Sim."),
    MetricSpec("volume_gain", "Volume Gain"),
    # Ours: mean pairwise cosine among one prompt's final stories; lower is more diverse.
    MetricSpec("homogenization", "Homogenization", higher_is_better=False, per_prompt=True),
)
# Scored on every story but not a headline column: how far revision moved a draft.
EXTRA_METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("draft_to_final_similarity", "Draft→final sim.", higher_is_better=False),
)


@dataclass(frozen=True)
class Catalog:
    """The ordered metrics of an evaluation: judge aspects (from its rubric), then rule metrics."""

    metrics: tuple[MetricSpec, ...]

    @classmethod
    def from_aspects(cls, aspects: Mapping[str, str]) -> Catalog:
        """A catalog for rubric aspects given as {key: label}."""
        judge = tuple(MetricSpec(key, label, JUDGE, digits=2) for key, label in aspects.items())
        return cls(judge + RULE_METRICS)

    def extended(self, specs: Iterable[MetricSpec]) -> Catalog:
        """This catalog with more metrics after its own (e.g. the reward signals' verdicts)."""
        return Catalog(self.metrics + tuple(specs))

    @classmethod
    def from_json(cls, rows: Iterable[Mapping]) -> Catalog:
        """The catalog as `to_json` wrote it (e.g. from an evaluation's summary.json)."""
        return cls(tuple(MetricSpec(**row) for row in rows))

    def to_json(self) -> list[dict]:
        return [asdict(m) for m in self.metrics]

    @property
    def aspects(self) -> list[str]:
        return [m.key for m in self.metrics if m.group == JUDGE]

    @property
    def keys(self) -> list[str]:
        return [m.key for m in self.metrics]

    def with_judge_average(self) -> list[MetricSpec]:
        """The judge average first (when there are aspects), then every metric."""
        head = [MetricSpec(JUDGE_AVERAGE, "Judge average", JUDGE, digits=2)] if self.aspects else []
        return head + list(self.metrics)

    def spec(self, key: str) -> MetricSpec:
        """The spec of `key`, including the judge average and the extra metrics; unknown keys get a
        plain spec (a field a user asked to compare that no table names)."""
        for m in [*self.with_judge_average(), *EXTRA_METRICS]:
            if m.key == key:
                return m
        return MetricSpec(key, key)


def rule_spec(key: str) -> MetricSpec:
    """The spec of a rule-based metric (no rubric needed)."""
    return next(m for m in (*RULE_METRICS, *EXTRA_METRICS) if m.key == key)
