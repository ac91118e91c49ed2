"""Compare evaluated runs with a baseline: paired gains, significance, inference cost, verdict.

Each run is a run directory holding `stories.jsonl` (generation, with token usage) and
`eval/scores.jsonl` (one line per story, metric values or null). The baseline is the run named
`base`, else the first one. Gains are paired by prompt (by the prompt text's hash, not its id):
each run's stories are averaged per prompt, and only prompts every run has are compared.

    review-lab compare --run base=runs/single --run review=runs/review --out runs/compare

The parts: `runs` (loading, provenance), `checks` (refusing runs that do not compare), `pairs`
(per-prompt values and costs), `gains` (the paired tests: `compare`), `verdict`, `report` and
`plots` (the files), `cli` (the command).
"""

from eval.compare.checks import MISMATCH_FIELDS, check_comparable
from eval.compare.gains import compare, default_metrics
from eval.compare.pairs import COST_FIELDS, cut_off_share, inference_cost, prompt_means, story_value
from eval.compare.runs import Run, load_run, parse_run_spec
from eval.compare.verdict import verdict

__all__ = ["COST_FIELDS", "MISMATCH_FIELDS", "Run", "check_comparable", "compare", "cut_off_share", "default_metrics",
           "inference_cost", "load_run", "parse_run_spec", "prompt_means", "story_value", "verdict"]
