"""Evaluation of generated stories: judge-free metrics against a reference corpus and judge-human alignment."""
