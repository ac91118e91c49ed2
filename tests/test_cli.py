"""`review-lab`, the one command: every job is listed, every `--help` works offline and ends with an
example, bad input is one `error:` line and exit 2, and bool flags read naturally. No model runs:
the jobs' `--help` is asked in-process (their modules import once), the console script itself once."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from generate.common.config import parse_config
from generate.common.errors import UsageError
from train import cli
from train.launch import accelerate_command, split_args

REVIEW_LAB = Path(sys.executable).parent / "review-lab"
JOBS = ["generate", "eval", "view", "compare", "benchmark", "sweep", "story", "signals", "curate", "principles",
        "reward-model", "rate", "align", "corpus", "device-check", "train", "heldout", "plot-rewards"]
# `train` and `reward-model` forward options they do not know to the training script: not bad input here.
FORWARDING = {"train", "reward-model"}


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    """`review-lab ARGV` in this process: (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    out, err = capsys.readouterr()
    return exit_info.value.code, out, err


def test_the_console_script_lists_every_job():
    proc = subprocess.run([str(REVIEW_LAB), "--help"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    listed = [line.split()[0] for line in proc.stdout.split("commands:")[1].split("example:")[0].splitlines()
              if line.strip()]
    assert sorted(listed) == sorted(JOBS) == sorted(cli.COMMANDS)
    assert proc.stdout.rstrip().splitlines()[-1].strip().startswith("review-lab ")


def test_the_console_script_refuses_an_unknown_job_in_one_line():
    proc = subprocess.run([str(REVIEW_LAB), "brainstorm"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()]
    assert proc.stderr.startswith("error: unknown command")


@pytest.mark.parametrize("job", JOBS)
def test_every_help_exits_0_and_ends_with_an_example(job, capsys):
    code, out, _ = run([job, "--help"], capsys)
    assert code == 0
    assert out.startswith(f"usage: review-lab {job}")
    tail = out.rstrip().split("\nexample:\n")
    assert len(tail) == 2 and tail[1].strip().startswith(f"review-lab {job}"), out[-400:]
    assert "--no-no-" not in out and "python scripts/" not in out


@pytest.mark.parametrize("job", sorted(set(JOBS) - FORWARDING))
def test_a_bad_option_is_one_error_line_and_exit_2(job, capsys):
    code, out, err = run([job, "--no-such-option", "1"], capsys)
    assert code == 2
    assert err.strip().splitlines() == [err.strip()] and err.startswith("error: "), err
    assert f"review-lab {job}" in err  # says whose --help to read


@pytest.mark.parametrize("job, sub", [("corpus", "path"), ("corpus", "fetch"), ("principles", "optimize"),
                                      ("principles", "weak-labels"), ("rate", "export")])
def test_a_bad_option_of_a_subcommand_points_to_the_subcommands_help(job, sub, capsys):
    code, _, err = run([job, sub, "--no-such-option", "1"], capsys)
    assert code == 2 and err.startswith("error: ") and f"(see review-lab {job} {sub} --help)" in err, err


def test_no_command_prints_the_overview(capsys):
    code, out, _ = run([], capsys)
    assert code == 0 and "commands:" in out


def test_the_subcommands_of_principles_end_with_an_example(capsys):
    for sub in ("optimize", "weak-labels"):
        code, out, _ = run(["principles", sub, "--help"], capsys)
        assert code == 0 and out.rstrip().splitlines()[-1].strip().startswith(f"review-lab principles {sub}")


# --- bool flags ----------------------------------------------------------------------------------

@dataclass
class Options:
    judge: str = "smollm2-135m-instruct"
    no_judge: bool = False
    plots: bool = True


@pytest.mark.parametrize("argv, no_judge, plots", [
    ([], False, True),
    (["--no-judge"], True, True),
    (["--no-judge", "--with-judge"], False, True),
    (["--no-plots"], False, False),
    (["--plots"], False, True),
])
def test_bool_flags_read_naturally(argv, no_judge, plots):
    cfg = parse_config(Options, argv)
    assert (cfg.no_judge, cfg.plots) == (no_judge, plots)


def test_a_flag_overrides_the_yaml_either_way(tmp_path):
    config = tmp_path / "options.yaml"
    config.write_text("no_judge: true\nplots: false\n")
    assert parse_config(Options, ["--config", str(config)]).no_judge is True
    cfg = parse_config(Options, ["--config", str(config), "--with-judge", "--plots"])
    assert (cfg.no_judge, cfg.plots) == (False, True)


def test_a_negative_field_never_offers_a_double_negative(capsys):
    with pytest.raises(SystemExit):
        parse_config(Options, ["--help"], prog="review-lab x", example="review-lab x --no-judge")
    out = capsys.readouterr().out
    assert "--no-judge, --with-judge" in out and "--plots, --no-plots" in out and "--no-no-" not in out
    assert out.rstrip().endswith("example:\n  review-lab x --no-judge")
    with pytest.raises(UsageError, match="ambiguous|unrecognized"):
        parse_config(Options, ["--no-no-judge"])


# --- train and reward-model: accelerate launch with the installed script --------------------------

def test_train_splits_accelerate_options_from_the_recipe():
    accelerate, script = split_args("train", ["--config_file", "cpu.yaml", "--config", "recipe.yaml",
                                              "--max_steps", "2", "--", "--num_processes", "3"])
    assert accelerate == ["--config_file", "cpu.yaml"]  # `--config` is the recipe's, never read as --config_file
    assert script == ["--config", "recipe.yaml", "--max_steps", "2", "--num_processes", "3"]


def test_the_launch_line_runs_accelerate_from_this_interpreter_on_the_package_script():
    cmd = accelerate_command("grpo.py", ["--num_processes", "2"], ["--config", "r.yaml"])
    assert cmd[:4] == [sys.executable, "-m", "accelerate.commands.launch", "--quiet"]  # no launcher traceback
    assert Path(cmd[6]).is_file() and Path(cmd[6]).name == "grpo.py" and cmd[7:] == ["--config", "r.yaml"]


@pytest.mark.slow  # two launches of accelerate, each importing trl
@pytest.mark.parametrize(("args", "message"), [
    (["--config", "nowhere.yaml"], "error: config file not found: nowhere.yaml"),
    (["--config", "configs/grpo/smollm2_cpu.yaml", "--reward_gate", "quality"],
     "error: --reward-gate: 'quality' is not one of: none, judge"),
])
def test_bad_input_to_a_launched_script_is_its_one_error_line_and_exit_2(args, message):
    """accelerate reports any failure of its script as exit 1 under a traceback of its own launcher:
    `review-lab train` keeps the script's line alone and returns the script's status."""
    import subprocess

    proc = subprocess.run([sys.executable, "-m", "train.cli", "train", *args], cwd=Path(__file__).resolve().parents[1],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert message in proc.stderr.splitlines() and "Traceback" not in proc.stderr, proc.stderr[-3000:]
