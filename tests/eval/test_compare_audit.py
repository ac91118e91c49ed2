"""Audited faults of `review-lab compare`: a judge average over the aspects a story happens to have,
per-prompt metrics described per story, markers lost past the fifth metric, inputs named by path
only, and the cut-off share of each run; and the numbers of a multi-story run checked against numpy."""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib.axes
import numpy as np
import pytest

from eval.compare import compare, cut_off_share, load_run, story_value
from eval.compare.cli import main as compare_main
from eval.compare.plots import plot_cost_vs_gain
from eval.compare.report import render_markdown
from eval.metrics.catalog import JUDGE_AVERAGE, Catalog
from eval.stats import paired_differences, wilcoxon_p
from generate.common.manifest import sha256_bytes, sha256_text

ASPECTS = {"concepts": "Concepts", "ethics": "Ethics"}
USAGE = {"calls": 1, "prompt_tokens": 100, "completion_tokens": 400}


def write_run(root: Path, name: str, rows: list[dict], usage: dict = USAGE) -> Path:
    """A run directory: one score line and one story line per row ({prompt, agent, **values,
    and story fields such as `truncated`}), with the manifests compare reads."""
    run = root / name
    (run / "eval").mkdir(parents=True)
    scores, stories = [], []
    for row in rows:
        prompt, agent = row["prompt"], row.get("agent", "single")
        ids = {"story_id": f"{name}/{prompt}/{agent}", "prompt_id": prompt, "agent": agent}
        text = f"Write a story about {prompt}."
        scores.append({**ids, "prompt_sha256": sha256_text(text), "framework": name, "model": "m",
                       **{k: v for k, v in row.items() if k not in ("prompt", "agent", "truncated")}})
        story = {**ids, "prompt": text, "text": "...", "prompt_usage": usage, "seconds": 1.0}
        if "truncated" in row:
            story["truncated"] = row["truncated"]
        stories.append(story)
    (run / "eval" / "scores.jsonl").write_text("".join(json.dumps(r) + "\n" for r in scores))
    (run / "stories.jsonl").write_text("".join(json.dumps(r) + "\n" for r in stories))
    (run / "manifest.json").write_text(json.dumps({"dataset_sha256": "d" * 64}))
    provenance = {"judge": {"model": "j"}, "reference": None, "catalog": Catalog.from_aspects(ASPECTS).to_json()}
    (run / "eval" / "manifest.json").write_text(json.dumps({"provenance": provenance}))
    return run


def test_a_run_missing_its_weakest_aspect_on_some_stories_gains_nothing(tmp_path):
    """The audit's case: runs a and b agree on every score, but b lacks `concepts` (the lower
    aspect) on 10 of 20 stories. Averaging what each story has gave b a judge-average gain of
    0.25, "significant" (Holm p 0.0047); a story without every aspect has no average instead."""
    rng = np.random.default_rng(0)
    a_rows, b_rows = [], []
    for i in range(20):
        concepts, ethics = float(rng.uniform(1, 2)), float(rng.uniform(3, 4))
        a_rows.append({"prompt": f"p{i:02d}", "concepts": concepts, "ethics": ethics})
        b_rows.append({"prompt": f"p{i:02d}", "concepts": None if i % 2 else concepts, "ethics": ethics})
    runs = [load_run("a", write_run(tmp_path, "a", a_rows)), load_run("b", write_run(tmp_path, "b", b_rows))]
    result = compare(runs, metrics=[JUDGE_AVERAGE, "concepts", "ethics"], n_boot=500)
    gain = result["gains"][JUDGE_AVERAGE]["b"]
    assert gain["gain"] == pytest.approx(0.0) and not gain["significant"]
    assert gain["n_pairs"] == 10 and len(gain["missing"]) == 10
    assert result["describe"][JUDGE_AVERAGE]["b"]["n_missing"] == 10
    assert result["describe"][JUDGE_AVERAGE]["a"]["n_missing"] == 0
    assert "missing 10)" in render_markdown(result)
    assert not any(g["significant"] for by_run in result["gains"].values() for g in by_run.values())


def test_a_per_prompt_metric_is_described_over_prompts(tmp_path):
    """Homogenization is one value per prompt, repeated on each of its stories: 3 agents on 4
    prompts are 4 values, not 12 (as the evaluation's summary counts them)."""
    rows = [{"prompt": f"p{i}", "agent": f"agent{k}", "homogenization": 0.3 + 0.1 * i, "concepts": 2.0,
             "ethics": 3.0} for i in range(4) for k in range(3)]
    single = [{"prompt": f"p{i}", "concepts": 2.0, "ethics": 3.0} for i in range(4)]
    runs = [load_run("base", write_run(tmp_path, "base", single)),
            load_run("multi", write_run(tmp_path, "multi", rows))]
    described = compare(runs, metrics=["homogenization", "concepts"], n_boot=100)["describe"]
    assert described["homogenization"]["multi"]["n"] == 4
    assert described["homogenization"]["multi"]["std"] == pytest.approx(float(np.std([0.3, 0.4, 0.5, 0.6], ddof=1)))
    assert described["concepts"]["multi"]["n"] == 12  # a per-story metric still counts stories


