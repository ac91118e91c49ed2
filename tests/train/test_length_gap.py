"""The story flow states how far a learned signal graded outside the lengths it was fitted on."""

import json

from train.length_gap import length_gap, render_length_gap


def words(text: str) -> int:
    return len(text.split())


def write_jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_gap_reads_the_signal_texts_grpo_log_and_stories(tmp_path):
    pair = lambda a, b: {"chosen": [{"role": "assistant", "content": a}],  # noqa: E731
                         "rejected": [{"role": "assistant", "content": b}]}
    write_jsonl(tmp_path / "curation/preferences.jsonl", [pair("w " * 100, "w " * 60), pair("w " * 80, "w " * 90)])
    write_jsonl(tmp_path / "principles/weak/weak.jsonl", [{"response": "w " * 50}, {"response": "w " * 70}])
    grpo = tmp_path / "grpo_rm"
    grpo.mkdir()
    (grpo / "trainer_state.json").write_text(json.dumps({"log_history": [
        {"completions/mean_length": 30.0}, {"completions/mean_length": 40.0}, {"train_loss": 1.0}]}))
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("max_completion_length: 40\n")
    write_jsonl(tmp_path / "tuned_rm/stories.jsonl", [{"text": "w " * 20}, {"text": ""}, {"text": "w " * 30}])

    table = length_gap(tmp_path, {"rm": (grpo, recipe, tmp_path / "tuned_rm/stories.jsonl"),
                                  "principle": (tmp_path / "grpo_principle", recipe, tmp_path / "none.jsonl"),
                                  "composite": (grpo, recipe, tmp_path / "none.jsonl")}, words)

    assert set(table) == {"rm", "principle"}  # the composite reward is fitted on nothing
    assert table["rm"] == {"fitted_on": {"median": 85.0, "n": 4}, "grpo": {"max": 40, "mean": 35.0},
                           "evaluated": {"median": 25.0, "n": 2}, "ratio": 2.4}
    assert table["principle"]["fitted_on"] == {"median": 60.0, "n": 2}
    assert table["principle"]["grpo"] == {"max": 40, "mean": None} and table["principle"]["ratio"] is None
    text = render_length_gap(table)
    assert "| rm | 85 (n 4) | 35.0 / 40 | 25 (n 2) | 2.4x |" in text
    assert "| principle | 60 (n 2) | — / 40 | — | — |" in text
