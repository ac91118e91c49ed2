"""Every framework end to end with the real embedded SmolLM2 writer (short outputs)."""

import json
import subprocess
import sys

import pytest

from generate.runner import RunConfig, Runner
from tests.conftest import REPO

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("framework", ["single", "teacher", "debate", "discussion", "review"])
def test_framework_end_to_end(tmp_path, default_model, framework):
    cfg = RunConfig(framework=framework, out=str(tmp_path), limit=2, max_new_tokens=12)
    path = Runner(cfg, model=default_model).run()
    stories = [json.loads(line) for line in path.read_text().splitlines()]
    per_prompt = 1 if framework == "single" else 3
    assert len(stories) == 2 * per_prompt
    # --limit spans aspects: the first prompt of the first two aspects.
    assert {s["prompt_id"] for s in stories} == {"strong-voice-01", "imagery-and-sensory-details-01"}
    for s in stories:
        assert s["text"].strip(), s
        assert "<<<STORY" not in s["text"] and "STORY>>>" not in s["text"]
        assert s["usage"]["completion_tokens"] > 0 and s["seconds"] > 0
        assert len(s["drafts"]) == (0 if framework == "single" else 2)
        assert isinstance(s["truncated"], bool)  # read off the hf backend's finish reason
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["config"]["framework"] == framework and manifest["template_sha256"]
    assert manifest["backend"]["dtype"] in ("bfloat16", "float32")


def test_cli_writes_stories_and_manifest(tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "generate", "--framework", "single", "--limit", "2",
                           "--max-new-tokens", "8", "--out", str(out)], cwd=REPO, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len((out / "stories.jsonl").read_text().splitlines()) == 2
    assert json.loads((out / "manifest.json").read_text())["seed"] == 0
