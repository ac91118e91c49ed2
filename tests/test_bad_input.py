"""Bad input to any command is one `error:` line on stderr and exit status 2: never a traceback,
never a run that quietly does something else. Each case here once failed another way: a config
file that is not UTF-8, has a key that is not a name, or gives an option a value of the wrong
type (a traceback from the range check, or a story that started its hours of generation with
`seed: abc`); NaN or infinity for a number (taken as in range); a JSONL line that is JSON but no
object; a malformed trainer state; an `--out` that is a directory or sits under a file; an
option accelerate would refuse with its page of usage. No model runs: every case stops while
the options and files are read (the jobs' modules import once, in this process)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from generate.common.config import build_config, load_yaml, typed
from generate.common.errors import UsageError
from generate.common.jsonl import read_jsonl
from generate.common.ranges import AT_LEAST_1, NON_NEGATIVE, POSITIVE, TOP_P
from train import cli

# Every command whose options come from `--config FILE` and the flags (heldout: `--options FILE`):
# (argv before the config, the option file's flag, a ranged int option, a float option or None).
CONFIG_COMMANDS = {
    "generate": (["generate"], "--config", "limit", "temperature"),
    "eval": (["eval"], "--config", "samples", "judge_temperature"),
    "compare": (["compare"], "--config", "boot", "alpha"),
    "benchmark": (["benchmark"], "--config", "limit", "timeout"),
    "sweep": (["sweep"], "--config", "limit", "timeout"),
    "story": (["story"], "--config", "max_steps", None),
    "signals": (["signals"], "--config", "max_steps", None),
    "curate": (["curate"], "--config", "limit", "temperature"),
    "principles optimize": (["principles", "optimize"], "--config", "iterations", "temperature"),
    "principles weak-labels": (["principles", "weak-labels"], "--config", "works", "temperature"),
    "device-check": (["device-check"], "--config", "chunks", "tolerance"),
    "heldout": (["heldout"], "--options", "samples", None),
}
NO_SEED = {"device-check", "heldout"}

# name -> (the config file's bytes, given the command's int and float option; what the line says)
BAD_FILES = {
    "not UTF-8": (lambda i, f: b"# caf\xe9\n", "not UTF-8 text"),
    "a key that is no name": (lambda i, f: b"1: 2\n", "is not an option name"),
    "a list at the top": (lambda i, f: b"- 1\n- 2\n", "expected a mapping of option -> value, got a list"),
    "a number at the top": (lambda i, f: b"42\n", "expected a mapping of option -> value, got the int 42"),
    "text for a count": (lambda i, f: f"{i}: abc\n".encode(), "must be a whole number, got 'abc'"),
    "a list for a count": (lambda i, f: f"{i}: [1, 2]\n".encode(), "must be a whole number, got [1, 2]"),
    "a mapping for a count": (lambda i, f: f"{i}: {{a: 1}}\n".encode(), "must be a whole number"),
    "a bool for a count": (lambda i, f: f"{i}: true\n".encode(), "must be a whole number, got True"),
    "a fraction for a count": (lambda i, f: f"{i}: 2.5\n".encode(), "must be a whole number, got 2.5"),
    "null for a count": (lambda i, f: f"{i}: 3\nseed:\n".encode(), "seed needs a value (a whole number), got null"),
    "text for the seed": (lambda i, f: b"seed: abc\n", "seed must be a whole number, got 'abc'"),
    "a number for a path": (lambda i, f: b"out: 0755\n", "out must be text, got 493 (quote it to make it text)"),
}
FLOAT_FILES = {
    "NaN": (lambda f: f"{f}: .nan\n".encode(), "must be a finite number, got nan"),
    "infinity": (lambda f: f"{f}: .inf\n".encode(), "must be a finite number, got inf"),
    "text for a number": (lambda f: f"{f}: high\n".encode(), "must be a finite number, got 'high'"),
}


@pytest.fixture(autouse=True)
def _no_model(monkeypatch):
    """A case that gets as far as loading a model has let its bad input through: it fails there,
    at once, instead of running the model."""
    def refuse(target):
        raise AssertionError(f"reached a model load ({target}): the bad input went through")

    monkeypatch.setattr("generate.backends.import_target", refuse)


def run(argv: list[str], capsys) -> tuple[int, str]:
    """`review-lab ARGV` in this process: (exit status, stderr)."""
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    return exit_info.value.code, capsys.readouterr().err


def one_error_line(code: int, err: str, message: str) -> None:
    lines = err.strip().splitlines()
    assert code == 2, err[-3000:]
    assert "Traceback" not in err and len(lines) == 1 and lines[0].startswith("error: "), err[-3000:]
    assert message in lines[0], lines[0]


def config_cases():
    for name, (_, _, int_key, float_key) in CONFIG_COMMANDS.items():
        for case, (make, message) in BAD_FILES.items():
            if "seed" in message and name in NO_SEED:
                continue
            yield pytest.param(name, make(int_key, float_key), message, id=f"{name}: {case}")
        if float_key:
            for case, (make, message) in FLOAT_FILES.items():
                yield pytest.param(name, make(float_key), message, id=f"{name}: {case}")


@pytest.mark.parametrize(("name", "content", "message"), config_cases())
def test_a_bad_config_file_is_one_error_line(name, content, message, tmp_path, capsys):
    prog, flag, _, _ = CONFIG_COMMANDS[name]
    config = tmp_path / "options.yaml"
    config.write_bytes(content)
    code, err = run([*prog, flag, str(config), "--out", str(tmp_path / "out")], capsys)
    one_error_line(code, err, message)
    assert not (tmp_path / "out").exists()  # refused before anything was written


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e999"])
@pytest.mark.parametrize("name", [n for n, spec in CONFIG_COMMANDS.items() if spec[3]])
def test_a_non_finite_number_on_the_command_line_is_refused(name, value, tmp_path, capsys):
    prog, _, _, float_key = CONFIG_COMMANDS[name]
    flag = "--" + float_key.replace("_", "-")
    code, err = run([*prog, f"{flag}={value}", "--out", str(tmp_path / "out")], capsys)
    one_error_line(code, err, flag)


@pytest.mark.parametrize(("argv", "message"), [
    (["rate", "export", "--db", "x.sqlite", "--out", "o", "--good-at", "nan"], "--good-at: must be in [0, 5], got nan"),
    (["align", "--ratings", "r.csv", "--level", "nan"], "--level: must be in (0, 1), got nan"),
    (["corpus", "fetch", "--timeout", "nan"], "--timeout: must be > 0, got nan"),
    (["corpus", "fetch", "--timeout", "inf"], "--timeout: must be > 0, got inf"),
    (["sweep", "--grid", "temperature=nan"], "--temperature must be >= 0, got nan"),
    (["sweep", "--grid", "temperature=inf"], "--temperature must be >= 0, got inf"),
])
def test_nan_and_infinity_are_in_no_range(argv, message, capsys):
    code, err = run(argv, capsys)
    one_error_line(code, err, message)


def test_ranges_refuse_nan_and_infinity():
    for rng in (AT_LEAST_1, NON_NEGATIVE, POSITIVE, TOP_P):
        assert not any(rng.admits(x) for x in (math.nan, math.inf, -math.inf))
    assert NON_NEGATIVE.admits(1e300) and TOP_P.admits(1)


def test_values_are_checked_against_their_field_types():
    assert typed(3, int, "n") == 3 and typed(3, float, "x") == 3 and typed(None, int | None, "n") is None
    assert typed("a.jsonl", list[str], "files") == ["a.jsonl"]  # one file for a list of files
    assert typed(["a", "b"], list[str] | None, "files") == ["a", "b"]
    for value, kind in [(True, int), ("3", int), (3.0, int), (math.nan, float), (3, str), ("x", bool), ([1], list[str]),
                        ({"a": 1}, list[str]), (None, int)]:
        with pytest.raises(UsageError, match="^n "):
            typed(value, kind, "n")


def test_valid_config_files_still_build_as_before(tmp_path):
    """The shipped settings' types, and a YAML int for a float option, are taken unchanged."""
    from eval.run import EvalConfig
    from generate.runner import RunConfig

    config = tmp_path / "c.yaml"
    config.write_text("framework: single\nlimit: 2\ntemperature: 1\ntop_p: 0.5\nout: runs/x\n")
    cfg = build_config(RunConfig, config, {"seed": 7})
    assert (cfg.framework, cfg.limit, cfg.temperature, cfg.top_p, cfg.out) == ("single", 2, 1, 0.5, "runs/x")
    assert cfg.seed == 7
    config.write_text("stories: runs/a/stories.jsonl\nno_judge: true\nreference_dir:\n")
    cfg = build_config(EvalConfig, config, {})
    assert cfg.stories == ["runs/a/stories.jsonl"] and cfg.no_judge is True and cfg.reference_dir is None


