"""The reward-model scorer: a trained Bradley-Terry reward model's scalar score of each text.

The model is what `train/reward_model.py` saves (`<output_dir>/merged`: a sequence-classification
checkpoint with one output, the LoRA merged in). A (prompt, completion) pair is scored exactly as
trl's `RewardTrainer` scored the pairs it trained on: the chat template applied to the writer's
request plus the completion as the assistant turn (plain text: prompt + completion + EOS),
right-padded, the score read at the last non-pad token, in batches of `batch_size`; every completion
is sanitised first (control characters, lone surrogates), whoever calls. The raw score
is a logit: its scale is arbitrary. A sequence longer than `max_length` tokens (default: the
model's context) gets None, a failed value, never a truncated score.

One scorer serves the trainer that measures the model (`train/reward_model.py`), the evaluation's
`rm_score` signal (`eval.signals`) and the `reward_model` GRPO reward (`rewards.reward_model`).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import torch

from eval.text import sanitize
from generate.common.errors import UsageError

MERGED_DIR = "merged"
DTYPES = ("float32", "bfloat16", "float16")  # what a reward model may be loaded in


def check_device(device: str) -> None:
    """`auto` (CUDA when available) or a device torch can name (`cpu`, `cuda`, `cuda:1`, ...)."""
    if device == "auto":
        return
    try:
        torch.device(device)
    except (RuntimeError, ValueError):
        raise UsageError(f"device {device!r} is not auto or a torch device (cpu, cuda, cuda:N)") from None


def resolve_rm_dir(model_dir: str | Path) -> Path:
    """The checkpoint inside a reward-model run: `<dir>/merged` when present, else `dir` itself."""
    path = Path(model_dir)
    if (path / MERGED_DIR / "config.json").is_file():
        return path / MERGED_DIR
    if (path / "config.json").is_file():
        return path
    raise UsageError(f"no reward model in {model_dir} (expected config.json there or in {MERGED_DIR}/); "
                     "train one with train/reward_model.py")


class RewardModelScorer:
    """A reward model on one device, scoring (prompt, completion) pairs in right-padded batches."""

    def __init__(self, model_dir: str | Path, device: str = "auto", dtype: str = "float32"):
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.path = resolve_rm_dir(model_dir)
        self.device = ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device
        self.tokenizer = AutoTokenizer.from_pretrained(self.path)
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.model = AutoModelForSequenceClassification.from_pretrained(self.path, dtype=getattr(torch, dtype))
        self.model.config.pad_token_id = self.tokenizer.pad_token_id
        self.model.to(self.device).eval()
        self.context_length = getattr(self.model.config, "max_position_embeddings", None)
        self._lock = threading.Lock()

    def encode(self, prompt: Any, completion: str) -> list[int]:
        """Token ids as trl's RewardTrainer builds them for a pair's `prompt + chosen`."""
        if isinstance(prompt, str):
            text = prompt + completion
            if not text.endswith(self.tokenizer.eos_token):
                text += self.tokenizer.eos_token
            return self.tokenizer(text=text)["input_ids"]
        messages = list(prompt) + [{"role": "assistant", "content": completion}]
        return list(self.tokenizer.apply_chat_template(messages, tokenize=True, return_dict=True)["input_ids"])

    @torch.inference_mode()
    def score(self, prompts: list[Any], completions: list[str], batch_size: int = 16,
              max_length: int | None = None) -> list[float | None]:
        """One scalar per (prompt, completion); None for a sequence longer than `max_length`.

        Each completion is sanitised here (`eval.text.sanitize`, idempotent), not by the callers:
        the evaluation sanitised its stories and the GRPO reward did not, so one reply could get two
        scores; with one path in, the reward and the evaluation's `rm_score` are the same number."""
        limit = max_length or self.context_length
        completions = [sanitize(c)[0] for c in completions]
        ids = [self.encode(p, c) for p, c in zip(prompts, completions, strict=True)]
        out: list[float | None] = [None] * len(ids)
        order = sorted((i for i in range(len(ids)) if limit is None or len(ids[i]) <= limit), key=lambda i: len(ids[i]))
        pad = self.tokenizer.pad_token_id
        for start in range(0, len(order), max(1, batch_size)):
            idx = order[start:start + batch_size]
            width = max(len(ids[i]) for i in idx)
            batch = torch.full((len(idx), width), pad, dtype=torch.long)
            mask = torch.zeros((len(idx), width), dtype=torch.long)
            for row, i in enumerate(idx):  # right padding, as trl's preference collator
                batch[row, :len(ids[i])] = torch.tensor(ids[i])
                mask[row, :len(ids[i])] = 1
            with self._lock:
                logits = self.model(input_ids=batch.to(self.device), attention_mask=mask.to(self.device)).logits
            for row, i in enumerate(idx):
                out[i] = float(logits[row, 0])
        return out
