"""The main job (benchmark) resumes, and the ablation sweep runs on a tiny grid, with the real
default model, a tiny reference corpus and very short stories."""

import json

import pytest

from generate.common.jsonl import read_jsonl

pytestmark = pytest.mark.slow


@pytest.fixture
def corpus(tmp_path):
    directory = tmp_path / "corpus"
    directory.mkdir()
    words = ["the", "ship", "drifted", "past", "a", "cold", "moon", "while", "the", "crew", "argued", "about", "the", "engine", "and", "the", "stars"]
    for n in range(3):
        (directory / f"work{n}.txt").write_text(" ".join(words[(i * (n + 1)) % len(words)] for i in range(700)))
    return directory


def test_benchmark_table_and_resume(tmp_path, corpus):
    from eval.benchmark import run as bench

    out = tmp_path / "bench"
    argv = ["--frameworks", "single", "review", "--limit", "1", "--max-new-tokens", "8", "--reference-dir",
            str(corpus), "--out", str(out)]
    assert bench.main(argv) == 0
    table = json.loads((out / "benchmark.json").read_text())
    assert set(table["frameworks"]) == {"single", "review"}
    assert [m["key"] for m in table["metrics"]][:5] == ["concepts", "logic", "characters", "world_building", "ethics"]
    journals = {fw: [r["key"] for r in read_jsonl(out / fw / "calls.jsonl")] for fw in ("single", "review")}
    # Review's 21 protocol calls (3 drafts, 2 rounds of 6 reviews and 3 revisions) against the single
    # agent's one, plus any re-ask of a reply that was blank once cleaned (8-token stories make them):
    # the cost counts every call the journal holds.
    assert len(journals["review"]) >= 21 and len(journals["single"]) >= 1
    assert table["frameworks"]["review"]["cost"]["x_single"]["calls"] == len(journals["review"]) / len(journals["single"])
    concepts = table["frameworks"]["review"]["metrics"]["concepts"]
    # three stories of one prompt: a spread over stories, no standard error over prompts
    assert (concepts["n"], concepts["n_clusters"], concepts["se"]) == (3, 1, None) and concepts["std"] is not None
    md = (out / "benchmark.md").read_text()
    assert "| review |" in md and "Tokens × single" in md and " ± " in md and "(se " not in md
    seconds = table["frameworks"]["review"]["seconds"]  # where the time went: generation and eval parts
    assert {"generation", "reference", "judge", "surprisal", "metrics"} <= set(seconds) and all(v >= 0 for v in seconds.values())
    assert "Where the time went:" in md and "judge (min)" in md
    assert json.loads((out / "manifest.json").read_text())["config"]["frameworks"] == ["single", "review"]
    scores = {fw: (out / fw / "eval" / "scores.jsonl").read_text() for fw in ("single", "review")}
    # Per-phase costs: the second review round asks about the same drafts as the first (the paper's
    # variant), so the engine takes much of its prompts from the prefix store.
    phases = json.loads((out / "review" / "manifest.json").read_text())["phases"]
    assert list(phases)[:3] == ["compose", "review-1", "revise-1"] and phases["review-1"]["calls"] == 6
    assert phases["review-2"]["reused_tokens"] > 0.5 * phases["review-2"]["prompt_tokens"]

    (out / "review" / "stories.jsonl").write_text("")  # as if interrupted before review's stories were saved
    assert bench.main(argv) == 0
    for fw, keys in journals.items():  # nothing regenerated: every call was replayed from the journal
        assert [r["key"] for r in read_jsonl(out / fw / "calls.jsonl")] == keys
    assert len(list(read_jsonl(out / "review" / "stories.jsonl"))) == 3
    for fw, text in scores.items():
        assert (out / fw / "eval" / "scores.jsonl").read_text() == text

    # Re-scored in the evaluation's own chunks and batch width, on the machine that evaluated them,
    # every judge score and surprisal comes back the same (`review-lab device-check`'s baseline).
    from eval import device_check as check

    assert check.main(["--run", str(out / "review"), "--chunks", "0", "--out", str(tmp_path / "check")]) == 0
    result = json.loads((tmp_path / "check" / "device_check.json").read_text())
    assert result["stories"] == 3 and result["max_abs_diff"] == 0.0
    assert result["agreement"]["concepts"]["n"] + result["agreement"]["concepts"]["missing_here"] == 3

    # Each framework is a run of its own: the benchmark's runs compare directly.
    from eval.compare import cli as compare

    assert compare.main(["--run", f"base={out / 'single'}", "--run", f"review={out / 'review'}",
                         "--out", str(tmp_path / "cmp"), "--boot", "100"]) == 0
    assert (tmp_path / "cmp" / "comparison.md").is_file()


def test_sweep_on_a_tiny_grid(tmp_path, corpus, caplog):
    import re

    caplog.set_level("WARNING", logger="generate.runner")
    from eval import sweep

    out = tmp_path / "sweep"
    assert sweep.main(["--grid", "rounds=1,3", "--grid", "agents=2,3", "--limit", "1", "--max-new-tokens", "8",
                       "--reference-dir", str(corpus), "--out", str(out)]) == 0
    results = json.loads((out / "sweep.json").read_text())["axes"]
    assert [p["value"] for p in results["rounds"]] == [1, 3]
    assert [p["summary"]["concepts"]["n"] for p in results["agents"]] == [2, 3]
    # Review makes N*R writing calls and N*(N-1)*(R-1) review calls per prompt, plus the re-asks of
    # replies that were blank once cleaned (legitimate calls, counted in the cost, and logged).
    reasked = sum(int(m.group(1)) for r in caplog.records
                  if (m := re.search(r"(\d+) repl(?:y|ies) blank after cleaning", r.getMessage())))
    calls = {("rounds", p["value"]): p["cost"]["calls"] for p in results["rounds"]}
    calls.update({("agents", p["value"]): p["cost"]["calls"] for p in results["agents"]})
    protocol = {("rounds", 1): 3, ("rounds", 3): 21, ("agents", 2): 10, ("agents", 3): 21}
    assert all(protocol[k] <= calls[k] <= protocol[k] + reasked for k in protocol)
    assert calls[("rounds", 3)] == calls[("agents", 3)]  # one run, shared
    assert sum(calls[k] - protocol[k] for k in [("rounds", 1), ("rounds", 3), ("agents", 2)]) == reasked
    # rounds=3 and agents=3 are both the default configuration: generated once, shared.
    assert results["rounds"][1]["run"] == results["agents"][1]["run"] == str(out / "default")
    assert sorted(d.name for d in out.iterdir() if d.is_dir()) == ["agents=2", "default", "rounds=1"]
    assert (out / "sweep_rounds.png").stat().st_size > 1000
    md = (out / "sweep.md").read_text()
    assert "## rounds" in md and "Tokens/prompt" in md and " ± " in md
    assert json.loads((out / "manifest.json").read_text())["config"]["grid"] == ["rounds=1,3", "agents=2,3"]


def test_sweep_rejects_a_bad_grid():
    from generate.common.errors import UsageError

    from eval import sweep

    with pytest.raises(UsageError, match="bad --grid"):
        sweep.parse_grid(["depth=1,2"])
