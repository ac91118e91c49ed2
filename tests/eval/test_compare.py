"""Run comparison: paired statistics on literal data, and synthetic runs with known gains."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from eval.compare import compare, inference_cost, load_run, parse_run_spec, prompt_means, story_value
from eval.compare.report import render_markdown
from eval.metrics.catalog import JUDGE_AVERAGE, RULE_METRICS, Catalog
from eval.rubric import load_rubric
from eval.stats import paired_bootstrap_ci, paired_test, significant, summarize, wilcoxon_p
from generate.common.errors import UsageError
from generate.common.manifest import sha256_text

REPO = Path(__file__).resolve().parents[2]
RUBRIC = load_rubric()
JUDGE_METRICS = tuple(RUBRIC.aspects)
NOVELTY_METRICS = tuple(m.key for m in RULE_METRICS)
METRICS = (*JUDGE_METRICS, *NOVELTY_METRICS)
DEFAULT_METRICS = (JUDGE_AVERAGE, *METRICS)
PROMPTS = [f"p-{i:02d}" for i in range(40)]
SINGLE_USAGE = {"calls": 1, "prompt_tokens": 100, "completion_tokens": 400}
REVIEW_USAGE = {"calls": 9, "prompt_tokens": 3000, "completion_tokens": 1500}


# --- eval.stats on literal data ---------------------------------------------------------------

@pytest.mark.parametrize("c", [0.5, -2.0, 0.0])
def test_bootstrap_ci_of_a_constant_difference_is_that_constant(c):
    low, high = paired_bootstrap_ci([c] * 12, n_boot=200)
    assert low == pytest.approx(c) and high == pytest.approx(c)


def test_bootstrap_ci_is_seeded_and_matches_the_normal_approximation():
    d = np.random.default_rng(1).normal(1.0, 2.0, size=400)
    ci = paired_bootstrap_ci(d, n_boot=4000, seed=3)
    assert ci == paired_bootstrap_ci(d, n_boot=4000, seed=3)
    se = d.std(ddof=1) / np.sqrt(d.size)
    assert ci[0] == pytest.approx(d.mean() - 1.96 * se, abs=0.25 * se)
    assert ci[1] == pytest.approx(d.mean() + 1.96 * se, abs=0.25 * se)


def test_bootstrap_ci_does_not_depend_on_the_memory_block_size(monkeypatch):
    d = np.random.default_rng(2).normal(size=37)
    whole = paired_bootstrap_ci(d, n_boot=1001, seed=5)
    monkeypatch.setattr("eval.stats._MAX_BLOCK_VALUES", 100)  # blocks of 2 resamples
    assert paired_bootstrap_ci(d, n_boot=1001, seed=5) == whole


@pytest.mark.parametrize("diffs, expected", [
    (list(range(1, 11)), 2 / 2**10),  # all ten positive: the exact two-sided p is 2 / 2^n
    ([0.0, 0.0, 0.0], 1.0),  # no difference at all: scipy cannot rank, we report p = 1
    ([0.7], None),  # a single pair: no test
    ([], None),
    ([1.0, -1.0, 2.0, -2.0, 3.0, -3.0], 1.0),  # perfectly symmetric differences
])
def test_wilcoxon_p(diffs, expected):
    p = wilcoxon_p(diffs)
    assert p == (None if expected is None else pytest.approx(expected))


@pytest.mark.parametrize("values, mean, std, n", [
    ([], None, None, 0),
    ([4.0], 4.0, None, 1),
    ([1.0, 3.0], 2.0, np.sqrt(2.0), 2),
    ([1.0, None, 3.0, float("nan")], 2.0, np.sqrt(2.0), 2),
])
def test_summarize(values, mean, std, n):
    s = summarize(values)
    assert (s.mean, s.n) == (mean, n)
    assert s.std == (None if std is None else pytest.approx(std))
    # The standard error of the mean is reported beside the std, never instead of it.
    assert s.se == (None if std is None else pytest.approx(std / np.sqrt(n)))


def test_a_prompt_s_stories_do_not_count_as_independent_evidence():
    rng = np.random.default_rng(4)
    prompts = [f"p{i}" for i in range(10)]
    means = rng.normal(3.0, 0.5, size=10)
    once = summarize(list(means), prompts)
    # Three stories per prompt that all score the prompt's value: no more precise than one each.
    thrice = summarize([m for m in means for _ in range(3)], [p for p in prompts for _ in range(3)])
    assert (thrice.mean, thrice.n, thrice.n_clusters) == (pytest.approx(once.mean), 30, 10)
    assert thrice.se == pytest.approx(once.se) == pytest.approx(np.std(means, ddof=1) / np.sqrt(10))
    # Stories that vary around their prompt's value: the se of the prompt means, by balance.
    noisy = [m + e for m in means for e in (-0.2, 0.0, 0.2)]
    assert summarize(noisy, [p for p in prompts for _ in range(3)]).se == pytest.approx(once.se)
    # Unbalanced, with a missing value: the CR1 formula by hand.
    values, groups = [1.0, 2.0, None, 4.0, 6.0], ["a", "a", "a", "b", "c"]
    mean = 13 / 4
    sums = [(1 - mean) + (2 - mean), 4 - mean, 6 - mean]
    s = summarize(values, groups)
    assert (s.n, s.n_clusters) == (4, 3)
    assert s.se == pytest.approx(np.sqrt(3 / 2 * sum(t * t for t in sums)) / 4)
    assert summarize([1.0, 2.0], ["a", "a"]).se is None  # one prompt says nothing about others


def test_significance_needs_both_the_ci_and_the_adjusted_p_value():
    test = paired_test([1.0] * 10, n_boot=100)
    assert significant(test.ci_low, test.ci_high, test.p_value, 0.05)
    assert not significant(test.ci_low, test.ci_high, 0.06, 0.05)  # the adjusted p decides
    assert not significant(-0.1, 0.4, 0.001, 0.05)  # a CI across 0 claims nothing
    # One pair: the CI [1, 1] excludes 0 but no p-value exists, so nothing is claimed.
    single = paired_test([1.0], n_boot=100)
    assert single.p_value is None and not significant(single.ci_low, single.ci_high, single.p_value, 0.05)


# --- synthetic runs ---------------------------------------------------------------------------

def prompt_text(prompt_id: str) -> str:
    return f"Write a story about {prompt_id}."


def H(prompt_id: str) -> str:
    """A prompt's identity in comparisons: the hash of its text."""
    return sha256_text(prompt_text(prompt_id))


