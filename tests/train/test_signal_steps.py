"""The signal steps of `review-lab story` re-run their resumable commands instead of trusting
that an output file exists: a curation that ended with failed responses still has a
preferences.jsonl, and handing it on would train the reward model on partial pairs."""

from __future__ import annotations

from train import signals


def test_curation_and_optimisation_always_run_their_resumable_commands(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(signals, "run", lambda cmd, what: calls.append(what))
    curation = tmp_path / "curation"
    curation.mkdir()
    for name in ("manifest.json", "preferences.jsonl", "failed.jsonl"):  # a run that ended with failures
        (curation / name).write_text("{}\n")
    assert signals.curate(curation, [tmp_path / "stories.jsonl"], None) == curation / "preferences.jsonl"
    principles = tmp_path / "principles"
    (principles / "opt").mkdir(parents=True)
    (principles / "weak.jsonl").write_text("{}\n")
    (principles / "opt" / "principles.yaml").write_text("principles: []\n")
    signals.principles(principles, None, 2, "smollm2-135m-instruct")
    assert calls == ["curation", "principle optimisation"]  # weak labels are a finished file: kept
