"""A number outside an option's range is one error line, not a run that quietly does something
else (`--limit 0` ran every prompt, `--limit -3` all but the last three); and every numeric option
of every command declares its range, so a new one cannot be added without it. Likewise a model
spec, a dataset or a value from a fixed set is checked when the options are read: a misspelt
`--judge-mode` once stopped a benchmark only after it had generated its first framework."""

from __future__ import annotations

import dataclasses
import importlib
import re
import types
import typing
from pathlib import Path

import pytest

from generate.common.errors import UsageError
from generate.common.ranges import (AT_LEAST_1, FRACTION, HELD_OUT, NON_NEGATIVE, POSITIVE, TOP_P, OneOf, Range,
                                    check_of, range_of)
from train import cli

REPO = Path(__file__).resolve().parents[1]
# Every dataclass a command's options are parsed into: `parse_config` / `build_config`, the
# principles' subcommands (built from a variable) and trl's parser in the training scripts.
CONFIGS = {
    "generate.runner": ["RunConfig"], "eval.run": ["EvalConfig"], "eval.benchmark.run": ["BenchmarkConfig"],
    "eval.compare.cli": ["CompareConfig"], "eval.sweep": ["SweepConfig"], "eval.device_check": ["DeviceCheckConfig"],
    "train.heldout": ["HeldoutConfig"], "train.story": ["StoryConfig", "SignalsConfig"],
    "rewards.curation.run": ["CurateConfig"], "rewards.principles.weak_labels": ["WeakLabelConfig"],
    "rewards.principles.optimize": ["OptimizeConfig"], "train.args": ["ScriptArguments"],
    "train.reward_model": ["RMScriptArguments"],
}
UNBOUNDED = {"seed", "split_seed"}  # any integer seeds a generator


def numeric_fields(cls: type) -> list[dataclasses.Field]:
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        kind = hints[f.name]
        if typing.get_origin(kind) in (typing.Union, types.UnionType):
            kind = next(a for a in typing.get_args(kind) if a is not type(None))
        if kind in (int, float):
            out.append(f)
    return out


def test_ranges_admit_what_they_say():
    assert AT_LEAST_1.admits(1) and not AT_LEAST_1.admits(0) and str(AT_LEAST_1) == ">= 1"
    assert NON_NEGATIVE.admits(0) and not NON_NEGATIVE.admits(-0.1)
    assert POSITIVE.admits(1e-9) and not POSITIVE.admits(0) and str(POSITIVE) == "> 0"
    assert TOP_P.admits(1) and not TOP_P.admits(0) and not TOP_P.admits(1.01) and str(TOP_P) == "in (0, 1]"
    assert FRACTION.admits(0.5) and not FRACTION.admits(0) and not FRACTION.admits(1) and str(FRACTION) == "in (0, 1)"
    assert HELD_OUT.admits(0) and not HELD_OUT.admits(1) and str(HELD_OUT) == "in [0, 1)"
    assert str(Range(high=3, open_high=True)) == "< 3" and not Range(high=3, open_high=True).admits(3)


def test_every_numeric_option_of_every_command_declares_its_range():
    called = set()
    for path in [*REPO.glob("*/**/*.py")]:
        if path.parts[len(REPO.parts)] in {"generate", "eval", "train", "rewards"}:
            called |= set(re.findall(r"(?:parse|build)_config\((\w+Config)\b", path.read_text()))
    listed = {name for names in CONFIGS.values() for name in names}
    assert called <= listed, f"config classes missing from CONFIGS: {called - listed}"
    missing = []
    for module, names in CONFIGS.items():
        for name in names:
            cls = getattr(importlib.import_module(module), name)
            missing += [f"{name}.{f.name}" for f in numeric_fields(cls)
                        if f.name not in UNBOUNDED and range_of(cls, f) is None]
    assert not missing, f"numeric options without a declared range: {missing}"


