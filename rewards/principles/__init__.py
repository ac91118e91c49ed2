"""A principle-guided binary judge, optimised adversarially with reflection (arXiv 2508.21476,
section 3.2 and appendix A.4), and the data to optimise it on.

- `python -m rewards.principles optimize`: Generator, Detector and Reflector play in iterations
  (`optimize.py`); the result is a principles file for the `principle_judge` reward.
- `python -m rewards.principles weak-labels`: a weakly labelled set from the reference corpus,
  split by work (`weak_labels.py`).

Roles are protocols (`protocols.py`), the Detector's requests and verdicts live in one place
(`detector.py`) shared with the reward, and every text a model reads is data (`texts.py`).
"""

from rewards.principles.detector import Detector
from rewards.principles.metrics import binary_metrics
from rewards.principles.texts import State, load_state, load_templates

__all__ = ["Detector", "State", "binary_metrics", "load_state", "load_templates"]
