"""The curation verdict (arXiv 2508.21476, section 3.1): five agents judge a story good or bad.

Retrieval (`retrieval.py`: the k trusted passages nearest to the writing task), Positive and
Negative (numbered lists of strengths and weaknesses), Judge (weighs both lists: good 1 / bad 0)
and Reflect (checks the judge's decision, may overturn it), written as a generator of phases
(`agents.py`) with their templates (`prompts.py`) and driven phase-batched by the scorer
(`scorer.py`: `CurationScorer.verdicts(prompts, texts)`). The curation pipeline that turns
verdicts into preference pairs for the reward model stays with that reward (`rewards.curation`).
"""

from eval.scorers.curation.agents import ABLATABLE, VERDICT_MODES, Settings, curate
from eval.scorers.curation.prompts import CurationPrompts, load_curation_prompts
from eval.scorers.curation.retrieval import RetrievalIndex
from eval.scorers.curation.scorer import CurationScorer, drive_curation, render_examples, response_key

__all__ = ["ABLATABLE", "VERDICT_MODES", "CurationPrompts", "CurationScorer", "RetrievalIndex", "Settings", "curate",
           "drive_curation", "load_curation_prompts", "render_examples", "response_key"]