def test_the_cut_off_share_is_read_from_the_stories_or_is_na(tmp_path):
    rows = [{"prompt": f"p{i}", "concepts": 2.0, "ethics": 3.0, "truncated": i < 1} for i in range(4)]
    old = [{"prompt": f"p{i}", "concepts": 2.0, "ethics": 3.0} for i in range(4)]
    runs = [load_run("base", write_run(tmp_path, "base", old)), load_run("new", write_run(tmp_path, "new", rows))]
    result = compare(runs, metrics=["concepts"], n_boot=100)
    assert result["cut_off"] == {"base": None, "new": pytest.approx(0.25)}
    cost_rows = [line for line in render_markdown(result).splitlines() if line.startswith("| `")]
    assert cost_rows[-2].endswith("| n/a |") and cost_rows[-1].endswith("| 25% |")
    assert cut_off_share([{"truncated": True}, {"truncated": False}, {}]) == pytest.approx(0.5)
    assert cut_off_share([{}]) is None


def test_the_comparison_manifest_hashes_every_file_it_read(tmp_path):
    rows = [{"prompt": f"p{i}", "concepts": 2.0 + i, "ethics": 3.0} for i in range(4)]
    base, other = write_run(tmp_path, "base", rows), write_run(tmp_path, "other", rows)
    out = tmp_path / "cmp"
    assert compare_main(["--run", f"base={base}", "--run", f"other={other}", "--out", str(out), "--boot", "50"]) == 0
    inputs = json.loads((out / "manifest.json").read_text())["inputs"]
    for name, run in (("base", base), ("other", other)):
        files = [run / "eval" / "scores.jsonl", run / "stories.jsonl"]
        assert inputs[name] == {str(f): sha256_bytes(f.read_bytes()) for f in files}


def test_every_novelty_metric_gets_a_marker_past_the_fifth(tmp_path, monkeypatch):
    rule = [f"m{i}" for i in range(7)]
    gain = {"gain": 0.1, "ci_low": 0.0, "ci_high": 0.2}
    comparison = {
        "config": {"base": "base", "metrics": rule, "runs": {"base": "x", "r": "y"}},
        "metrics": {m: {"label": m, "group": "rule", "higher_is_better": True} for m in rule},
        "describe": {m: {"base": {"std": 1.0}} for m in rule},
        "gains": {m: {"r": gain} for m in rule},
        "cost": {"base": None, "r": {"x_base": {"total_tokens": 2.0}}},
    }
    drawn = []
    real = matplotlib.axes.Axes.plot
    monkeypatch.setattr(matplotlib.axes.Axes, "plot",
                        lambda ax, *a, **k: drawn.append(k.get("label")) or real(ax, *a, **k))
    plot_cost_vs_gain(comparison, tmp_path / "cost.png")
    assert [label for label in drawn if label] == rule


# Eight prompts on which three agents' scores average exactly the single story's: b - 0.1, b, b + 0.1.
EQUAL_MEANS = (1.1, 1.35, 1.6, 1.85, 4.15, 4.4, 4.65, 4.9)


def test_a_prompt_whose_mean_equals_the_base_is_no_difference(tmp_path):
    """The audit's case: float rounding made each prompt's mean of the three stories 2e-16 below
    the base story (np.mean([4.3, 4.4, 4.5]) - 4.4 < 0), so eight equal prompts were eight losses:
    gain -7e-16, CI excluding 0, Wilcoxon p 0.0078, "significantly worse". Equal is a difference of 0."""
    base = [{"prompt": f"p{i}", "concepts": b, "ethics": 3.0} for i, b in enumerate(EQUAL_MEANS)]
    three = [{"prompt": f"p{i}", "agent": f"a{k}", "concepts": v, "ethics": 3.0} for i, b in enumerate(EQUAL_MEANS)
             for k, v in enumerate((round(b - 0.1, 2), b, round(b + 0.1, 2)))]
    runs = [load_run("base", write_run(tmp_path, "base", base)), load_run("three", write_run(tmp_path, "three", three))]
    gain = compare(runs, metrics=["concepts"], n_boot=500)["gains"]["concepts"]["three"]
    assert (gain["gain"], gain["ci_low"], gain["ci_high"], gain["p_value"]) == (0.0, 0.0, 0.0, 1.0)
    assert gain["n_pairs"] == 8 and not gain["significant"]