def story(prompt: str, agent: str, values: dict, usage: dict, seconds: float) -> tuple[dict, dict]:
    """A (scores.jsonl, stories.jsonl) record pair; usage doubles as the prompt's total usage."""
    ids = {"story_id": f"x/{prompt}/{agent}", "prompt_id": prompt, "agent": agent}
    scores = {**ids, "prompt_sha256": H(prompt), "aspect": "a", "framework": "x", "model": "m",
              "surprisal_scorer": "scorer-m", **values}
    return scores, {**ids, "prompt": prompt_text(prompt), "text": "...", "usage": usage, "prompt_usage": usage,
                    "seconds": seconds}


PROVENANCE = {"judge": {"model": "judge-m", "mode": "logprob", "rubric_sha256": RUBRIC.sha256()},
              "scorer": "scorer-m", "reference": {"content_sha256": "c" * 64, "embedder": "e", "chunk_size": 250,
                                                  "sample": "all", "n_chunks": 4, "kl_alpha": 1.0},
              "catalog": RUBRIC.catalog().to_json()}


def write_manifests(run: Path, dataset: str = "d" * 64, **provenance) -> None:
    """The generation and evaluation manifests a run directory holds (the fields compare reads)."""
    (run / "manifest.json").write_text(json.dumps({"kind": "generation", "dataset_sha256": dataset}))
    (run / "eval" / "manifest.json").write_text(json.dumps({"kind": "evaluation",
                                                            "provenance": {**PROVENANCE, **provenance}}))


