"""`review-lab story` / `signals` started from any directory: its steps run their commands from the
repository root, so every path the story was given is made absolute once, when its config is built,
and every path on a step's command line is absolute. Commands are captured, never run."""

from __future__ import annotations

from pathlib import Path

import pytest

from generate.common.paths import REPO_ROOT
from train import signals
from train.story_config import SignalsConfig, StoryConfig


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    """A working directory outside the repository, holding a corpus and a candidate run."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("SCIFI_REFERENCE_DIR", raising=False)
    (tmp_path / "corpus").mkdir()
    (tmp_path / "runs" / "a").mkdir(parents=True)
    (tmp_path / "runs" / "a" / "stories.jsonl").write_text('{"prompt": "Comets", "text": "A comet hums."}\n')
    return tmp_path


def relative_paths(cmd: list[str]) -> list[str]:
    return [a for a in cmd if ("/" in a or a.endswith((".jsonl", ".yaml"))) and not Path(a).is_absolute()]


def option(cmd: list[str], flag: str) -> str:
    return cmd[cmd.index(flag) + 1]


@pytest.mark.parametrize("config", [StoryConfig, SignalsConfig])
def test_a_config_built_with_relative_paths_holds_absolute_ones(elsewhere, config):
    (elsewhere / "my_rm.yaml").write_text("{}\n")
    (elsewhere / "prompts.jsonl").write_text('{"id": "p", "aspect": "a", "prompt": "Write."}\n')
    cfg = config(out="out/story", reference_dir="corpus", candidates=["runs/a/stories.jsonl"], rm_config="my_rm.yaml",
                 eval_dataset="prompts.jsonl")
    assert (cfg.out, cfg.reference_dir, cfg.candidates, cfg.rm_config, cfg.eval_dataset) == (
        str(elsewhere / "out/story"), str(elsewhere / "corpus"), [str(elsewhere / "runs/a/stories.jsonl")],
        str(elsewhere / "my_rm.yaml"), str(elsewhere / "prompts.jsonl"))


def test_defaults_and_names_resolve_where_they_live(elsewhere, monkeypatch):
    cfg = StoryConfig()
    assert cfg.out == str(elsewhere / "runs/story") and cfg.reference_dir is None and cfg.candidates == []
    assert cfg.rm_config == str(REPO_ROOT / "configs/rm/smollm2_cpu.yaml")  # the repository's recipe
    assert cfg.eval_dataset == "heldout" and StoryConfig(eval_dataset="default").eval_dataset == "default"
    assert StoryConfig(reference_dir="").reference_dir is None  # empty: not given
    monkeypatch.setenv("SCIFI_REFERENCE_DIR", "corpus")  # read from here, not from the repository root
    assert StoryConfig().reference_dir == str(elsewhere / "corpus")
    assert StoryConfig(reference_dir="other").reference_dir == str(elsewhere / "other")  # the option wins


@pytest.fixture
def commands(monkeypatch):
    """`train.signals.run` replaced by a double that records each command and writes its output."""
    seen: dict[str, list[str]] = {}

    def fake_run(cmd, what):
        seen[what] = cmd
        if what == "weak labels":
            Path(option(cmd, "--out")).write_text('{"label": 1}\n')

    monkeypatch.setattr(signals, "run", fake_run)
    return seen


def test_every_path_on_a_step_command_line_is_absolute(elsewhere, commands):
    """Given what the story hands the steps (`Story.prepare_signals`), relative paths included."""
    cfg = StoryConfig(out="out", reference_dir="corpus", candidates=["runs/a/stories.jsonl"])
    out = Path(cfg.out)
    signals.curate(out / "curation", [Path(p) for p in cfg.candidates], cfg.reference_dir)
    signals.principles(out / "principles", cfg.reference_dir, 1, "smollm2-135m-instruct")
    (elsewhere / "prefs.jsonl").write_text("pair\n")
    signals.reward_model(Path("rm"), Path("prefs.jsonl"), "configs/rm/smollm2_cpu.yaml")
    assert set(commands) == {"curation", "weak labels", "principle optimisation", "reward model"}
    assert {what: relative_paths(cmd) for what, cmd in commands.items()} == dict.fromkeys(commands, [])
    curation, weak, opt, rm = (commands[k] for k in ("curation", "weak labels", "principle optimisation",
                                                     "reward model"))
    assert option(curation, "--candidates") == str(elsewhere / "runs/a/stories.jsonl")
    assert option(curation, "--out") == str(elsewhere / "out/curation")
    assert option(curation, "--reference-dir") == option(weak, "--reference-dir") == str(elsewhere / "corpus")
    assert option(weak, "--out") == option(opt, "--labelled") == str(elsewhere / "out/principles/weak/weak.jsonl")
    assert option(opt, "--out") == str(elsewhere / "out/principles/opt")
    assert option(rm, "--output_dir") == str(elsewhere / "rm") and option(rm, "--preferences") == str(
        elsewhere / "prefs.jsonl")
    assert option(rm, "--config") == str(REPO_ROOT / "configs/rm/smollm2_cpu.yaml")


def test_relative_paths_handed_to_a_step_directly_reach_its_command_absolute(elsewhere, commands):
    signals.curate(Path("curation"), [Path("runs/a/stories.jsonl")], "corpus")
    signals.principles(Path("principles"), "corpus", 1, "smollm2-135m-instruct")
    assert {what: relative_paths(cmd) for what, cmd in commands.items()} == dict.fromkeys(commands, [])
    assert option(commands["curation"], "--reference-dir") == str(elsewhere / "corpus")
    assert option(commands["weak labels"], "--reference-dir") == str(elsewhere / "corpus")
    assert option(commands["curation"], "--out") == str(elsewhere / "curation")
