"""Multi-agent curation of preference data (arXiv 2508.21476, section 3.1), for the reward model.

Five agents per candidate response: Retrieval (`retrieval.py`: the k trusted passages nearest to
the writing task), Positive and Negative (numbered lists of strengths and weaknesses), Judge
(weighs both lists: good 1 / bad 0) and Reflect (checks the judge's decision, may overturn it),
written as a generator of phases (`agents.py`) and driven phase-batched and journaled (`run.py`).
Good and bad responses to the same prompt become trl preference pairs (`data.py`), on which
`train/reward_model.py` trains a Bradley-Terry reward model. CLI: `python -m rewards.curate`.
"""

from rewards.curation.agents import ABLATABLE, Settings, curate
from rewards.curation.data import build_pairs, load_candidates
from rewards.curation.prompts import load_curation_prompts
from rewards.curation.run import CurateConfig, Curator

__all__ = ["ABLATABLE", "CurateConfig", "Curator", "Settings", "build_pairs", "curate", "load_candidates",
           "load_curation_prompts"]