def write_run(root: Path, name: str, per_prompt: dict[str, list[dict]], usage=SINGLE_USAGE, seconds=2.0) -> Path:
    """A run directory with one score line and one story line per story of each prompt."""
    run = root / name
    (run / "eval").mkdir(parents=True)
    pairs = [story(p, f"agent{i}", v, usage, seconds)
             for p, stories in per_prompt.items() for i, v in enumerate(stories)]
    (run / "eval" / "scores.jsonl").write_text("".join(json.dumps(s) + "\n" for s, _ in pairs))
    (run / "stories.jsonl").write_text("".join(json.dumps(t) + "\n" for _, t in pairs))
    write_manifests(run)
    return run


def base_values(seed: int = 0) -> dict[str, dict[str, float]]:
    """Per prompt and metric, a base score ~ N(3, 0.5): prompts differ far more than runs do."""
    rng = np.random.default_rng(seed)
    return {p: {m: float(rng.normal(3.0, 0.5)) for m in METRICS} for p in PROMPTS}


def antithetic(rng, n: int, sd: float) -> np.ndarray:
    """Noise with mean exactly 0 and symmetric signs: z and -z, shuffled over the prompts."""
    z = rng.normal(0.0, sd, size=n // 2)
    return rng.permutation(np.concatenate([z, -z]))


def shifted(base, shift: dict[str, float], sd: float, seed: int) -> dict[str, dict[str, float]]:
    """Base plus a known per-metric shift plus zero-mean noise, so the sample gain is the shift."""
    rng = np.random.default_rng(seed)
    noise = {m: antithetic(rng, len(PROMPTS), sd) for m in METRICS}
    return {p: {m: base[p][m] + shift.get(m, 0.0) + noise[m][i] for m in METRICS} for i, p in enumerate(PROMPTS)}


BETTER = {**{m: 0.5 for m in METRICS}, "homogenization": -0.1}


@pytest.fixture
def runs(tmp_path: Path) -> dict[str, Path]:
    """base (1 agent), better (+0.5, 1 agent), same (+0 with noise), multi (+0.5, 3 agents), partial."""
    base = base_values()
    better = shifted(base, BETTER, 0.05, seed=1)
    better[PROMPTS[7]]["kl"] = None  # one missing value: prompt 7 leaves kl only
    same = shifted(base, {}, 0.3, seed=2)
    multi = shifted(base, {m: 0.5 for m in METRICS}, 0.05, seed=3)
    spread = (-0.2, 0.0, 0.2)  # the 3 agents differ, their per-prompt mean is the run's value
    partial = {p: [v] for p, v in shifted(base, {m: 0.5 for m in METRICS}, 0.05, seed=4).items()
               if p not in ("p-05", "p-17", "p-33")}
    partial["p-99"] = [dict.fromkeys(METRICS, 3.0)]
    return {
        "base": write_run(tmp_path, "base", {p: [v] for p, v in base.items()}),
        "better": write_run(tmp_path, "better", {p: [v] for p, v in better.items()}, REVIEW_USAGE, 18.0),
        "same": write_run(tmp_path, "same", {p: [v] for p, v in same.items()}),
        "multi": write_run(tmp_path, "multi", {
            p: [{m: x + s for m, x in v.items()} for s in spread] for p, v in multi.items()
        }, REVIEW_USAGE, 18.0),
        "partial": write_run(tmp_path, "partial", partial),
    }


def run_compare(runs: dict[str, Path], names, **kwargs):
    return compare([load_run(n, runs[n]) for n in names], n_boot=2000, seed=0, **kwargs)


def test_ci_covers_the_true_gain_and_pairing_makes_it_narrow(runs):
    result = run_compare(runs, ["base", "better", "multi"])
    for name in ("better", "multi"):
        g = result["gains"]["concepts"][name]
        assert g["gain"] == pytest.approx(0.5)
        assert g["ci_low"] < 0.5 < g["ci_high"]
        # Unpaired, the base's between-prompt SD of 0.5 would give a CI ~0.3 wide.
        assert g["ci_high"] - g["ci_low"] < 0.05
        assert g["significant"] and g["p_value"] < 1e-6 and g["n_pairs"] == 40


def test_multi_agent_stories_are_averaged_per_prompt(runs):
    multi = load_run("multi", runs["multi"])
    assert len(multi.scores) == 3 * len(PROMPTS)
    means = prompt_means(multi.scores, "logic", {H(p) for p in PROMPTS})
    assert len(means) == len(PROMPTS)
    result = run_compare(runs, ["base", "multi"])
    assert result["gains"]["logic"]["multi"]["n_pairs"] == 40
    assert result["describe"]["logic"]["multi"]["n"] == 120


def test_zero_gain_run_is_not_significant(runs):
    result = run_compare(runs, ["base", "same"])
    for metric in DEFAULT_METRICS:
        g = result["gains"][metric]["same"]
        assert g["gain"] == pytest.approx(0.0, abs=1e-12)
        assert g["ci_low"] < 0 < g["ci_high"]
        assert not g["significant"] and g["p_value"] > 0.5


def test_missing_prompts_are_paired_on_the_intersection_and_reported(runs):
    result = run_compare(runs, ["base", "partial", "better"])
    assert result["prompts"]["n_common"] == 37
    assert result["prompts"]["dropped"] == {"base": ["p-05", "p-17", "p-33"], "partial": ["p-99"],
                                            "better": ["p-05", "p-17", "p-33"]}
    g = result["gains"]["ethics"]["partial"]
    assert g["n_pairs"] == 37 and g["missing"] == [] and g["gain"] == pytest.approx(0.5, abs=0.03)
    assert "Dropped per run: `base` 3 (p-05, p-17, p-33); `partial` 1 (p-99)" in render_markdown(result)


def test_a_missing_value_drops_the_prompt_for_that_metric_only(runs):
    result = run_compare(runs, ["base", "better"])
    assert result["gains"]["kl"]["better"]["n_pairs"] == 39
    assert result["gains"]["kl"]["better"]["missing"] == ["p-07"]
    assert result["gains"]["surprisal"]["better"]["n_pairs"] == 40


def test_judge_average_needs_every_aspect():
    record = {"concepts": 4, "logic": 2, "characters": 1, "world_building": 3.0, "ethics": 5, "kl": 1.2}
    assert story_value(record, JUDGE_AVERAGE, JUDGE_METRICS) == pytest.approx(3.0)
    for missing in (None, float("nan")):
        assert story_value({**record, "ethics": missing}, JUDGE_AVERAGE, JUDGE_METRICS) is None
    assert story_value({k: v for k, v in record.items() if k != "logic"}, JUDGE_AVERAGE, JUDGE_METRICS) is None
    assert story_value({"concepts": None}, JUDGE_AVERAGE, JUDGE_METRICS) is None
    assert story_value({"kl": float("nan")}, "kl") is None


def test_inference_cost_counts_each_prompt_once():
    stories = [{"prompt_id": p, "prompt_usage": {"calls": 9, "prompt_tokens": inp, "completion_tokens": 1500},
                "seconds": sec} for p, inp, sec in (("a", 3000, 10.0), ("b", 2000, 20.0)) for _ in range(3)]
    stories.append({"prompt_id": "c", "prompt_usage": {"calls": 99, "prompt_tokens": 0, "completion_tokens": 0},
                    "seconds": 0.0})
    cost = inference_cost(stories, {"a", "b"})
    assert cost == {"n_prompts": 2, "calls": 9.0, "prompt_tokens": 2500.0, "completion_tokens": 1500.0,
                    "total_tokens": 4000.0, "seconds": 15.0}
    assert inference_cost([{"prompt_id": "a", "seconds": 1.0}], {"a"}) is None


def test_cost_ratios_and_gain_per_extra_cost(runs):
    result = run_compare(runs, ["base", "better", "same", "multi"])
    better, same = result["cost"]["better"], result["cost"]["same"]
    # better: 9 calls and 4500 tokens per prompt against base's 1 call and 500 tokens.
    assert better["x_base"] == pytest.approx({"calls": 9.0, "prompt_tokens": 30.0, "completion_tokens": 3.75,
                                              "total_tokens": 9.0, "seconds": 9.0})
    assert better["extra_base_tokens"] == pytest.approx(8.0)
    assert result["cost"]["multi"]["total_tokens"] == 4500.0  # 3 stories per prompt, counted once
    assert result["gains"]["concepts"]["better"]["gain_per_extra_base_tokens"] == pytest.approx(0.5 / 8)
    assert same["x_base"]["total_tokens"] == 1.0
    assert result["gains"]["concepts"]["same"]["gain_per_extra_base_tokens"] is None


def test_verdict_names_the_significant_winner(runs):
    result = run_compare(runs, ["base", "same", "better"])
    judge, homogenization = result["verdict"][0], result["verdict"][-1]
    assert judge.startswith("**Judge average** (higher is better): largest gain: `better`; "
                            "significantly better than `base`: `better`.")
    assert "at 9.0x base tokens" in judge
    assert "`same`:" in judge and "no significant difference, at 1.0x base tokens" in judge
    # Homogenization fell by 0.1: lower is better, so that is an improvement.
    assert homogenization.startswith("**Homogenization** (lower is better): largest gain: `better`; "
                                     "significantly better than `base`: `better`.")


def test_verdict_names_no_largest_gain_when_every_run_lost(runs, tmp_path):
    worse = shifted(base_values(), {m: -0.5 for m in METRICS}, 0.05, seed=5)
    runs["worse"] = write_run(tmp_path, "worse", {p: [v] for p, v in worse.items()})
    judge = run_compare(runs, ["base", "worse"])["verdict"][0]
    assert judge.startswith("**Judge average** (higher is better): no run gains over `base`; no run is significantly "
                            "better than `base`; significantly worse: `worse`.")


def test_verdict_says_when_nothing_is_significant(runs):
    result = run_compare(runs, ["base", "same"])
    assert all("no run is significantly better than `base`" in line for line in result["verdict"])
    assert len(result["verdict"]) == 1 + len(NOVELTY_METRICS)  # the judge average, then each rule metric


def test_verdict_says_when_a_metric_cannot_be_compared_with_base(runs):
    # A single-agent base has no homogenization (one story per prompt): nothing to pair with.
    scores = runs["base"] / "eval" / "scores.jsonl"
    rows = [{**json.loads(line), "homogenization": None} for line in scores.read_text().splitlines()]
    scores.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = run_compare(runs, ["base", "better"])
    assert result["verdict"][-1].startswith("**Homogenization** (lower is better): not comparable, no prompt has a "
                                            "value in both `base` and another run")
    assert result["verdict"][0].startswith("**Judge average** (higher is better): largest gain: `better`")


# --- multiplicity: the family of a comparison's tests -------------------------------------------

@pytest.fixture
def eight(tmp_path: Path) -> dict[str, Path]:
    """8 prompts, a run better on every metric on every prompt: each raw p is 2/2^8 = 0.0078."""
    base = {p: v for p, v in base_values().items() if p in PROMPTS[:8]}
    better = {p: {m: x + (-0.1 if m == "homogenization" else 0.5) + 0.01 * i for m, x in v.items()}
              for i, (p, v) in enumerate(base.items())}
    return {"base": write_run(tmp_path, "base", {p: [v] for p, v in base.items()}),
            "better": write_run(tmp_path, "better", {p: [v] for p, v in better.items()}, REVIEW_USAGE, 18.0)}


def test_a_small_sample_tested_many_times_claims_nothing_and_says_why(eight):
    result = run_compare(eight, ["base", "better"])
    gains = [g for by_run in result["gains"].values() for g in by_run.values()]
    assert len(gains) == result["power"]["tests"] == len(DEFAULT_METRICS)
    assert all(g["p_value"] == pytest.approx(2 / 2**8) for g in gains)
    # Uncorrected, every one of the tests would be a "significant" gain.
    assert not any(g["significant"] for g in gains)
    assert all(g["p_adjusted"] == pytest.approx(min(1.0, len(gains) * 2 / 2**8)) for g in gains)
    assert result["verdict"][0].startswith("**No difference can be significant in this comparison**: on 8 prompts "
                                           "the Wilcoxon test gives no p below 0.0078, and Holm over 11 tests needs "
                                           "p < 0.0045 for a first call. At least 9 prompts would be needed")
    assert "p = 0.0078, Holm 0.086, 8 prompts" in result["verdict"][1]
    markdown = render_markdown(result)
    assert "p (Holm): adjusted over the 11 tests of this comparison" in markdown
    assert "| Concepts | `better` | +0.535 | [+0.52, +0.55] | 0.0078 | 0.086 | 8 | 0 | no |" in markdown


def test_a_planned_test_or_no_correction_makes_the_same_gain_significant(eight):
    planned = run_compare(eight, ["base", "better"], metrics=["judge_average"])
    assert planned["gains"]["judge_average"]["better"]["significant"] and planned["power"]["possible"]
    assert planned["verdict"][0].startswith("**Judge average** (higher is better): largest gain: `better`; "
                                            "significantly better than `base`: `better`.")
    none = run_compare(eight, ["base", "better"], correction="none")
    assert all(g["significant"] for by_run in none["gains"].values() for g in by_run.values())
    assert none["gains"]["concepts"]["better"]["p_adjusted"] == none["gains"]["concepts"]["better"]["p_value"]
    assert "p-values not adjusted for the 11 tests" in render_markdown(none)
    bh = run_compare(eight, ["base", "better"], correction="bh")  # all p equal and below alpha: BH rejects all
    assert all(g["significant"] for by_run in bh["gains"].values() for g in by_run.values())


def test_the_family_is_every_test_of_the_comparison(runs):
    result = run_compare(runs, ["base", "better", "same"])
    tested = [g for by_run in result["gains"].values() for g in by_run.values() if g["p_value"] is not None]
    assert result["power"]["tests"] == len(tested) == 2 * len(DEFAULT_METRICS)
    # 40 prompts: the true gains of `better` survive Holm over 24 tests, the null run claims nothing.
    assert all(result["gains"][m]["better"]["significant"] for m in DEFAULT_METRICS)
    assert not any(result["gains"][m]["same"]["significant"] for m in DEFAULT_METRICS)
    assert result["config"]["correction"] == "holm" and result["correction"]["label"] == "Holm"


def test_an_unknown_correction_is_a_usage_error(runs):
    with pytest.raises(UsageError, match="unknown correction 'bonf'; valid: holm, bh, none"):
        run_compare(runs, ["base", "better"], correction="bonf")


def test_the_run_named_base_is_the_baseline_wherever_it_is(runs):
    assert run_compare(runs, ["better", "base"])["config"]["base"] == "base"
    assert run_compare(runs, ["better", "same"])["config"]["base"] == "better"


def test_scores_file_given_directly_still_finds_the_stories(runs):
    run = load_run("better", runs["better"] / "eval" / "scores.jsonl")
    assert run.stories is not None and len(run.stories) == 40


def test_a_story_scored_twice_counts_once_with_its_last_scores(runs):
    scores = runs["base"] / "eval" / "scores.jsonl"
    first = json.loads(scores.read_text().splitlines()[0])
    with open(scores, "a") as fh:
        fh.write(json.dumps({**first, "logic": 5.0}) + "\n")
    run = load_run("base", runs["base"])
    assert len(run.scores) == len(PROMPTS)
    assert prompt_means(run.scores, "logic", {first["prompt_sha256"]}) == {first["prompt_sha256"]: 5.0}


def test_a_run_without_stories_is_compared_at_unknown_cost(runs):
    (runs["better"] / "stories.jsonl").unlink()
    result = run_compare(runs, ["base", "better"])
    assert result["cost"]["better"] is None
    assert result["gains"]["concepts"]["better"]["gain_per_extra_base_tokens"] is None
    assert "at unknown cost" in result["verdict"][0]
    assert "| `better` | unknown (no usable stories.jsonl) |" in render_markdown(result)


@pytest.mark.parametrize("spec", ["review", "=runs/x", "review="])
def test_run_spec_needs_a_name_and_a_path(spec):
    with pytest.raises(UsageError):
        parse_run_spec(spec)


def test_unknown_metric_is_a_usage_error(runs):
    with pytest.raises(UsageError, match="unknown metric"):
        run_compare(runs, ["base", "better"], metrics=["creativity"])


# --- the CLI ----------------------------------------------------------------------------------

def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(Path(sys.executable).parent / "review-lab"), "compare", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120)


