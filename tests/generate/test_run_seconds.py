"""The seconds a run reports per prompt, and its per-phase costs in the manifest, are what its stories
took across interruptions: a resumed run replays its journaled calls in no time, and must still
count what they cost when made (and not count their tokens as engine work again)."""

import asyncio
import json

from generate.backends import Model
from generate.journal import Journal
from generate.runner import RunConfig, Runner
from tests.generate.fakes import RecordingEcho

DELAY = 0.05


class Slow(RecordingEcho):
    """Echo replies, each engine call taking DELAY seconds."""

    async def generate(self, requests):
        await asyncio.sleep(DELAY)
        return await super().generate(requests)


def stories(path) -> dict[str, float]:
    return {s["story_id"]: s["seconds"] for s in map(json.loads, path.read_text().splitlines())}


def test_a_resumed_run_counts_the_time_its_replayed_calls_took(tmp_path):
    backend = Slow()
    cfg = RunConfig(framework="review", model="echo", limit=2, rounds=2, out=str(tmp_path / "run"))
    path = Runner(cfg, model=Model(backend)).run()
    first, asked = stories(path), len(backend.requests)
    journal = Journal(tmp_path / "run" / "calls.jsonl")
    assert all(row["seconds"] > 0 for row in journal._done.values())
    assert min(first.values()) >= DELAY / 2  # at least one engine call, shared by the two prompts

    phases = json.loads((tmp_path / "run" / "manifest.json").read_text())["phases"]
    rows = list(journal._done.values())
    assert list(phases) == ["compose", "review-1", "revise-1"]
    assert sum(p["calls"] for p in phases.values()) == len(rows) and not any(p["replayed"] for p in phases.values())
    assert sum(p["prompt_tokens"] for p in phases.values()) == sum(r["prompt_tokens"] for r in rows)
    assert all(p["seconds"] >= DELAY for p in phases.values())

    path.write_text("")  # as if interrupted after every call was journaled, before the stories were written
    path = Runner(cfg, model=Model(backend)).run()
    again = stories(path)
    assert len(backend.requests) == asked  # nothing asked again: every call was replayed
    assert again.keys() == first.keys()
    assert all(again[k] >= DELAY / 2 for k in again)  # ~0.001 s if replays counted as free
    again_phases = json.loads((tmp_path / "run" / "manifest.json").read_text())["phases"]
    for name, cost in again_phases.items():  # the replayed calls are counted as such, their tokens once
        assert cost["replayed"] == phases[name]["calls"] and cost["calls"] == 2 * phases[name]["calls"]
        assert cost["prompt_tokens"] == phases[name]["prompt_tokens"] and cost["seconds"] >= phases[name]["seconds"]
