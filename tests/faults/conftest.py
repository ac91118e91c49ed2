"""Shared settings of the fault, kill and secret tests: one small Review run and one small
evaluation on the real llama.cpp server (deterministic for a fixed seed per request), defined
once so that faulted, killed and clean runs are the same runs."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO

PYTHON = sys.executable
HERE = Path(__file__).parent
RUBRIC = HERE / "rubric.yaml"
# Review, 2 agents x 2 rounds on 2 prompts: 6 calls per prompt (compose, review, revise), with
# short templates (the default ones make each call several times slower on a busy CPU).
REVIEW = {"framework": "review", "agents": 2, "rounds": 2, "limit": 2, "max_new_tokens": 12, "chunk_prompts": 1,
          "seed": 0, "templates": str(HERE / "prompts" / "frameworks.yaml"),
          "personas": str(HERE / "prompts" / "personas.yaml")}
# Eight one-story prompt groups, so an evaluation appends eight times (--chunk-stories 1).
STORIES = [
    "The comet sang to the miners of Europa, and the ice answered with a low hum.",
    "Mars robots dream of rain; the old engineer listens to them at night.",
    "In the year 3000 the last human uploaded her mind into the ocean's currents.",
    "The generation ship's gardener found a seed that remembered Earth.",
    "A time machine that only travels one second forward saved the colony twice.",
    "The translator AI refused to lie, so the first contact began with an apology.",
    "On Titan the methane rain keeps time for a clock no one remembers building.",
    "Ships.",
]


def flags(settings: dict) -> list[str]:
    """Command-line flags for a settings mapping (`chunk_prompts` -> `--chunk-prompts`)."""
    out = []
    for key, value in settings.items():
        out += [f"--{key.replace('_', '-')}", str(value)]
    return out


def write_stories(path: Path) -> Path:
    """A stories.jsonl in the shape generation writes, from the literal STORIES."""
    rows = [{"story_id": f"single/p{i}/writer", "prompt_id": f"p{i}", "aspect": "Test", "framework": "single",
             "agent": "writer", "model": "openai:smollm2", "prompt": f"Write story {i}.", "text": text, "drafts": []}
            for i, text in enumerate(STORIES)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_corpus(directory: Path) -> Path:
    """Two tiny Gutenberg-style works (a few ~250-word chunks)."""
    directory.mkdir(parents=True, exist_ok=True)
    bodies = {"rockets": " ".join(f"rocket{i % 7} flew past the moon" for i in range(120)),
              "robots": " ".join(f"the robot{i % 5} dreamed of rain" for i in range(100))}
    for name, body in bodies.items():
        (directory / f"{name}.txt").write_text(
            f"*** START OF THE PROJECT GUTENBERG EBOOK {name.upper()} ***\n\n{body}\n\n"
            f"*** END OF THE PROJECT GUTENBERG EBOOK {name.upper()} ***\n", encoding="utf-8")
    return directory


def eval_flags(stories: Path, corpus: Path) -> list[str]:
    """The evaluation every test here runs: logprob judge (tiny rubric), reference metrics."""
    return ["--stories", str(stories), "--judge", "openai:smollm2", "--judge-mode", "logprob", "--rubric", str(RUBRIC),
            "--no-surprisal", "--reference-dir", str(corpus), "--chunk-stories", "1", "--seed", "0"]


def cli_env(tmp: Path, **extra: str) -> dict[str, str]:
    """A subprocess environment: offline, one thread, a private cache, no inherited OpenAI key."""
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "OPENAI_BASE_URL")}
    env.update(OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1",
               SCIFI_CACHE_DIR=str(tmp / "cache"), PYTHONPATH=str(REPO), **extra)
    return env


@pytest.fixture(scope="session")
def fault_data(tmp_path_factory) -> dict[str, Path]:
    """The literal stories file and the tiny reference corpus, shared by the session."""
    root = tmp_path_factory.mktemp("fault-data")
    return {"stories": write_stories(root / "stories" / "stories.jsonl"), "corpus": write_corpus(root / "corpus"),
            "root": root}


# --- in-process runs on an OpenAI-compatible server, and the clean Review reference --------------

def openai_model(base_url: str, api_key: str, policy=None, timeout: float = 15.0, concurrency: int = 1):
    """The judge/writer `Model` of these tests: one request at a time, tiny backoff."""
    from generate.backends import Model, RetryPolicy
    from generate.backends.openai_backend import OpenAIBackend

    backend = OpenAIBackend("smollm2", base_url=base_url, api_key=api_key, concurrency=concurrency, timeout=timeout)
    return Model(backend, policy=policy or RetryPolicy(retries=6, backoff=0.05, max_backoff=0.2, budget=60.0))


def run_review(out: Path, model) -> Path:
    from generate.runner import RunConfig, Runner

    cfg = RunConfig(model="openai:smollm2", out=str(out), concurrency=1, **REVIEW)
    return Runner(cfg, model=model).run()


def run_eval(out: Path, data: dict[str, Path], model):
    from eval.run import EvalConfig, Evaluator

    cfg = EvalConfig(stories=[str(data["stories"])], out=str(out), judge="openai:smollm2", judge_mode="logprob",
                     rubric=str(RUBRIC), no_surprisal=True, reference_dir=str(data["corpus"]), chunk_stories=1, seed=0)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SCIFI_CACHE_DIR", str(data["root"] / "cache"))
        return Evaluator(cfg, models={"openai:smollm2": model}).run()


@pytest.fixture(scope="session")
def review_reference(llama_server, tmp_path_factory) -> Path:
    """The Review run without faults or kills: what every faulted or killed run must reproduce.
    Through a proxy without faults, which keeps llama.cpp deterministic (`tests.faults.proxy`)."""
    from tests.faults.proxy import FaultProxy

    out = tmp_path_factory.mktemp("review-reference")
    with FaultProxy(llama_server.base_url, upstream_key=llama_server.api_key) as proxy:
        started = time.monotonic()
        run_review(out, openai_model(proxy.base_url, "any"))
    logging.getLogger(__name__).warning("Review without faults: %.1fs", time.monotonic() - started)
    return out


@pytest.fixture(scope="session")
def stub():
    """The scripted OpenAI-compatible server (`tests.faults.stub`): context of 2,000 characters."""
    from tests.faults.stub import StubServer

    with StubServer(context_chars=2000) as server:
        yield server
