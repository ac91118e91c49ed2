"""The steps of `review-lab story` / `review-lab signals` are keyed by their inputs (`train/steps.py`):
reused with the same inputs, redone (their directory cleared) with changed ones, never reused
because a file exists. The expensive commands are replaced by doubles that write what they would."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from train import signals
from train.steps import STEP_FILE, Step, content_hash


def test_a_step_is_reused_with_its_inputs_and_cleared_with_others(tmp_path):
    step = Step(tmp_path / "s", "demo", {"steps": 3})
    assert not step.done
    step.start()
    (step.out / "result.txt").write_text("3 steps")
    step.finish()
    assert Step(tmp_path / "s", "demo", {"steps": 3}).done
    changed = Step(tmp_path / "s", "demo", {"steps": 40})
    assert not changed.done
    changed.start()
    assert not (tmp_path / "s" / "result.txt").exists()  # the stale output is gone before the step is redone
    assert json.loads((tmp_path / "s" / STEP_FILE).read_text())["inputs"] == {"steps": 40}


def test_a_directory_without_a_step_record_is_never_reused(tmp_path):
    (tmp_path / "s" / "merged").mkdir(parents=True)
    (tmp_path / "s" / "merged" / "config.json").write_text("{}")  # made before fingerprints, or by hand
    step = Step(tmp_path / "s", "demo", {"a": 1})
    assert not step.done
    step.start()
    assert not (tmp_path / "s" / "merged").exists()


def test_content_hash_follows_contents_not_names_or_manifests(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "w.bin").write_bytes(b"1")
    before = content_hash(tmp_path / "m")
    (tmp_path / "m" / "manifest.json").write_text('{"seconds": 3}')
    assert content_hash(tmp_path / "m") == before
    (tmp_path / "m" / "w.bin").write_bytes(b"2")
    assert content_hash(tmp_path / "m") != before


def test_curation_and_optimisation_always_run_their_resumable_commands(tmp_path, monkeypatch):
    """With the same inputs they still run (they resume): a curation that ended with failed
    responses still has a preferences.jsonl, and handing it on would train on partial pairs."""
    calls = []

    def fake_run(cmd, what):
        calls.append(what)
        if what == "weak labels":
            Path(cmd[cmd.index("--out") + 1]).write_text('{"label": 1}\n')

    monkeypatch.setattr(signals, "run", fake_run)
    stories = tmp_path / "stories.jsonl"
    stories.write_text("{}\n")
    assert signals.curate(tmp_path / "curation", [stories], None) == tmp_path / "curation" / "preferences.jsonl"
    signals.curate(tmp_path / "curation", [stories], None)
    signals.principles(tmp_path / "principles", None, 2, "smollm2-135m-instruct")
    signals.principles(tmp_path / "principles", None, 2, "smollm2-135m-instruct")
    assert calls == ["curation", "curation", "weak labels", "principle optimisation", "principle optimisation"]


def test_new_candidates_or_iterations_redo_the_step_in_a_cleared_directory(tmp_path, monkeypatch):
    monkeypatch.setattr(signals, "run", lambda cmd, what: Path(cmd[cmd.index("--out") + 1]).mkdir(exist_ok=True)
                        or (Path(cmd[cmd.index("--out") + 1]) / "out.txt").write_text(what))
    stories = tmp_path / "stories.jsonl"
    stories.write_text('{"a": 1}\n')
    signals.curate(tmp_path / "curation", [stories], None)
    stories.write_text('{"a": 2}\n')  # other candidates: the old pairs must not survive
    (tmp_path / "curation" / "preferences.jsonl").write_text("stale\n")
    signals.curate(tmp_path / "curation", [stories], None)
    assert not (tmp_path / "curation" / "preferences.jsonl").exists()


def test_the_reward_model_is_retrained_when_its_pairs_change(tmp_path, monkeypatch):
    trained = []

    def fake_run(cmd, what):
        out = Path(cmd[cmd.index("--output_dir") + 1])
        trained.append(Path(cmd[cmd.index("--preferences") + 1]).read_text())
        (out / "metrics.json").write_text("{}")

    monkeypatch.setattr(signals, "run", fake_run)
    prefs = tmp_path / "preferences.jsonl"
    prefs.write_text("pair 1\n")
    for _ in range(2):
        signals.reward_model(tmp_path / "rm", prefs, "configs/rm/smollm2_cpu.yaml")
    prefs.write_text("pair 1\npair 2\n")  # metrics.json exists, but was made from other pairs
    signals.reward_model(tmp_path / "rm", prefs, "configs/rm/smollm2_cpu.yaml")
    assert trained == ["pair 1\n", "pair 1\npair 2\n"]


@pytest.fixture
def fake_grpo(monkeypatch):
    """GRPO replaced by a double that writes a 'merged model' recording its step count."""
    import train.story as story

    runs = []

    def fake_run(cmd, what):
        out = Path(cmd[cmd.index("--output_dir") + 1])
        steps = int(cmd[cmd.index("--max_steps") + 1]) if "--max_steps" in cmd else 40
        (out / "merged").mkdir(parents=True, exist_ok=True)
        assert not (out / "merged" / "model.bin").exists(), "a retrained writer must start from a cleared directory"
        (out / "merged" / "config.json").write_text("{}")
        (out / "merged" / "model.bin").write_text(f"trained {steps} steps")
        runs.append(steps)

    monkeypatch.setattr(story.signal_steps, "run", fake_run)
    return runs


def test_max_steps_3_then_40_into_the_same_out_retrains_the_writer(tmp_path, fake_grpo):
    """The issue's reproduction: a 3-step writer must never be reported for a 40-step story."""
    import train.story as story

    out = tmp_path / "grpo"
    merged = story.train(story.StoryConfig(max_steps=3), "composite", out, None)
    story.train(story.StoryConfig(max_steps=3), "composite", out, None)  # the same inputs: reused
    assert fake_grpo == [3]
    story.train(story.StoryConfig(max_steps=40), "composite", out, None)
    assert fake_grpo == [3, 40] and (merged / "model.bin").read_text() == "trained 40 steps"


