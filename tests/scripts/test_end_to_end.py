"""The one-command story's own logic: which prompts every run is evaluated on, and that they never
include a training prompt. (The flow itself is GRPO plus four generations: far too slow for tests;
its parts are tested where they live.)"""

import json

import pytest

from eval.rubric import load_rubric
from generate.common.errors import UsageError
from generate.datasets import Task, load_dataset, spread_over_aspects
from train.split import split_tasks


@pytest.fixture(scope="module")
def story():
    import train.story

    return train.story


@pytest.fixture(scope="module")
def split():
    tasks = load_dataset("default")
    s = split_tasks(tasks, eval_fraction=0.2, seed=0, dataset="default")
    return s.select(tasks, "train"), s.select(tasks, "eval")


def test_spread_over_aspects_takes_aspects_in_turn():
    tasks = [Task(f"{a}-{i}", a, f"prompt {a} {i}") for a in "abc" for i in range(3)]
    assert [t.id for t in spread_over_aspects(tasks, 5)] == ["a-0", "b-0", "c-0", "a-1", "b-1"]
    assert len(spread_over_aspects(tasks, None)) == 9 and spread_over_aspects(tasks, 0) == []
    with pytest.raises(ValueError, match="negative"):
        spread_over_aspects(tasks, -3)  # as a slice: all but the last three


def test_heldout_prompts_are_the_split_and_not_trained_on(story, split):
    train, heldout = split
    prompts = story.evaluation_prompts("heldout", None, train, heldout)
    assert {t.id for t in prompts} == {t.id for t in heldout}
    assert not {t.prompt for t in prompts} & {t.prompt for t in train}


def test_scifi100_subset_spans_aspects(story, split, scifi100_path, monkeypatch):
    monkeypatch.setenv("SCIFI100_PATH", str(scifi100_path))
    prompts = story.evaluation_prompts("scifi100", 8, *split)
    assert len(prompts) == 8 and len({t.aspect for t in prompts}) == 8


def test_a_training_prompt_in_the_evaluation_set_is_refused(story, split, tmp_path):
    train, heldout = split
    leaky = tmp_path / "leaky.jsonl"
    leaky.write_text(json.dumps({"id": "x", "aspect": "a", "prompt": "  " + train[3].prompt.upper()}) + "\n")
    with pytest.raises(UsageError, match="also training prompts"):
        story.evaluation_prompts(str(leaky), None, train, heldout)


def test_one_output_directory_holds_one_set_of_evaluation_prompts(story, split, tmp_path):
    train, heldout = split
    path = tmp_path / "eval_prompts.jsonl"
    story.write_prompts(heldout, path)
    story.write_prompts(heldout, path)  # resuming the same story is fine
    with pytest.raises(UsageError, match="other evaluation prompts"):
        story.write_prompts(heldout[:2], path)


def test_make_signals_curates_the_benchmarks_runs_only_when_they_cannot_answer_evaluation_prompts(tmp_path):
    """`make benchmark` answers prompts of the bundled set, held-out ones included: `make signals`
    hands them to the curator only when SciFi-100 is the evaluation set (else `review-lab story` would
    rightly refuse them, and `make signals` after `make benchmark` would stop)."""
    import os
    import shutil
    import subprocess
    from pathlib import Path

    if shutil.which("make") is None:
        pytest.skip("no make")
    makefile = Path(__file__).resolve().parents[2] / "Makefile"
    (tmp_path / "runs/benchmark/single").mkdir(parents=True)
    (tmp_path / "runs/benchmark/single/stories.jsonl").write_text("")
    env = {k: v for k, v in os.environ.items() if k != "SCIFI100_PATH"}

    def dry_run(**extra):
        return subprocess.run(["make", "-n", "-o", "setup", "-f", str(makefile), "signals"], cwd=tmp_path,
                              env={**env, **extra}, capture_output=True, text=True, check=True).stdout

    out = dry_run()
    assert "--eval-dataset heldout" in out and "--candidates" not in out
    assert "--allow-weak-signal" in out  # the 135M signals are weak by nature; the tables say so
    (tmp_path / "scifi100.json").write_text("[]")
    out = dry_run(SCIFI100_PATH=str(tmp_path / "scifi100.json"))
    assert "--candidates runs/benchmark/single/stories.jsonl" in out and "--eval-dataset scifi100" in out
    assert "--metrics" not in out
    assert "--metrics judge_average surprisal" in dry_run(METRICS="judge_average surprisal")  # planned claims


def test_signals_is_the_story_with_the_three_signals_by_default(story):
    """`review-lab signals` is `review-lab story --signals composite rm principle --out runs/signals`."""
    from dataclasses import fields
    from pathlib import Path

    from generate.common.config import parse_config

    cfg = parse_config(story.SignalsConfig, [])  # paths made absolute: `train.story_config.absolute_paths`
    assert cfg.signals == ["composite", "rm", "principle"] and cfg.out == str(Path("runs/signals").resolve())
    assert parse_config(story.SignalsConfig, ["--signals", "rm"]).signals == ["rm"]
    assert (parse_config(story.StoryConfig, []).signals, story.StoryConfig().out) == (
        ["composite"], str(Path("runs/story").resolve()))
    assert [f.name for f in fields(story.SignalsConfig)] == [f.name for f in fields(story.StoryConfig)]


