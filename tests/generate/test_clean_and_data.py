"""Story cleaning, dataset loading and config merging: literal inputs, exact outputs."""

import json
from dataclasses import dataclass

import pytest

from generate.clean import clean_feedback, clean_story
from generate.common.config import build_config
from generate.common.errors import UsageError
from generate.datasets import load_dataset

CLEAN_CASES = [
    ("Here's my story:\n\nThe ship woke.", "The ship woke."),
    ("Sure! Here is the revised story.\nThe ship woke.", "The ship woke."),
    ("Title: Rust Moon\n\nThe ship woke.\n\nEnd of Story", "The ship woke."),
    ("**Rust Moon**\nThe ship woke.\n(Word count: 301)", "The ship woke."),
    ("<<<STORY\nThe ship woke.\nSTORY>>>", "The ship woke."),
    ("As the Ecological Writer, the forest answered.", "The forest answered."),
    ("Futuristic Writer:\nThe ship woke.\n---\nNote: I used a twist.", "The ship woke."),
    ("The ship woke. Here is why: fuel.", "The ship woke. Here is why: fuel."),
    ("", ""),
]


@pytest.mark.parametrize(("raw", "clean"), CLEAN_CASES)
def test_clean_story(raw, clean):
    assert clean_story(raw) == clean


def test_clean_feedback_drops_echoed_markers_only():
    assert clean_feedback("<<<STORY\nMake the robot braver.\nSTORY>>>") == "Make the robot braver."


def test_scifi100_ids_are_stable(scifi100_path):
    tasks = load_dataset(scifi100_path)
    assert len(tasks) == 100 and len({t.aspect for t in tasks}) == 10
    assert tasks[2].id == "strong-voice-03"
    assert [t.id for t in tasks] == [t.id for t in load_dataset(scifi100_path)]


def test_named_scifi100_uses_local_copy(scifi100_path, monkeypatch):
    monkeypatch.setenv("SCIFI100_PATH", str(scifi100_path))
    assert len(load_dataset("scifi100")) == 100


def test_scifi100_without_copy_or_network_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.delenv("SCIFI100_PATH", raising=False)
    monkeypatch.setenv("SCIFI_CACHE_DIR", str(tmp_path))
    with pytest.raises(UsageError, match="SCIFI100_PATH"):
        load_dataset("scifi100")


def test_default_dataset_covers_every_aspect_twice():
    tasks = load_dataset("default")
    assert len(tasks) == 20 and len({t.aspect for t in tasks}) == 10


@pytest.mark.parametrize(("name", "content", "message"), [
    ("empty.json", "{}", "expected a JSON object"),
    ("bad.json", "{not json", "not valid JSON"),
    ("list.json", '{"Pacing": "one prompt"}', "must map to a list"),
    ("blank.json", '{"Pacing": ["   "]}', "is empty"),
    ("empty.jsonl", "\n", "no prompts"),
    ("bad.jsonl", '{"id": "a"}\n', "expected a JSON object with id"),
    ("dup.jsonl", '{"id": "a", "prompt": "x"}\n{"id": "a", "prompt": "y"}\n', "duplicate"),
])
def test_malformed_datasets(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(UsageError, match=message):
        load_dataset(path)


def test_jsonl_dataset(tmp_path):
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps({"id": "p1", "aspect": "Pacing", "prompt": "A race."}) + "\n")
    (task,) = load_dataset(path)
    assert (task.id, task.aspect, task.prompt) == ("p1", "Pacing", "A race.")


@dataclass
class Opts:
    a: int = 1
    b: str = "x"


def test_config_precedence_and_unknown_keys(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("a: 5\nb: y\n")
    assert build_config(Opts, cfg, {"a": 7, "b": None}) == Opts(7, "y")
    cfg.write_text("a: 5\nc: 1\n")
    with pytest.raises(UsageError, match="unknown config key"):
        build_config(Opts, cfg, {})