@pytest.mark.parametrize(("content", "message"), [
    (b"\xff\xfe: 1\n", "not UTF-8 text (invalid start byte at byte 0)"),
    (b"1: a\n", "1 is not an option name"),
    (b"[1, 2]\n", "got a list"),
    (b"hello\n", "got the str 'hello'"),
])
def test_load_yaml_refuses_what_is_no_mapping_of_names(content, message, tmp_path):
    path = tmp_path / "c.yaml"
    path.write_bytes(content)
    with pytest.raises(UsageError, match="^" + str(path).replace("\\", "\\\\")) as info:
        load_yaml(path)
    assert message in str(info.value)
    with pytest.raises(UsageError, match="is a directory"):
        load_yaml(tmp_path)


@pytest.mark.parametrize("line", ["[1, 2]", "42", '"text"', "null"])
def test_a_jsonl_line_that_is_no_object_names_its_line(line, tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"a": 1}\n' + line + "\n")
    with pytest.raises(UsageError, match=r"rows.jsonl:2: expected a JSON object"):
        list(read_jsonl(path))
    with pytest.raises(UsageError, match="is a directory"):
        list(read_jsonl(tmp_path))
    path.write_bytes(b'{"a": "caf\xe9"}\n')
    with pytest.raises(UsageError, match=r"rows.jsonl:1: not UTF-8 text"):
        list(read_jsonl(path))