# Options whose value names a model, a dataset or one of a fixed set, by field name: each must
# declare its check. (`signals` is checked by its config's own __post_init__, an empty list too.)
CHECKED = {"model", "judge", "scorer", "framework", "frameworks", "judge_mode", "verdict", "review_variant",
           "reward_gate", "dataset", "eval_dataset", "without"}
UNCHECKED = {("ScriptArguments", "dataset")}  # trl's parser reads recipes whose data a test may not have


def test_every_option_naming_a_model_dataset_or_choice_declares_its_check():
    missing = []
    for module, names in CONFIGS.items():
        for name in names:
            cls = getattr(importlib.import_module(module), name)
            missing += [f"{name}.{f.name}" for f in dataclasses.fields(cls)
                        if f.name in CHECKED and (name, f.name) not in UNCHECKED and check_of(cls, f) is None]
    assert not missing, f"options without a declared check: {missing}"


def test_one_of_reads_a_registry_when_it_checks():
    registry = {"a": 1}
    check = OneOf(registry)
    registry["b"] = 2  # registered after the field was declared
    check("b")
    check(["a", "b"])
    with pytest.raises(UsageError, match="'c', 'd' is not one of: a, b"):
        check(["a", "c", "d"])


def test_no_command_reads_a_bare_number_with_argparse():
    """Commands with their own argparse parser (`rate`, `corpus`, `plot-rewards`) read numbers with
    `ranged(kind, RANGE)`; a seed may be any integer. (`scripts/` are developer benchmarks.)"""
    bare = []
    for path in REPO.glob("*/**/*.py"):
        if path.parts[len(REPO.parts)] in {"generate", "eval", "train", "rewards"}:
            for call in re.findall(r"add_argument\((?:[^()]|\([^()]*\))*\)", path.read_text()):
                if re.search(r"type=(int|float)\b", call) and not re.match(r"add_argument\(\s*\"--[\w-]*seed\"", call):
                    bare.append(f"{path.relative_to(REPO)}: {' '.join(call.split())[:80]}")
    assert not bare, f"numbers read without a range: {bare}"


