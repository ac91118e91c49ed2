"""Manifests record how a run was made, and never its secrets."""

import json

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
