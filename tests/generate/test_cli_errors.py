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


CASES = {
    "unknown framework": (lambda t: ["--framework", "brainstorm"], "--framework: 'brainstorm' is not one of"),
    "unknown model": (lambda t: ["--model", "gpt-9"], "unknown model"),
    "missing dataset": (lambda t: ["--dataset", str(t / "nope.json")], "dataset not found"),
    "malformed dataset": (lambda t: ["--dataset", write(t, "d.json", "[1, 2")], "not valid JSON"),
    "empty dataset": (lambda t: ["--dataset", write(t, "d.json", "{}")], "expected a JSON object"),
    "empty prompt": (lambda t: ["--dataset", write(t, "d.jsonl", '{"id": "a", "prompt": ""}\n')], "is empty"),
    "unknown config key": (lambda t: ["--config", write(t, "c.yaml", "framwork: review\n")], "unknown config key"),
    "bad config yaml": (lambda t: ["--config", write(t, "c.yaml", "a: [1\n")], "not valid YAML"),
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
