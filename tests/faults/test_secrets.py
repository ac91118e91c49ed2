"""An API key given through the environment, a flag or a config file never appears in what a run
prints or writes, even when the server's error bodies quote our request headers back: generate
and eval through our proxy (which demands the key and echoes headers in its errors) in front of
the scripted server, then every stream and every file is searched for the key."""

from __future__ import annotations

import base64
import json
import subprocess
import uuid

import pytest
import yaml

from generate.common.secrets import find_secrets, redact, redact_argv, redact_url, scrub, url_secrets
from tests.conftest import REPO
from tests.faults.conftest import PYTHON, RUBRIC, cli_env
from tests.faults.proxy import FaultProxy

KEY = f"sk-proj-{uuid.uuid4().hex}"
slow = pytest.mark.slow  # the evaluation loads the sentence encoder


@pytest.fixture(scope="module")
def runs(stub, tmp_path_factory):
    """Every command, with the key from each source; returns (root directory, all streams)."""
    root = tmp_path_factory.mktemp("secrets")
    prompts = root / "prompts.jsonl"
    prompts.write_text('{"id": "ok-1", "aspect": "A", "prompt": "Write about a comet."}\n'
                       '{"id": "long-1", "aspect": "A", "prompt": "' + "word " * 600 + '"}\n')
    refused = root / "refused.jsonl"
    refused.write_text('{"id": "bad-1", "aspect": "A", "prompt": "STATUS 400 please"}\n')
    config = root / "eval.yaml"
    streams = []
    with FaultProxy(stub.base_url, api_key=KEY, echo_headers=True, lifetime=300,
                    schedule=[(0, "503"), (0, "429"), (1, "504"), (0, "502"), (2, "503")]) as proxy:
        config.write_text(yaml.safe_dump({"judge": "openai:stub", "base_url": proxy.base_url, "api_key": KEY,
                                          "rubric": str(RUBRIC), "no_surprisal": True}))
        gen = [PYTHON, "-m", "generate", "--framework", "single", "--model", "openai:stub", "--base-url", proxy.base_url]
        commands = [  # (argv, extra environment, expected exit code)
            ([*gen, "--dataset", str(prompts), "--api-key", KEY, "--out", str(root / "flag")], {}, 1),
            ([*gen, "--dataset", str(prompts), "--out", str(root / "env")], {"OPENAI_API_KEY": KEY}, 1),
            ([*gen, "--dataset", str(refused), "--api-key", KEY, "--out", str(root / "refused")], {}, 2),
            ([PYTHON, "-m", "eval", "--config", str(config), "--stories", str(root / "flag" / "stories.jsonl"),
              "--out", str(root / "eval")], {}, 0),
        ]
        for argv, extra, code in commands:
            done = subprocess.run(argv, cwd=REPO, env=cli_env(root, **extra), capture_output=True, text=True,
                                  timeout=300)
            assert done.returncode == code, done.stderr[-3000:]
            streams += [done.stdout, done.stderr]
    assert not proxy.pending  # every echoed error was served
    return root, "\n".join(streams)


@slow
def test_the_key_is_in_no_stream(runs):
    _, streams = runs
    assert KEY not in streams
    assert "authorization: Bearer <redacted>" in streams  # the echoes were there, scrubbed
    refusal = [line for line in streams.splitlines() if line.startswith("error:") and "HTTP 400" in line]
    assert len(refusal) == 1 and "Bearer <redacted>" in refusal[0]  # the refused run's one line


@slow
def test_the_key_is_in_no_file_the_runs_wrote(runs):
    root, _ = runs
    written = [p for p in (root / d for d in ("flag", "env", "refused", "eval")) for p in p.rglob("*") if p.is_file()]
    assert {p.name for p in written} >= {"manifest.json", "calls.jsonl", "stories.jsonl", "failed.jsonl",
                                         "scores.jsonl"}
    assert [p for p in written if KEY.encode() in p.read_bytes()] == []
    reason = (root / "flag" / "failed.jsonl").read_text()
    assert "maximum context length" in reason and "Bearer <redacted>" in reason  # the echo, scrubbed


@pytest.mark.parametrize("argv, masked", [
    (["--api-key", "sk-1234567", "--out", "x"], ["--api-key", "<redacted>", "--out", "x"]),
    (["--api_key=sk-1234567"], ["--api_key=<redacted>"]),
    (["--hub_token", "hf_abcdefg", "--token-limit", "5"], ["--hub_token", "<redacted>", "--token-limit", "5"]),
])
def test_credential_flags_are_masked_in_command_lines(argv, masked):
    assert redact_argv(argv) == masked


