"""Fixtures for the GRPO tests: a tiny reference corpus, a deterministic fake encoder, a reward context."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.embedders import CountingEmbedder as FakeEmbedder

REPO = Path(__file__).resolve().parents[2]


def write_corpus(directory: Path) -> Path:
    """Three Gutenberg-style works (600, 300, 90 words): 4 chunks of ~250 words."""
    directory.mkdir(parents=True, exist_ok=True)
    bodies = {
        "rockets": " ".join(f"rocket{i % 7} flew past the moon" for i in range(120)),
        "robots": " ".join(f"the robot{i % 5} dreamed" for i in range(100)),
        "oceans": " ".join(f"waves on mars{i % 3}" for i in range(30)),
    }
    for name, body in bodies.items():
        title = name.upper()
        (directory / f"{name}.txt").write_text(
            f"*** START OF THE PROJECT GUTENBERG EBOOK {title} ***\n\n{body}\n\n"
            f"*** END OF THE PROJECT GUTENBERG EBOOK {title} ***\n", encoding="utf-8")
    return directory


@pytest.fixture
def fake_embedder() -> FakeEmbedder:
    """3 dimensions: fewer than the tiny corpus's 4 chunks, so its volume gain is defined."""
    return FakeEmbedder(name="fake", dim=3)


@pytest.fixture
def context(fake_embedder):
    """A reward context whose every encoder is the fake one (fresh caches for each test)."""
    from rewards import RewardContext

    return RewardContext(encoder=lambda name: fake_embedder)


@pytest.fixture
def tiny_reference(tmp_path, monkeypatch) -> Path:
    """A tiny corpus as SCIFI_REFERENCE_DIR, with its embedding cache under tmp_path."""
    directory = write_corpus(tmp_path / "corpus")
    monkeypatch.setenv("SCIFI_REFERENCE_DIR", str(directory))
    monkeypatch.setenv("SCIFI_CACHE_DIR", str(tmp_path / "cache"))
    return directory


def chat(text: str) -> list[dict[str, str]]:
    """A completion as trl passes it for conversational prompts."""
    return [{"role": "assistant", "content": text}]


def one_grpo_step(tmp_path: Path, funcs: list) -> dict:
    """One real GRPO step of the bundled writer on two prompts with these reward functions; the
    step's log entry (the trainer is real, only the step count and lengths are tiny)."""
    from trl import GRPOConfig

    from generate.datasets import load_dataset
    from train.data import prompt_dataset
    from train.model import resolve_model_path
    from train.trainer import GRPOTrainer

    args = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, max_steps=1, per_device_train_batch_size=2,
                      num_generations=2, max_completion_length=8, logging_steps=1, report_to="none",
                      save_strategy="no", gradient_checkpointing=False)
    trainer = GRPOTrainer(model=resolve_model_path("smollm2-135m-instruct"), reward_funcs=funcs, args=args,
                          train_dataset=prompt_dataset(load_dataset("default")[:2]))
    trainer.train()
    assert trainer.state.global_step == 1
    return trainer.state.log_history[0]
