"""GRPO fine-tuning of the writer on creativity rewards (`train/grpo.py`)."""