# Input files of the commands: each once a traceback.
LIST_LINE = "[1, 2]\n"
STORY = {"story_id": "single/p1/single", "prompt_id": "p1", "aspect": "a", "prompt": "p", "framework": "single",
         "agent": "single", "model": "m", "text": "t", "drafts": [], "feedback": [], "n_stories": 1}


def write(path: Path, content: str | bytes) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return str(path)


INPUT_CASES = {
    "generate: a dataset not UTF-8": (
        lambda t: ["generate", "--dataset", write(t / "d.jsonl", b'{"id": "caf\xe9"}\n'), "--out", str(t / "o")],
        "d.jsonl: not UTF-8 text"),
    "generate: a personas file not UTF-8": (
        lambda t: ["generate", "--personas", write(t / "p.yaml", b"a: caf\xe9\n"), "--out", str(t / "o")],
        "p.yaml: not UTF-8 text"),
    "eval: a rubric not UTF-8": (
        lambda t: ["eval", "--stories", write(t / "s.jsonl", json.dumps(STORY) + "\n"), "--rubric",
                   write(t / "r.yaml", b"a: caf\xe9\n"), "--out", str(t / "o")],
        "r.yaml: not UTF-8 text"),
    "curate: candidates not UTF-8": (
        lambda t: ["curate", "--candidates", write(t / "c.jsonl", b'{"prompt": "caf\xe9"}\n'), "--out", str(t / "o")],
        "c.jsonl: not UTF-8 text"),
    "principles optimize: a labelled row that is no object": (
        lambda t: ["principles", "optimize", "--labelled", write(t / "l.jsonl", LIST_LINE), "--out", str(t / "o")],
        "l.jsonl:1: expected a JSON object"),
    "view: a stories line that is no object": (
        lambda t: ["view", str(Path(write(t / "run" / "stories.jsonl", LIST_LINE)).parent), "--out", str(t / "v.html")],
        "stories.jsonl:1: expected a JSON object"),
    "rate serve: a stories line that is no object": (
        lambda t: ["rate", "serve", str(Path(write(t / "run" / "stories.jsonl", LIST_LINE)).parent), "--db",
                   str(t / "db.sqlite"), "--port", "0"],
        "stories.jsonl:1: expected a JSON object"),
    "align: ratings not UTF-8": (
        lambda t: ["align", "--ratings", write(t / "r.csv", b"story_id,aspect,human,judge\ncaf\xe9,logic,3,4\n")],
        "r.csv: not UTF-8 text"),
    "heldout: a split that is no object": (
        lambda t: ["heldout", "--config", "configs/grpo/smollm2_cpu.yaml", "--split", write(t / "split.json", "[1]"),
                   "--model", "smollm2-135m-instruct", "--out", str(t / "o")],
        "split.json: expected a JSON object, got list"),
    "corpus path: a manifest that is not there": (
        lambda t: ["corpus", "path", "--manifest", str(t / "nowhere.tsv")], "corpus manifest not found"),
    "story: an rm recipe that is no mapping": (
        lambda t: ["story", "--signals", "rm", "--rm-config", write(t / "rm.yaml", "- 1\n"), "--out", str(t / "o")],
        "rm.yaml: expected a mapping of option -> value, got a list"),
    "story: an rm candidates run that is not there": (
        lambda t: ["story", "--signals", "rm", "--candidates", str(t / "none.jsonl"), "--out", str(t / "o")],
        "--candidates"),
    "principles weak-labels: --principles that no Generator reads": (
        lambda t: ["principles", "weak-labels", "--principles", str(t / "none.yaml"), "--out", str(t / "w.jsonl")],
        "--principles gives the Generator its strategy: it needs --model"),
    "curate: --exemplars not there": (
        lambda t: ["curate", "--candidates", write(t / "s.jsonl", json.dumps(STORY) + "\n"), "--exemplars",
                   str(t / "none.jsonl"), "--out", str(t / "o")], "--exemplars: no such file"),
    "curate: --exemplars with --k 0": (
        lambda t: ["curate", "--candidates", write(t / "s.jsonl", json.dumps(STORY) + "\n"), "--exemplars",
                   write(t / "e.jsonl", '{"response": "r"}\n'), "--k", "0", "--out", str(t / "o")],
        "--k 0 leaves that agent out"),
    "train: accelerate's process count not a number": (
        lambda t: ["train", "--num_processes", "abc", "--config", "configs/grpo/smollm2_cpu.yaml"],
        "--num_processes: invalid int value: 'abc'"),
    "train: accelerate's process count 0": (
        lambda t: ["train", "--num_processes", "0", "--config", "configs/grpo/smollm2_cpu.yaml"],
        "--num_processes: must be >= 1, got 0"),
    "reward-model: accelerate's config file not there": (
        lambda t: ["reward-model", "--config_file", str(t / "none.yaml"), "--config", "configs/rm/smollm2_cpu.yaml"],
        "config file not found"),
}
STATE_CASES = {
    "empty": ("", "not valid JSON"), "not UTF-8": (b"\xff", "not UTF-8 text"),
    "not JSON": ('{"a": 1', "not valid JSON"),
    "a list": ("[]", "expected a JSON object, got list"), "null": ("null", "expected a JSON object, got NoneType"),
    "a log history that is text": ('{"log_history": "x"}', "log_history is not a list of logged steps"),
    "a log history of numbers": ('{"log_history": [1, 2]}', "log_history is not a list of logged steps"),
}
for _case, (_content, _message) in STATE_CASES.items():
    INPUT_CASES[f"plot-rewards: a trainer state {_case}"] = (
        lambda t, c=_content: ["plot-rewards", write(t / "trainer_state.json", c)], _message)