def test_writers_on_weak_or_their_own_signals_are_marked_in_every_table(story, tmp_path):
    flow = story.Story(story.SignalsConfig(out=str(tmp_path)))
    (tmp_path / "grpo_rm").mkdir()
    (tmp_path / "grpo_rm" / "manifest.json").write_text(json.dumps({"weak_signal": True}))
    (tmp_path / "grpo_principle").mkdir()
    (tmp_path / "grpo_principle" / "manifest.json").write_text(json.dumps({"weak_signal": False}))
    labels = flow.labels({"rm_score", "principle_p", "kl"})
    assert labels["tuned_rm"] == "tuned_rm [weak signal; self-graded by RM]"
    assert labels["tuned_principle"] == "tuned_principle [self-graded by principles]"
    assert labels["base"] == "base" and labels["tuned"] == "tuned"
    assert flow.labels({"kl"})["tuned_principle"] == "tuned_principle"  # not scored by its signal: no mark


def test_the_story_warns_up_front_when_its_evaluation_is_too_small_for_any_claim(story, tmp_path, caplog):
    flow = story.Story(story.StoryConfig(out=str(tmp_path)))  # base, review, tuned, tuned_review
    with caplog.at_level("WARNING", logger=story.log.name):
        flow.warn_if_underpowered(8)
    # 3 runs against the base single agent, on 10 metrics each (homogenization is undefined for it).
    assert ("8 evaluation prompts are too few for any significant gain: over its 30 tests Holm needs "
            "p < 0.0017, and Wilcoxon's test on 8 prompts gives none below 0.0078 (--eval-limit 11 or more"
            ) in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger=story.log.name):
        flow.warn_if_underpowered(11)
    assert not caplog.records


def test_planned_claims_are_fewer_tests_that_8_prompts_can_carry(story, tmp_path, caplog):
    """`--metrics judge_average surprisal`: 6 tests, Holm's first call needs p < 0.0083, and 8
    prompts can give 0.0078, so the story does not call itself powerless."""
    flow = story.Story(story.StoryConfig(out=str(tmp_path), metrics=["judge_average", "surprisal"]))
    assert flow.tests() == 6
    with caplog.at_level("WARNING", logger=story.log.name):
        flow.warn_if_underpowered(8)
    assert not caplog.records
    assert story.Story(story.SignalsConfig(out=str(tmp_path))).tests() == 5 * 15  # as docs/signals.md counts


@pytest.mark.parametrize("config, metric", [("StoryConfig", "rm_score"), ("StoryConfig", "judge_avg"),
                                            ("SignalsConfig", "no_such_metric")])
def test_a_metric_the_story_does_not_score_is_refused_before_any_work(story, config, metric):
    from generate.common.config import parse_config

    with pytest.raises(UsageError, match=f"--metrics: this story scores no {metric}; choose from judge_average"):
        parse_config(getattr(story, config), ["--metrics", metric])
    assert parse_config(story.SignalsConfig, ["--metrics", "rm_score"]).metrics == ["rm_score"]


def test_the_story_compares_only_the_planned_metrics(story, tmp_path):
    """Both of the story's comparisons test the planned metrics and nothing else, so the warning's
    count of tests is the count `compare` corrects for."""
    from tests.eval.test_compare import REVIEW_USAGE, SINGLE_USAGE, write_run

    prompts = [f"p-{i:02d}" for i in range(8)]
    scores = {m: 3.0 for m in ("surprisal", "kl", "novelty_cos", "volume_gain", *load_rubric().aspects)}
    for name, stories, shift in [("base", 1, 0.0), ("review", 3, 0.1), ("tuned", 1, 0.3), ("tuned_review", 3, 0.4)]:
        per_prompt = {p: [{k: v + shift + 0.01 * i for k, v in scores.items()}] * stories
                      for i, p in enumerate(prompts)}
        write_run(tmp_path, name, per_prompt, usage=REVIEW_USAGE if stories == 3 else SINGLE_USAGE)
    flow = story.Story(story.StoryConfig(out=str(tmp_path), metrics=["judge_average", "surprisal"]))
    flow.report([], signals=False)
    for folder, tests in [("compare", 6), ("compare_in_review", 2)]:
        comparison = json.loads((tmp_path / folder / "comparison.json").read_text())
        assert set(comparison["gains"]) == {"judge_average", "surprisal"}
        assert comparison["power"]["tests"] == tests
    assert comparison["power"]["possible"]


def test_make_setup_installs_the_torch_that_pyproject_pins(tmp_path):
    """The Makefile installs torch first (so nothing else picks its build), at the version it reads
    from pyproject.toml: a pin bumped there cannot leave the set-up installing the old one."""
    import shutil
    import subprocess
    import tomllib
    from pathlib import Path

    if shutil.which("make") is None:
        pytest.skip("no make")
    repo = Path(__file__).resolve().parents[2]
    deps = tomllib.loads((repo / "pyproject.toml").read_text())["project"]["dependencies"]
    pin = next(d for d in deps if d.startswith("torch=="))
    out = subprocess.run(["make", "-n", "-B", "setup", f"VENV={tmp_path / 'venv'}"], cwd=repo, capture_output=True,
                         text=True, check=True).stdout
    assert f"pip install -q {pin} " in out