def test_a_retrained_signal_retrains_its_writer_and_regenerates_its_stories(tmp_path, fake_grpo, monkeypatch):
    import train.story as story

    out = tmp_path / "grpo_rm"
    story.train(story.StoryConfig(), "rm", out, {"reward_model": {}}, {"signal": "rm-hash-1"})
    story.train(story.StoryConfig(), "rm", out, {"reward_model": {}}, {"signal": "rm-hash-2"})
    assert fake_grpo == [40, 40]

    generated = []
    monkeypatch.setattr(story.RunConfig, "load_model", lambda self: None)
    monkeypatch.setattr(story, "run_collecting", lambda runner, failed: generated.append(runner.cfg.out) or
                        (Path(runner.cfg.out) / "stories.jsonl").write_text("story\n"))
    flow = story.Story(story.StoryConfig(out=str(tmp_path / "story")))
    flow.prompts_file.parent.mkdir(parents=True)
    flow.prompts_file.write_text('{"id": "p", "aspect": "a", "prompt": "Write."}\n')
    writer = f"hf:{out / 'merged'}"
    flow.generate("tuned", writer)
    (tmp_path / "story" / "tuned" / "eval").mkdir()  # its evaluation lives inside the run
    flow.generate("tuned", writer)  # same weights: generation resumes, the evaluation stays
    assert (tmp_path / "story" / "tuned" / "eval").is_dir()
    (out / "merged" / "model.bin").write_text("retrained")
    flow.generate("tuned", writer)
    assert not (tmp_path / "story" / "tuned" / "eval").exists() and len(generated) == 3
    assert re.fullmatch(r"[0-9a-f]{64}", json.loads((tmp_path / "story/tuned" / STEP_FILE).read_text())
                        ["inputs"]["weights"])


@pytest.fixture
def grpo_commands(monkeypatch):
    """GRPO replaced by a double that records its command and writes a 'merged model'."""
    import train.story as story

    commands = []

    def fake_run(cmd, what):
        out = Path(cmd[cmd.index("--output_dir") + 1])
        (out / "merged").mkdir(parents=True, exist_ok=True)
        (out / "merged" / "config.json").write_text("{}")
        commands.append(cmd)

    monkeypatch.setattr(story.signal_steps, "run", fake_run)
    return commands


def option(cmd: list[str], flag: str):
    return cmd[cmd.index(flag) + 1] if flag in cmd else None


def test_grpo_gets_the_evaluations_reference_options_and_seed(tmp_path, grpo_commands, monkeypatch):
    """The writer trains against the corpus sample it is scored on: the story's --reference-dir
    (absolute: GRPO runs from the repository root), --reference-max-chunks and --seed reach the
    composite recipe's novelty reward, the principle judge's seed and GRPO's own seed."""
    import train.story as story

    monkeypatch.chdir(tmp_path)
    cfg = story.StoryConfig(reference_dir="corpus", reference_max_chunks=500, seed=3)
    story.train(cfg, "composite", tmp_path / "grpo", None)
    story.train(cfg, "principle", tmp_path / "grpo_principle", {"principle_judge": {"principles": "p.yaml"}})
    composite, principle = (json.loads(option(cmd, "--reward_options")) for cmd in grpo_commands)
    assert composite["novelty_cos"] == {"reference_dir": str(tmp_path / "corpus"), "max_chunks": 500, "seed": 3}
    assert composite["judge"]["model"] == "smollm2-135m-instruct"  # the recipe's other options are kept
    assert principle == {"principle_judge": {"principles": "p.yaml", "seed": 3}}
    assert [option(cmd, "--seed") for cmd in grpo_commands] == ["3", "3"]


def test_the_grpo_step_key_holds_what_the_run_is_given_and_nothing_else(tmp_path, grpo_commands):
    """Another --reference-dir retrains the writer; --allow-weak-signal, never passed to the
    composite run, does not."""
    import train.story as story

    out = tmp_path / "grpo"
    story.train(story.StoryConfig(), "composite", out, None)
    story.train(story.StoryConfig(allow_weak_signal=True), "composite", out, None)
    assert len(grpo_commands) == 1 and "--allow_weak_signal" not in grpo_commands[0]
    story.train(story.StoryConfig(reference_dir=str(tmp_path / "other")), "composite", out, None)
    assert len(grpo_commands) == 2
    story.train(story.StoryConfig(reference_dir=str(tmp_path / "other"), seed=1), "composite", out, None)
    assert len(grpo_commands) == 3
    inputs = json.loads((out / STEP_FILE).read_text())["inputs"]
    assert inputs["seed"] == 1 and inputs["options"]["novelty_cos"]["reference_dir"] == str(tmp_path / "other")
    story.train(story.StoryConfig(allow_weak_signal=True), "rm", tmp_path / "grpo_rm", {"reward_model": {}})
    assert option(grpo_commands[-1], "--allow_weak_signal") == "true"