def test_equal_paired_differences_tie_and_zero_is_zero():
    third, other_third = np.mean([4.0, 4.0, 5.0]), np.mean([1.0, 1.0, 2.0])  # 4 + 1/3 and 1 + 1/3, rounded
    d = paired_differences([4.0, *[other_third] * 4, np.mean([4.3, 4.4, 4.5]), 3.0], [third, *[1.0] * 4, 4.4, 2.5])
    assert set(np.abs(d[:5])) == {-d[0]} and d[0] == pytest.approx(-1 / 3) and d[5] == 0.0 and d[6] == 0.5
    # Unrounded, the loss of 1/3 ranked below the four equal gains and the equal prompt counted as a
    # loss of rank 1: p 0.0625. Tied, and the equal prompt dropped, the test gives 0.1875.
    assert wilcoxon_p(d) == pytest.approx(wilcoxon_p([-1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 1.5])) == pytest.approx(0.1875)


def test_a_multi_story_run_is_averaged_described_and_powered_as_numpy_says(tmp_path):
    """Three skewed stories per prompt (mean and median differ), `ethics` missing on one prompt:
    the gain is the mean over prompts of (prompt mean - base), the se is clustered by prompt (with
    three stories on every prompt, the std of the prompt means over sqrt(prompts), not the std of the
    stories over sqrt(stories)), and the power is judged on the metric with the most pairs."""
    base = [{"prompt": f"p{i}", "concepts": 2.0 + i / 10, "ethics": 3.0} for i in range(6)]
    stories = {f"p{i}": [1.0 + i, 2.0 + i / 2, 6.0 + i * i / 4] for i in range(6)}
    multi = [{"prompt": p, "agent": f"a{j}", "concepts": v, "ethics": None if p == "p0" else 3.0 + v}
             for p, values in stories.items() for j, v in enumerate(values)]
    runs = [load_run("base", write_run(tmp_path, "base", base)), load_run("multi", write_run(tmp_path, "multi", multi))]
    result = compare(runs, metrics=["concepts", "ethics"], n_boot=200)
    prompt_means = np.array([np.mean(v) for v in stories.values()])
    gain = result["gains"]["concepts"]["multi"]
    assert gain["gain"] == pytest.approx(np.mean(prompt_means - [b["concepts"] for b in base]))
    described = result["describe"]["concepts"]["multi"]
    assert (described["n"], described["n_clusters"]) == (18, 6)
    assert described["mean"] == pytest.approx(np.mean(list(stories.values())))
    assert described["se"] == pytest.approx(np.std(prompt_means, ddof=1) / np.sqrt(6))
    assert result["gains"]["ethics"]["multi"]["n_pairs"] == 5
    assert result["power"]["max_pairs"] == 6


def test_a_boolean_field_is_no_metric_value():
    """JSON true is an int to Python; a flag averaged as 1.0 would be a number nobody scored."""
    assert story_value({"kl": True}, "kl") is None and story_value({"kl": False}, "kl") is None
    assert story_value({"kl": 1}, "kl") == 1.0


def test_a_baseline_that_used_no_tokens_has_no_cost_multiples(tmp_path):
    """A multiple of zero is undefined: the run's cost is kept, its multiples of the baseline are n/a."""
    rows = [{"prompt": f"p{i}", "concepts": 2.0 + i} for i in range(4)]
    zero = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
    runs = [load_run("base", write_run(tmp_path, "base", rows, zero)), load_run("b", write_run(tmp_path, "b", rows))]
    cost = compare(runs, metrics=["concepts"], n_boot=100)["cost"]["b"]
    assert cost["total_tokens"] == 500.0 and cost["x_base"]["total_tokens"] is None
    assert cost["x_base"]["seconds"] == 1.0 and cost["extra_base_tokens"] is None


def test_the_markdown_tables_show_the_numbers_they_name(tmp_path):
    """Score cells are mean ± std (se, n), the gain row ends in gain / (tokens × base - 1), and the
    cost row's multiples are calls, tokens and seconds over the baseline's, each from numpy here."""
    base_values, run_values = [1.0, 2.0, 3.0, 4.0], [2.0, 4.0, 5.0, 7.0]
    costly = {"calls": 4, "prompt_tokens": 1000, "completion_tokens": 500}  # 3x the tokens, 4x the calls
    runs = [load_run("base", write_run(tmp_path, "base", [{"prompt": f"p{i}", "concepts": v}
                                                          for i, v in enumerate(base_values)])),
            load_run("b", write_run(tmp_path, "b", [{"prompt": f"p{i}", "concepts": v}
                                                    for i, v in enumerate(run_values)], costly))]
    markdown = render_markdown(compare(runs, metrics=["concepts"], n_boot=100, correction="none"))
    std = np.std(run_values, ddof=1)
    assert f"{np.mean(run_values):.3g} ± {std:.3g} (se {std / 2:.3g}, n 4)" in markdown
    gain = np.mean(np.subtract(run_values, base_values))
    assert f"| no | {gain / 2:.3g} |" in markdown
    assert "| `b` | 4 | 4 | 1,000 | 500 | 1,500 | 1 | 4.00 | 3.00 | 1.00 | n/a |" in markdown