@pytest.mark.parametrize("case", INPUT_CASES)
def test_a_bad_input_file_is_one_error_line(case, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(Path(__file__).resolve().parents[1])  # the recipes' relative paths
    make, message = INPUT_CASES[case]
    code, err = run(make(tmp_path), capsys)
    one_error_line(code, err, message)


def test_the_reward_model_refuses_a_pair_without_its_conversations(tmp_path):
    from train.reward_model import load_pairs

    good = {"prompt": "p", "chosen": [{"role": "assistant", "content": "a"}],
            "rejected": [{"role": "assistant", "content": "b"}]}
    for bad in ({}, {**good, "chosen": "a"}, {**good, "rejected": []}, {**good, "chosen": [{"role": "assistant"}]}):
        path = write(tmp_path / "prefs.jsonl", json.dumps(good) + "\n" + json.dumps(bad) + "\n")
        with pytest.raises(UsageError, match="prefs.jsonl: pair 2: "):
            load_pairs([path])
    assert load_pairs([write(tmp_path / "ok.jsonl", json.dumps(good) + "\n")]) == [good]


# Outputs: a directory where a file is written, a file where a directory is made, a read-only
# place, an image format matplotlib cannot write.
def ratings(t: Path) -> str:
    return write(t / "r.csv", "story_id,aspect,human,judge\ns1,logic,3,4\ns2,logic,4,4\ns3,logic,2,3\n")


def state(t: Path) -> str:
    step = {"step": 1, "reward": 0.5, "rewards/length/mean": 0.2}
    return write(t / "run" / "trainer_state.json", json.dumps({"log_history": [step]}))


OUTPUT_CASES = {
    "align: --out a directory": (lambda t: ["align", "--ratings", ratings(t), "--out", str(t)],
                                 "is a directory where a file belongs"),
    "align: --out under a file": (lambda t: ["align", "--ratings", ratings(t), "--out", str(t / "r.csv" / "a.json")],
                                  "r.csv is in the way"),
    "plot-rewards: --out a directory": (lambda t: ["plot-rewards", state(t), "--out", str(t)], "is a directory"),
    "plot-rewards: --out under a file": (
        lambda t: ["plot-rewards", state(t), "--out", str(t / "run" / "trainer_state.json" / "p.png")],
        "trainer_state.json is in the way"),
    "plot-rewards: --out no image": (lambda t: ["plot-rewards", state(t), "--out", str(t / "p.txt")],
                                     "cannot write a .txt image"),
    "generate: --out an existing file": (lambda t: ["generate", "--out", ratings(t)], "r.csv"),
    "eval: --out under a file": (lambda t: ["eval", "--stories", write(t / "s.jsonl", json.dumps(STORY) + "\n"),
                                            "--out", str(t / "s.jsonl" / "eval")], "s.jsonl"),
    # /proc takes no new directory (mkdir: ENOENT), like any location that refuses one
    "story: --out where no directory can be made": (lambda t: ["story", "--out", "/proc/rl-x"], "cannot write /proc"),
    "signals: --out where no directory can be made": (lambda t: ["signals", "--out", "/proc/rl-x"], "cannot write"),
    "align: --out where no directory can be made": (lambda t: ["align", "--ratings", ratings(t), "--out",
                                                               "/proc/rl-x/a.json"], "cannot write /proc/rl-x"),
}


@pytest.mark.parametrize("case", OUTPUT_CASES)
def test_an_output_path_of_the_wrong_kind_is_one_error_line(case, tmp_path, capsys):
    make, message = OUTPUT_CASES[case]
    code, err = run(make(tmp_path), capsys)
    one_error_line(code, err, message)


def test_plot_rewards_names_the_file_it_wrote(tmp_path, caplog):
    """Given `--out` without an extension, matplotlib writes `<out>.png`: the log names that file."""
    from train.plot_rewards import main

    with caplog.at_level("INFO"):
        assert main([state(tmp_path), "--out", str(tmp_path / "curves")]) == 0
    assert (tmp_path / "curves.png").is_file() and f"wrote {tmp_path / 'curves.png'}" in caplog.text


HELP = ["rate serve", "rate export", "corpus fetch", "corpus path", "principles optimize", "principles weak-labels"]


@pytest.mark.parametrize("command", HELP)
def test_the_help_of_every_subcommand_exits_0(command, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main([*command.split(), "--help"])
    assert exit_info.value.code == 0 and capsys.readouterr().out.startswith(f"usage: review-lab {command}")


def test_an_error_message_that_quotes_line_breaks_stays_one_line(capsys):
    from generate.common.cli import run_cli

    def main(argv):
        raise UsageError("cannot load the model: the library said\n  first\n\n  second\n")

    with pytest.raises(SystemExit) as exit_info:
        run_cli(main, [])
    one_error_line(exit_info.value.code, capsys.readouterr().err,
                   "error: cannot load the model: the library said first second")
