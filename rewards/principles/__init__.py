"""The principle optimisation (arXiv 2508.21476, section 3.2 and appendix A.4): the principles the
`principle_judge` reward judges with, optimised adversarially with reflection, and the data to
optimise them on.

- `review-lab principles optimize`: Generator, Detector and Reflector play in iterations
  (`optimize.py`); the result is a principles file for the `principle_judge` reward.
- `review-lab principles weak-labels`: a weakly labelled set from the reference corpus,
  split by work (`weak_labels.py`).

Roles are protocols (`protocols.py`); the Detector itself (its requests, its verdicts and the data
it reads) is the evaluation's scorer (`eval.scorers.principles`), shared with the reward and the
evaluation's signal; `texts.py` reads what the Generator and Reflector write back.
"""

from rewards.principles.metrics import binary_metrics

__all__ = ["binary_metrics"]
