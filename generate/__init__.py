"""Story generation: LLM Review and its baselines on one batched model layer."""
