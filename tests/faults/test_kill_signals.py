"""Kill it anywhere, lose nothing, for the second paper's two pipelines: multi-agent curation and
the adversarial principle optimisation, on the bundled model, SIGKILLed at random moments and
restarted with the same command, end with complete outputs, no torn line, and every call that
finished before a kill replayed from the journal rather than made again.

(Batched decoding on the hf backend is reproducible per request seed only up to float noise
across batch compositions, so texts are not compared with an uninterrupted run here; that
equality is tested on llama.cpp in test_kill.py.)"""

from __future__ import annotations

import pytest

from tests.conftest import REPO, private_cache
from tests.curation.test_retrieval_and_pairs import story, write_jsonl
from tests.faults.conftest import PYTHON, cli_env
from tests.faults.kill import kill_and_resume, records
from tests.faults.test_kill import assert_replayed
from tests.principles.test_optimize import write_labelled

pytestmark = [pytest.mark.slow]


@pytest.fixture
def env(tmp_path):
    """A private cache that shares the converted bundled model (no reconversion per restart)."""
    private_cache(tmp_path / "cache")
    return cli_env(tmp_path)


def test_curation_killed_five_times(tmp_path, env):
    stories = write_jsonl(tmp_path / "stories.jsonl", [
        story("a/1", "A comet visits", "The comet's ice sang as the drill bit in; Mira heard her mother's voice."),
        story("a/2", "A comet visits", "comet comet comet comet comet"),
        story("b/1", "A robot gardener", "Rust bloomed on the orbital garden while the last drone learned to grieve.")])
    exemplars = write_jsonl(tmp_path / "exemplars.jsonl", [
        {"prompt": "A comet", "response": "Its tail combed the dark like silver hair over the sleeping colony."}])
    out = tmp_path / "out"
    # Two sequences per forward pass: the journal grows call by call, so each of the five kills has a
    # write to follow and a phase to land in, however fast the machine (a phase of 12 calls in one
    # batch was a single write: on a fast CPU the whole run finished before its fifth kill). The
    # time kills come early: on such a CPU the run takes a few seconds after loading.
    cmd = [PYTHON, "-m", "rewards.curate", "--candidates", str(stories), "--exemplars", str(exemplars), "--k", "1",
           "--list-tokens", "24", "--batch-size", "2", "--out", str(out)]
    run = kill_and_resume(cmd, watch=[out / "calls.jsonl", out / "judgments.jsonl"], kills=5, seed=4, time_kills=2,
                          early=(2.0, 6.0), env=env, cwd=REPO, journal=out / "calls.jsonl",
                          log_dir=tmp_path / "logs", timeout=900)
    assert run.final.returncode == 0, run.final.stderr[-3000:]
    assert run.kills == 5, run.summary()
    judged = records(out / "judgments.jsonl")
    assert len({j["key"] for j in judged}) == len(judged) == 3  # each response judged once
    assert all(j["final"] in (0, 1) for j in judged)
    journal = records(out / "calls.jsonl")
    assert len({r["key"] for r in journal}) == len(journal) == 30  # ten calls per response, each made once
    assert_replayed(run, journal)
    records(out / "preferences.jsonl")  # complete lines only


def test_principle_optimisation_killed_four_times(tmp_path, env):
    data = write_labelled(tmp_path / "data.jsonl", groups=4)
    out = tmp_path / "opt"
    cmd = [PYTHON, "-m", "rewards.principles", "optimize", "--labelled", str(data), "--iterations", "3",
           "--attacks", "1", "--max-new-tokens", "24", "--max-diagnoses", "1", "--out", str(out)]
    run = kill_and_resume(cmd, watch=[out / "calls.jsonl", out / "metrics.jsonl"], kills=4, seed=5, time_kills=1,
                          early=(3.0, 15.0), env=env, cwd=REPO, journal=out / "calls.jsonl",
                          log_dir=tmp_path / "logs", timeout=900)
    assert run.final.returncode == 0, run.final.stderr[-3000:]
    assert run.kills == 4, run.summary()
    metrics = records(out / "metrics.jsonl")
    assert [m["iteration"] for m in metrics] == [0, 1, 2, 3]  # each iteration once
    assert all((out / f"iteration-{i:02d}.yaml").is_file() for i in range(4)) and (out / "principles.yaml").is_file()
    journal = records(out / "calls.jsonl")
    assert len({r["key"] for r in journal}) == len(journal)
    assert_replayed(run, journal)
