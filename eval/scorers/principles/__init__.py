"""The principle judge (arXiv 2508.21476, section 3.2): a response judged good or bad against a
short list of principles.

- `detector.py`: the Detector's requests and the reading of its verdicts (P(good) or 0/1).
- `scorer.py`: `PrincipleScorer`, a Detector with its loaded model, scoring batches of texts:
  the evaluation's `principle_p` signal and the `principle_judge` reward.
- `texts.py`: the data it reads (the principles file, the role prompts) and the fence.

The principles themselves come out of an adversarial optimisation that stays with the reward it
produces (`rewards.principles`) and builds its Detectors here.
"""

from eval.scorers.principles.detector import THRESHOLD, Detector, default_orders
from eval.scorers.principles.scorer import PrincipleScorer
from eval.scorers.principles.texts import State, Templates, load_state, load_templates

__all__ = ["THRESHOLD", "Detector", "PrincipleScorer", "State", "Templates", "default_orders", "load_state",
           "load_templates"]
