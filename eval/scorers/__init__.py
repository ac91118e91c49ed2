"""Scorers that judge a story with a trained or prompted model, beyond the rubric judge
(`eval.judge`) and the metrics (`eval.metrics`): the second paper's three signals (arXiv 2508.21476).

- `principles`: the principle judge, a story's P(good) under a set of principles (`PrincipleScorer`).
- `reward_model`: a trained Bradley-Terry reward model's score of a story (`RewardModelScorer`).
- `curation`: the curation agents' good/bad verdict on a story (`CurationScorer`).

They live with the evaluation, which reports them as metrics (`eval.signals`); the GRPO rewards
(`rewards.principle_judge`, `rewards.reward_model`) wrap them, and the pipelines that produce what
they load (the principle optimisation, the curated preferences) stay in `rewards/` and call them.
Import a scorer from its module: loading one pulls in its model stack.
"""
