"""Curated preference data (arXiv 2508.21476, section 3.1), for the reward model.

The five curation agents and their verdict are the evaluation's scorer (`eval.scorers.curation`);
this package runs them over candidate stories, phase-batched, journaled and resumable (`run.py`),
and turns the verdicts into trl preference pairs: good and bad responses to the same prompt
(`data.py`), on which `train/reward_model.py` trains a Bradley-Terry reward model. CLI:
`review-lab curate`.
"""

from rewards.curation.data import build_pairs, load_candidates
from rewards.curation.run import CurateConfig, Curator

__all__ = ["CurateConfig", "Curator", "build_pairs", "load_candidates"]