@pytest.mark.parametrize(("argv", "message"), [
    (["rate", "serve", "--db", "s.sqlite", "--raters", "0"], "argument --raters: must be >= 1, got 0"),
    (["rate", "serve", "--db", "s.sqlite", "--sample", "-1"], "argument --sample: must be >= 1, got -1"),
    (["rate", "serve", "--db", "s.sqlite", "--port", "70000"], "argument --port: must be in [0, 65535], got 70000"),
    (["rate", "export", "--db", "s.sqlite", "--out", "o", "--good-at", "6"],
     "argument --good-at: must be in [0, 5], got 6"),
    (["corpus", "fetch", "--jobs", "0"], "argument --jobs: must be >= 1, got 0"),
    (["plot-rewards", "run", "--window", "0"], "argument --window: must be >= 1, got 0"),
])
def test_a_number_read_by_argparse_is_refused_the_same_way(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing may be written: the port was refused after the study's database
    code, err = run(argv, capsys)
    assert code == 2 and err.startswith(f"error: {message} (see review-lab ")
    assert not any(tmp_path.iterdir())


def run(argv: list[str], capsys) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    return exit_info.value.code, capsys.readouterr().err


@pytest.mark.parametrize(("argv", "message"), [
    (["generate", "--limit", "0"], "--limit must be >= 1, got 0"),
    (["generate", "--limit", "-3"], "--limit must be >= 1, got -3"),
    (["generate", "--max-new-tokens", "0"], "--max-new-tokens must be >= 1, got 0"),
    (["generate", "--top-p", "1.5"], "--top-p must be in (0, 1], got 1.5"),
    (["generate", "--timeout", "0"], "--timeout must be > 0, got 0.0"),
    (["benchmark", "--limit", "0"], "--limit must be >= 1, got 0"),
    (["eval", "--stories", "x.jsonl", "--kl-alpha", "0"], "--kl-alpha must be > 0, got 0.0"),
    (["compare", "--run", "a=x", "--out", "o", "--alpha", "1"], "--alpha must be in (0, 1), got 1.0"),
    (["sweep", "--grid", "rounds=1,2", "--reference-max-chunks", "0"], "--reference-max-chunks must be >= 1, got 0"),
    (["curate", "--threshold", "1"], "--threshold must be in [0, 1), got 1.0"),
    (["principles", "optimize", "--attacks", "0"], "--attacks must be >= 1, got 0"),
    (["story", "--max-steps", "0"], "--max-steps must be >= 1, got 0"),
    (["benchmark", "--judge-mode", "vote"], "--judge-mode: 'vote' is not one of: sample, logprob"),
    (["benchmark", "--judge", "gpt-9"], "--judge: unknown model 'gpt-9'; expected one of: hf:<model>, openai:<model>, "
                                        "vllm:<model>, smollm2-135m-instruct"),
    (["benchmark", "--frameworks", "single", "brainstorm"], "--frameworks: 'brainstorm' is not one of: debate, "
                                                            "discussion, review, single, teacher"),
    (["benchmark", "--dataset", "nope.json"], "--dataset: dataset not found: nope.json"),
    (["sweep", "--grid", "rounds=1,2", "--judge-mode", "vote"], "--judge-mode: 'vote' is not one of: sample, logprob"),
    (["generate", "--model", "gpt-9", "--framework", "single"], "--model: unknown model 'gpt-9'; expected one of: "
                                                                "hf:<model>, openai:<model>, vllm:<model>, "
                                                                "smollm2-135m-instruct"),
    (["generate", "--review-variant", "latest"], "--review-variant: 'latest' is not one of: paper, public_code"),
    (["story", "--eval-dataset", "nope.json"], "--eval-dataset: dataset not found: nope.json"),
    (["curate", "--without", "retrieval"], "--without: 'retrieval' is not one of: positive, negative, judge, reflect"),
])
def test_a_number_out_of_range_is_one_error_line_before_anything_runs(argv, message, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing may be written: the directory stays empty
    code, err = run(argv, capsys)
    assert code == 2 and err == f"error: {message}\n"
    assert not any(tmp_path.iterdir())


def test_a_yaml_value_is_checked_as_a_flag_is(tmp_path, capsys):
    (tmp_path / "run.yaml").write_text("limit: 0\n")
    code, err = run(["generate", "--config", str(tmp_path / "run.yaml"), "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and err == "error: --limit must be >= 1, got 0\n"


def test_the_training_scripts_arguments_refuse_too():
    """trl's parser builds these (and hands a field's metadata to argparse): their ranges are a class
    attribute, checked when the parser builds them."""
    from trl import GRPOConfig, ModelConfig, TrlParser

    from train.args import ScriptArguments
    from train.reward_model import RMScriptArguments

    parser = TrlParser((ScriptArguments, GRPOConfig, ModelConfig))
    with pytest.raises(UsageError, match=r"--eval-fraction must be in \[0, 1\), got 1.0"):
        parser.parse_args_and_config(["--eval_fraction", "1", "--output_dir", "unused"])

    with pytest.raises(UsageError, match=r"--eval-fraction must be in \[0, 1\), got 1.5"):
        ScriptArguments(eval_fraction=1.5)
    with pytest.raises(UsageError, match="--eval-fraction"):
        RMScriptArguments(eval_fraction=-0.1)
    with pytest.raises(UsageError, match="--reward-gate: 'quality' is not one of: none, judge"):
        ScriptArguments(reward_gate="quality")


def test_help_shows_each_range(capsys):
    with pytest.raises(SystemExit):
        cli.main(["generate", "--help"])
    out = " ".join(capsys.readouterr().out.split())  # argparse wraps the help
    assert "N prompts only, taken across aspects in turn (>= 1)" in out and "--top-p TOP_P (in (0, 1])" in out
    assert "--review-variant REVIEW_VARIANT Review: paper (reviewers only read peers' initial drafts), public_code " \
           "(peers' latest drafts) (one of: paper, public_code)" in out
