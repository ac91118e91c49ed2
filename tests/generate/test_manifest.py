"""Manifests record how a run was made, and never its secrets."""

import json

from generate.backends.hf import cpu_supports_bf16
from generate.common import machine
from generate.common.manifest import redact, write_manifest


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
