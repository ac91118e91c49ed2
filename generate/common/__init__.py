"""Plumbing every package of the project shares: the error contract of the command lines,
YAML configs with overrides, append-only JSONL files, writes that survive a full disk, the
output-directory lock, secret redaction, run manifests and cache paths.

It lives under `generate/` because generation is the bottom layer that evaluation, rewards and
training build on; nothing here knows about models, frameworks or metrics.
"""