def test_secrets_are_found_in_flags_environment_config_and_json_options(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"reward_options": {"judge": {"api_key": "sk-from-config"}}, "lr": 1}))
    found = find_secrets(["--config", str(config), "--api-key=sk-from-flag",
                          "--reward_options", '{"judge": {"token": "tok-from-json"}}'],
                         {"OPENAI_API_KEY": "sk-from-env", "PATH": "/usr/bin", "HF_TOKEN": "EMPTY"})
    assert set(found) == {"sk-from-config", "sk-from-flag", "tok-from-json", "sk-from-env"}
    assert scrub("Bearer sk-from-env and sk-from-flag", found) == "Bearer <redacted> and <redacted>"


def test_a_key_in_the_server_url_is_in_no_stream_or_file(stub, tmp_path):
    """`--base-url https://user:KEY@host/v1`: the flag's name says nothing, the key is in its value,
    and httpx sends it as `Authorization: Basic base64(user:KEY)`, which the server's errors quote
    back. Neither form reaches the streams, the manifest, the journal or failed.jsonl."""
    url_key = f"sk-url-{uuid.uuid4().hex[:12]}"
    basic = base64.b64encode(f"alice:{url_key}".encode()).decode()
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text('{"id": "ok-1", "aspect": "A", "prompt": "Write about a comet."}\n'
                       '{"id": "long-1", "aspect": "A", "prompt": "' + "word " * 600 + '"}\n')
    host = stub.base_url.split("//", 1)[1]
    argv = [PYTHON, "-m", "generate", "--framework", "single", "--model", "openai:stub", "--dataset", str(prompts),
            "--base-url", f"http://alice:{url_key}@{host}", "--out", str(tmp_path / "run")]
    done = subprocess.run(argv, cwd=REPO, env=cli_env(tmp_path), capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr[-3000:]
    written = [p for p in (tmp_path / "run").rglob("*") if p.is_file()]
    assert {p.name for p in written} >= {"manifest.json", "calls.jsonl", "stories.jsonl", "failed.jsonl"}
    for text in [done.stdout, done.stderr, *(p.read_text() for p in written)]:
        assert url_key not in text and basic not in text
    assert "Basic <redacted>" in (tmp_path / "run" / "failed.jsonl").read_text()  # the echo, scrubbed
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["config"]["base_url"] == f"http://<redacted>@{host}"


@pytest.mark.parametrize("text, secrets, masked", [
    ("https://alice:sk-abcdef12@host/v1", {"sk-abcdef12"}, "https://<redacted>@host/v1"),
    ("https://sk-onlyauser@host/v1", {"sk-onlyauser"}, "https://<redacted>@host/v1"),
    ("https://host/v1?api_key=sk-abcdef12&model=m", {"sk-abcdef12"}, "https://host/v1?api_key=<redacted>&model=m"),
    ("https://host/v1?key=AIzaSy123456", {"AIzaSy123456"}, "https://host/v1?key=<redacted>"),
    ("http://127.0.0.1:8000/v1", set(), "http://127.0.0.1:8000/v1"),
    ("see http://example.com/a@b and user@example.com", set(), "see http://example.com/a@b and user@example.com"),
])
def test_credentials_inside_urls_are_found_and_masked(text, secrets, masked):
    assert url_secrets(text) == secrets
    assert redact_url(text) == masked and scrub(text, []) == masked
    assert redact({"base_url": text}) == {"base_url": masked}
    assert redact_argv(["--base-url", text]) == ["--base-url", masked]
    assert set(find_secrets(["--base-url", text], {"OPENAI_BASE_URL": text})) == secrets


@pytest.mark.parametrize("echo", [
    "authorization: Bearer sk-abcdef123456", "{'Authorization': 'Basic YWxpY2U6c2stdXJs'}",
    '{"x-api-key":"abcdef123456"}', "Proxy-Authorization: Basic YWxpY2U6c2stdXJs",
])
def test_credential_headers_a_server_quotes_back_are_masked_without_knowing_the_key(echo):
    clean = scrub(f"refused; you sent {echo}; accept: application/json", [])
    assert "<redacted>" in clean and "abcdef123456" not in clean and "YWxpY2U6c2stdXJs" not in clean
    assert clean.endswith("; accept: application/json")


def test_ordinary_words_are_not_taken_for_credentials():
    text = "Basic Review: Token counts for the Bearer of news; key=value"
    assert scrub(text, []) == text