def test_cli_writes_all_outputs(runs, tmp_path):
    out = tmp_path / "cmp"
    proc = cli("--run", f"base={runs['base']}", "--run", f"better={runs['better']}",
               "--run", f"same={runs['same']}", "--out", str(out), "--boot", "500")
    assert proc.returncode == 0, proc.stderr
    assert {p.name for p in out.iterdir()} == {"comparison.json", "comparison.md", "gains.png", "cost_vs_gain.png",
                                               "manifest.json"}
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["kind"] == "comparison" and manifest["config"]["boot"] == 500
    assert json.loads((out / "comparison.json").read_text())["gains"]["kl"]["better"]["n_pairs"] == 39
    assert all((out / name).read_bytes().startswith(b"\x89PNG") for name in ("gains.png", "cost_vs_gain.png"))
    assert (out / "comparison.md").read_text() in proc.stdout
    assert "largest gain: `better`" in proc.stdout


def test_cli_exits_2_with_one_line_on_bad_input(runs, tmp_path):
    lonely = write_run(tmp_path, "lonely", {"q-1": [dict.fromkeys(METRICS, 3.0)]})
    out = str(tmp_path / "cmp")
    bad = [
        ["--run", f"base={tmp_path / 'nowhere'}", "--run", f"better={runs['better']}"],
        ["--run", str(runs["base"]), "--run", f"better={runs['better']}"],
        ["--run", f"base={runs['base']}", "--run", f"base={runs['better']}"],
        ["--run", f"base={runs['base']}", "--run", f"lonely={lonely}"],
        ["--run", f"base={tmp_path}", "--run", f"better={runs['better']}"],  # a directory without scores
        ["--run", f"base={runs['base']}", "--run", f"better={runs['better']}", "--correction", "bonferroni"],
    ]
    for args in bad:
        proc = cli(*args, "--out", out)
        assert proc.returncode == 2, (args, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (args, proc.stderr)


# --- refused mismatches and prompt identity (each fails on a compare that checks nothing) ----------

def _rewrite_scores(run: Path, change) -> None:
    path = run / "eval" / "scores.jsonl"
    rows = [change(json.loads(line)) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.mark.parametrize("field, provenance", [
    ("judge", {"judge": {**PROVENANCE["judge"], "model": "another-judge"}}),
    ("judge", {"judge": {**PROVENANCE["judge"], "rubric_sha256": "0" * 64}}),  # the rubric file changed
    ("judge", {"judge": {**PROVENANCE["judge"], "numerics": {"dtype": "float32"}}}),  # judged on another CPU
    ("judge", {"judge": {**PROVENANCE["judge"], "weights_sha256": "f" * 64}}),  # retrained at the same path
    ("reference", {"reference": {**PROVENANCE["reference"], "content_sha256": "e" * 64}}),
])
def test_runs_made_with_another_judge_or_reference_are_refused(runs, field, provenance):
    write_manifests(runs["better"], **provenance)
    with pytest.raises(UsageError, match=f"runs differ in {field}") as err:
        run_compare(runs, ["base", "better"])
    assert f"--allow-mismatch {field}" in str(err.value) and "\n" not in str(err.value)
    result = run_compare(runs, ["base", "better"], allow_mismatch=[field])
    assert field in result["mismatches"]
    assert f"the runs differ in {field}" in render_markdown(result)


def test_runs_from_another_dataset_are_refused(runs):
    write_manifests(runs["better"], dataset="f" * 64)
    with pytest.raises(UsageError, match="runs differ in dataset"):
        run_compare(runs, ["base", "better"])


def test_a_run_without_provenance_is_refused_not_assumed_equal(runs):
    (runs["better"] / "eval" / "manifest.json").unlink()
    with pytest.raises(UsageError, match="run 'better' records no judge"):
        run_compare(runs, ["base", "better"])


def test_surprisal_from_different_scorers_is_refused_then_left_out(runs):
    _rewrite_scores(runs["better"], lambda r: {**r, "surprisal_scorer": "hf:/runs/grpo/merged"})
    with pytest.raises(UsageError, match="runs differ in scorer"):
        run_compare(runs, ["base", "better"])
    result = run_compare(runs, ["base", "better"], allow_mismatch=["scorer"])
    assert result["gains"]["surprisal"]["better"]["gain"] is None
    assert result["gains"]["kl"]["better"]["gain"] is not None
    assert any(line.startswith("**Surprisal** (higher is better): not compared, the runs' surprisal was scored by "
                               "different models") for line in result["verdict"])


def test_prompts_pair_by_text_not_by_id(runs):
    # Same ids, other prompts (the bundled set and SciFi-100 share ids like strong-voice-01): no pair.
    _rewrite_scores(runs["better"], lambda r: {**r, "prompt_sha256": sha256_text("another prompt " + r["prompt_id"])})
    with pytest.raises(UsageError, match="no prompt is common"):
        run_compare(runs, ["base", "better"])
    # Other ids, the same prompts: paired.
    _rewrite_scores(runs["better"], lambda r: {**r, "prompt_id": "renamed-" + r["prompt_id"],
                                               "prompt_sha256": H(r["prompt_id"])})
    assert run_compare(runs, ["base", "better"])["gains"]["concepts"]["better"]["n_pairs"] == 40


def test_judge_columns_come_from_the_evaluations_rubric(runs, tmp_path):
    """A renamed aspect is a column under its new name, never a silent n/a under the old one."""
    renamed = Catalog.from_aspects({"science": "Science", **{a: a for a in JUDGE_METRICS[1:]}})
    for name in ("base", "better"):
        write_manifests(runs[name], catalog=renamed.to_json())
        _rewrite_scores(runs[name], lambda r: {**{k: v for k, v in r.items() if k != "concepts"},
                                               "science": r["concepts"]})
    result = run_compare(runs, ["base", "better"])
    assert "science" in result["config"]["metrics"] and "concepts" not in result["config"]["metrics"]
    assert result["gains"]["science"]["better"]["gain"] == pytest.approx(0.5)
    assert result["gains"][JUDGE_AVERAGE]["better"]["gain"] == pytest.approx(0.5)
    assert "| Science | `better` |" in render_markdown(result)


# --- runs that agree on having none; signals and scorer numerics by content -----------------------

@pytest.mark.parametrize("field", ["judge", "reference"])
def test_two_runs_that_both_have_no_judge_or_no_corpus_compare(runs, field):
    """`--no-judge` (or no corpus) records None: two such runs agree; one with and one without differ."""
    write_manifests(runs["base"], **{field: None})
    write_manifests(runs["better"], **{field: None})
    assert run_compare(runs, ["base", "better"])["mismatches"] == {}
    write_manifests(runs["better"])
    with pytest.raises(UsageError, match=f"runs differ in {field}"):
        run_compare(runs, ["base", "better"])


def _signals(sha: str) -> dict:
    return {"principles": "p.yaml", "principle_judge": "j", "reward_model": None, "rm_record": None,
            "principles_record": {"sha256": sha, "mode": "logprob", "orders": 2, "heldout": {"auc": 0.6}}}


def test_signal_metrics_made_with_different_principles_are_refused(runs):
    for name in ("base", "better"):
        _rewrite_scores(runs[name], lambda r: {**r, "principle_p": 0.5, "principle_good": 1.0})
    write_manifests(runs["base"], signals=_signals("a" * 64))
    write_manifests(runs["better"], signals={**_signals("a" * 64), "principles": "moved/p.yaml"})
    assert run_compare(runs, ["base", "better"])["mismatches"] == {}  # the same file elsewhere: the same signal
    write_manifests(runs["better"], signals=_signals("b" * 64))
    with pytest.raises(UsageError, match="runs differ in signals"):
        run_compare(runs, ["base", "better"])
    assert "signals" in run_compare(runs, ["base", "better"], allow_mismatch=["signals"])["mismatches"]


def test_surprisal_scored_in_other_numerics_is_refused(runs):
    write_manifests(runs["base"], scorer_numerics={"dtype": "bfloat16"})
    write_manifests(runs["better"], scorer_numerics={"dtype": "float32"})
    with pytest.raises(UsageError, match="runs differ in scorer"):
        run_compare(runs, ["base", "better"])
