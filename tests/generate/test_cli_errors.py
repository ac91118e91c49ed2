"""Bad input: one line on stderr, exit code 2, never a traceback."""

import subprocess
import sys

import pytest

from tests.conftest import REPO


def cli(*args, cwd=REPO):
    return subprocess.run([sys.executable, "-m", "generate", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=300)


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def folder(tmp_path, name):
    path = tmp_path / name
    path.mkdir()
    return str(path)


CASES = {
    "unknown framework": (lambda t: ["--framework", "brainstorm"], "--framework: 'brainstorm' is not one of"),
    "unknown model": (lambda t: ["--model", "gpt-9"], "unknown model"),
    "missing dataset": (lambda t: ["--dataset", str(t / "nope.json")], "dataset not found"),
    "malformed dataset": (lambda t: ["--dataset", write(t, "d.json", "[1, 2")], "not valid JSON"),
    "empty dataset": (lambda t: ["--dataset", write(t, "d.json", "{}")], "expected a JSON object"),
    "empty prompt": (lambda t: ["--dataset", write(t, "d.jsonl", '{"id": "a", "prompt": ""}\n')], "is empty"),
    "unknown config key": (lambda t: ["--config", write(t, "c.yaml", "framwork: review\n")], "unknown config key"),
    "bad config yaml": (lambda t: ["--config", write(t, "c.yaml", "a: [1\n")], "not valid YAML"),
    "no model in the directory": (lambda t: ["--model", f"hf:{folder(t, 'm')}", "--limit", "1"],
                                  "cannot load hf model"),
    "unreachable server": (lambda t: ["--model", "openai:m", "--base-url", "http://127.0.0.1:9/v1", "--retries", "1",
                                      "--timeout", "2", "--limit", "1"], "still failing after 1 retries"),
}


@pytest.mark.parametrize("case", CASES)
def test_bad_input_exits_2_with_one_line(tmp_path, case):
    make_args, message = CASES[case]
    proc = cli(*make_args(tmp_path), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_resuming_with_different_settings_is_refused(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "manifest.json").write_text('{"config": {"framework": "review", "temperature": 0.9}}')
    proc = cli("--framework", "review", "--temperature", "0.5", "--out", str(out))
    assert proc.returncode == 2 and "temperature=0.9" in proc.stderr


@pytest.mark.parametrize("framework", ["review", "debate", "discussion", "teacher"])
def test_a_multi_agent_framework_refuses_one_agent_before_writing(tmp_path, monkeypatch, capsys, framework):
    """With one agent a reviser would get an empty feedback block and a debater no peer's story:
    `--agents 1` is refused with one line, exit 2, and nothing is written (nor a model loaded)."""
    from generate.backends import Model
    from generate.cli import main
    from generate.common.cli import run_cli
    from tests.generate.fakes import RecordingEcho

    backend = RecordingEcho()
    monkeypatch.setattr("generate.backends.load_model", lambda *a, **k: Model(backend))
    with pytest.raises(SystemExit) as info:
        run_cli(main, ["--framework", framework, "--agents", "1", "--model", "hf:echo", "--limit", "1",
                       "--out", str(tmp_path / "out")])
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert info.value.code == 2 and len(errors) == 1 and f"{framework} needs at least 2 agents" in errors[0]
    assert not (tmp_path / "out").exists() and not backend.requests


def test_every_entry_point_refuses_too_few_agents_where_it_builds_its_run():
    """The sweep (`--grid agents=1`) and the benchmark build a `RunConfig` themselves: the check is
    made there, so no entry point can let one agent through; single, one writer anyway, takes it."""
    from generate.common.errors import UsageError
    from generate.runner import RunConfig

    with pytest.raises(UsageError, match="review needs at least 2 agents"):
        RunConfig(framework="review", agents=1)
    assert RunConfig(framework="single", agents=1).agents == 1
