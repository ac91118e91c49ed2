"""Manifests record how a run was made, and never its secrets."""

import json

from generate.common.machine import cpu_supports_bf16
from generate.common import machine, manifest
from generate.common.manifest import redact, update_manifest, write_manifest


def test_redact_hides_credentials_but_not_token_counts():
    cfg = {"api_key": "sk-1", "max_new_tokens": 9, "hf_token": "t", "nested": {"OPENAI_API_KEY": "k"}}
    assert redact(cfg) == {"api_key": "<redacted>", "max_new_tokens": 9, "hf_token": "<redacted>",
                           "nested": {"OPENAI_API_KEY": "<redacted>"}}


def test_manifest_fields(tmp_path):
    path = write_manifest(tmp_path, kind="generation", config={"api_key": "sk-secret", "seed": 3}, seed=3,
                          templates={"rules": "Write."})
    text = path.read_text()
    data = json.loads(text)
    assert "sk-secret" not in text
    assert data["seed"] == 3 and data["packages"]["torch"].startswith("2.13")
    assert len(data["template_sha256"]["rules"]) == 64


def test_manifest_records_the_machine(tmp_path):
    """Speeds and the hf backend's dtype depend on the machine (bf16 only with native bf16), so
    every manifest says what it ran on."""
    data = json.loads(write_manifest(tmp_path, kind="generation", config={}).read_text())
    m = data["machine"]
    assert m["cores"] >= 1 and m["torch_threads"] >= 1 and m["arch"]
    assert set(m["isa"]) <= set(machine.ISA)
    assert ("avx512_bf16" in m["isa"] or "amx_bf16" in m["isa"]) == cpu_supports_bf16()


def test_cpu_flags_are_whole_words_of_the_first_cpu():
    text = ("processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu avx2 fma avx512fp16\n\n"
            "processor\t: 1\nmodel name\t: other\nflags\t\t: avx512f\n")
    model, flags = machine.parse_cpuinfo(text)
    assert model == "AMD EPYC" and "avx2" in flags and "avx512f" not in flags
    assert machine.parse_cpuinfo("") == (None, frozenset())


def test_a_resumed_run_keeps_every_invocation(tmp_path, monkeypatch):
    """A run resumed at another commit must not claim the latest for all its results: each process
    that wrote the manifest before stays in `earlier_invocations`, with what it recorded at its end."""
    (tmp_path / "manifest.json").write_text(json.dumps(  # written before invocations were kept
        {"kind": "generation", "created": "then", "git_commit": "aaa", "command": "old", "peak_rss_gb": 9.0}))
    monkeypatch.setattr(manifest, "PROCESS", "first")
    write_manifest(tmp_path, kind="generation", config={})
    update_manifest(tmp_path, {"reliability": {"total_retries": 2}})
    write_manifest(tmp_path, kind="generation", config={})  # the same process again: not an earlier one
    update_manifest(tmp_path, {"reliability": {"total_retries": 3}})
    monkeypatch.setattr(manifest, "PROCESS", "second")
    data = json.loads(write_manifest(tmp_path, kind="generation", config={}).read_text())
    old, first = data["earlier_invocations"]
    assert old == {"created": "then", "git_commit": "aaa", "command": "old", "peak_rss_gb": 9.0}
    assert first["process"] == "first" and first["reliability"] == {"total_retries": 3}
    assert first["packages"]["torch"].startswith("2.13") and first["git_commit"] == data["git_commit"]
    assert data["process"] == "second" and "reliability" not in data

    other = json.loads(write_manifest(tmp_path, kind="evaluation", config={}).read_text())
    assert "earlier_invocations" not in other  # another kind: another run
