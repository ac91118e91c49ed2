"""Bad stories input is one `error:` line and exit code 2, never a traceback from deep inside
scoring: bytes that are not UTF-8, optional fields (`drafts`, `model`, `agent`) of the wrong type,
which the evaluation reads as the first draft and the surprisal scorer's spec, and a lone
surrogate in a field it hashes or copies as it is (the prompt, the ids), which cannot be written."""

from __future__ import annotations

import json

import pytest

from eval.cli import main
from eval.stories import load_stories
from generate.common.cli import run_cli

STORY = {"story_id": "single/p1/single", "prompt_id": "p1", "framework": "single", "prompt": "A comet.",
         "text": "The ice sang."}


@pytest.mark.parametrize("content, message", [
    (b'\xff\xfe{"story_id": "a"}\n', "stories.jsonl:1: not UTF-8 text"),
    (json.dumps({**STORY, "drafts": {"first": "x"}}).encode() + b"\n", "field 'drafts' is not a list of strings"),
    (json.dumps({**STORY, "drafts": [None]}).encode() + b"\n", "field 'drafts' is not a list of strings"),
    (json.dumps({**STORY, "drafts": "one draft"}).encode() + b"\n", "field 'drafts' is not a list of strings"),
    (json.dumps({**STORY, "model": 5}).encode() + b"\n", "field 'model' is not a str"),
    (json.dumps({**STORY, "agent": ["a"]}).encode() + b"\n", "field 'agent' is not a str"),
    (json.dumps({**STORY, "prompt": "A comet \ud800."}).encode() + b"\n", "field 'prompt' holds an invalid surrogate"),
    (json.dumps({**STORY, "story_id": "a\udc00"}).encode() + b"\n", "field 'story_id' holds an invalid surrogate"),
])
def test_bad_stories_input_is_one_error_line_and_exit_2(tmp_path, capsys, content, message) -> None:
    path = tmp_path / "stories.jsonl"
    path.write_bytes(content)
    with pytest.raises(SystemExit) as exit_info:
        run_cli(main, ["--stories", str(path), "--no-judge", "--no-surprisal", "--out", str(tmp_path / "eval")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    [line] = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert message in line


def test_optional_fields_may_be_null_or_absent(tmp_path) -> None:
    path = tmp_path / "stories.jsonl"
    rows = [{**STORY, "story_id": "a", "drafts": None, "model": None, "agent": None},
            {**STORY, "story_id": "b", "drafts": ["first", "second"], "model": "hf:x", "agent": "single"},
            {**STORY, "story_id": "c", "text": "A lone \ud800 half, sanitised when scored."}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    assert [s["story_id"] for s in load_stories([path])] == ["a", "b", "c"]
