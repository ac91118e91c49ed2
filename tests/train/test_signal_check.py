"""A learned signal proves itself before it trains a writer: held-out intervals by bootstrap over
prompts (reward model) or groups (principles), at least 2 held-out prompts or a refusal, and
GRPO's gate that refuses a signal whose interval includes chance unless --allow_weak_signal."""

from __future__ import annotations

import json

import pytest

from generate.common.errors import UsageError
from rewards.signal_check import check_signals, group_bootstrap, proven


def pair(prompt: str, good: str = "good", bad: str = "bad") -> dict:
    return {"prompt": [{"role": "user", "content": prompt}], "prompt_sha256": prompt * 8, "aspect": prompt,
            "chosen": [{"role": "assistant", "content": good}], "rejected": [{"role": "assistant", "content": bad}]}


class ScoreByText:
    """A reward model double: a fixed score per text."""

    def __init__(self, scores: dict[str, float]):
        self.scores = scores

    def score(self, prompts, texts, batch_size=16):
        return [self.scores[t] for t in texts]


def test_the_reward_models_accuracy_has_an_interval_over_held_out_prompts():
    from train.reward_model import pairwise_accuracy

    pairs = [pair("a"), pair("a"), pair("b", "bad", "good"), pair("c"), pair("d")]
    got = pairwise_accuracy(ScoreByText({"good": 1.0, "bad": 0.0}), pairs)
    assert (got["n"], got["prompts"], got["accuracy"]) == (5, 4, 0.8)
    lo, hi = got["ci95"]
    assert lo < 0.8 <= hi <= 1.0 and lo <= 0.5  # 4 prompts, one wrong: not yet above chance
    assert not proven({"ci95": got["ci95"], "groups": got["prompts"]})
    one = pairwise_accuracy(ScoreByText({"good": 1.0, "bad": 0.0}), [pair("a"), pair("a")])
    assert one["accuracy"] == 1.0 and one["ci95"] is None  # one prompt: no interval, never a proof


def test_a_reward_model_holds_out_at_least_two_prompts_or_refuses():
    from train.reward_model import split_pairs

    pairs = [pair(p) for p in "abcd"]
    train, held, split = split_pairs(pairs, 0.25, 0, "x")  # 0.25 of 4 is 1 prompt: 2 are held out
    assert len(split.eval) == 2 and len(held) == 2 and len(train) == 2
    with pytest.raises(UsageError, match="at least 3"):
        split_pairs([pair("a"), pair("b")], 0.5, 0, "x")


def test_group_bootstrap_resamples_whole_groups():
    assert group_bootstrap([[1.0]], lambda g: 1.0) is None
    ci = group_bootstrap([[1, 1], [1, 1], [0, 0]], lambda gs: sum(x for g in gs for x in g) / (2 * len(gs)))
    assert ci[0] == 0.0 and ci[1] == 1.0


def write_rm(tmp_path, ci, prompts=6):
    (tmp_path / "rm").mkdir(exist_ok=True)
    (tmp_path / "rm" / "metrics.json").write_text(json.dumps({"heldout": {"accuracy": 0.6, "ci95": ci,
                                                                          "prompts": prompts}}))
    return {"reward_model": {"model_dir": str(tmp_path / "rm")}}


def test_grpo_refuses_a_reward_model_whose_interval_includes_chance(tmp_path):
    options = write_rm(tmp_path, [0.3, 0.9])
    with pytest.raises(UsageError, match=r"CI \[0.300, 0.900\] includes chance.*--allow_weak_signal"):
        check_signals(["reward_model", "length"], options, allow_weak=False)
    found = check_signals(["reward_model", "length"], options, allow_weak=True)
    assert found == {"reward_model": {"metric": "pairwise accuracy", "value": 0.6, "ci95": [0.3, 0.9], "groups": 6,
                                      "proven": False}}


def test_grpo_trains_on_a_proven_signal_and_ignores_plain_rewards(tmp_path):
    options = write_rm(tmp_path, [0.55, 0.9])
    assert check_signals(["reward_model"], options, allow_weak=False)["reward_model"]["proven"]
    assert check_signals(["judge", "length"], {}, allow_weak=False) == {}


def test_a_checkpoint_inside_a_run_is_not_credited_with_the_final_models_measurement(tmp_path):
    """The run's metrics.json measured the final model; a `checkpoint-N` given as `model_dir` (the
    reward accepts one) passed GRPO's gate, and got the evaluation's threshold, on that evidence."""
    from eval.signals import rm_metrics

    options = write_rm(tmp_path, [0.6, 0.9])
    (tmp_path / "rm" / "merged").mkdir()
    (tmp_path / "rm" / "checkpoint-5").mkdir()
    merged = {"reward_model": {"model_dir": str(tmp_path / "rm" / "merged")}}
    assert check_signals(["reward_model"], merged, allow_weak=False)["reward_model"]["proven"]  # merged/: its run's
    assert check_signals(["reward_model"], options, allow_weak=False)["reward_model"]["proven"]
    checkpoint = {"reward_model": {"model_dir": str(tmp_path / "rm" / "checkpoint-5")}}
    with pytest.raises(UsageError, match="no held-out measurement"):
        check_signals(["reward_model"], checkpoint, allow_weak=False)
    assert rm_metrics(tmp_path / "rm" / "checkpoint-5") == {}


def test_principles_without_a_held_out_measurement_are_refused(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("principles: [Be vivid.]\n")  # the unoptimised starting set
    options = {"principle_judge": {"principles": str(path)}}
    with pytest.raises(UsageError, match="no held-out measurement"):
        check_signals(["principle_judge"], options, allow_weak=False)
    with pytest.raises(UsageError, match="no held-out measurement"):
        check_signals(["principle_judge"], {}, allow_weak=False)  # no file: the starting set
    path.write_text("principles: [Be vivid.]\nheldout: {auc: 0.7, auc_ci95: [0.52, 0.85], f1: 0.6, "
                    "f1_ci95: [0.4, 0.8], groups: 8}\n")
    assert check_signals(["principle_judge"], options, allow_weak=False)["principle_judge"]["proven"]


def test_the_optimisations_held_out_metrics_carry_intervals_over_groups():
    from rewards.principles.optimize import heldout_metrics
    from rewards.principles.protocols import Example

    held = [Example(f"{w}-{k}", "p", "r", label, group=f"w{w}") for w in range(6) for k, label in ((0, 1), (1, 0))]
    perfect = heldout_metrics(held, [0.9 if e.label else 0.1 for e in held], seed=0)
    assert perfect["auc"] == 1.0 and perfect["auc_ci95"] == [1.0, 1.0] and perfect["groups"] == 6
    noise = heldout_metrics(held, [0.5 + 0.01 * (i % 3) for i in range(len(held))], seed=0)
    assert noise["auc_ci95"][0] < 0.5 < noise["auc_ci95"][1] and noise["f1_ci95"] is not None


def test_allow_weak_signal_is_a_trl_style_script_argument():
    from trl import GRPOConfig, ModelConfig, TrlParser

    from train.args import ScriptArguments

    script, _, _ = TrlParser((ScriptArguments, GRPOConfig, ModelConfig)).parse_args_and_config(
        ["--config", "configs/grpo/smollm2_cpu_rm.yaml", "--allow_weak_signal", "true"])
    assert script.allow_weak_signal is True


def test_an_interval_over_fewer_than_six_groups_proves_nothing(tmp_path):
    """With 2 held-out prompts the bootstrap's interval is the two prompts' range: a signal at chance
    puts both above chance 1 time in 4, and passed GRPO's gate (`make signals`' reward model did:
    0.66, [0.60, 0.75], 2 prompts)."""
    two = group_bootstrap([[1, 1, 0], [1, 1, 1, 0]], lambda gs: sum(x for g in gs for x in g) / sum(map(len, gs)))
    assert two == [2 / 3, 0.75]  # the worst and the best prompt: no interval in any useful sense
    options = write_rm(tmp_path, [0.6, 0.75], prompts=2)
    with pytest.raises(UsageError, match=r"CI \[0.600, 0.750\], comes from 2 held-out groups: fewer than 6"):
        check_signals(["reward_model"], options, allow_weak=False)
    assert not check_signals(["reward_model"], options, allow_weak=True)["reward_model"]["proven"]
    write_rm(tmp_path, [0.6, 0.75], prompts=6)
    assert check_signals(["reward_model"], options, allow_weak=False)["reward_model"]["proven"]
    assert not proven({"ci95": [0.6, 0.75]})  # a record without its group count proves nothing


def test_the_story_marks_writers_by_todays_rule_over_their_recorded_evidence(tmp_path):
    """A GRPO manifest written when 2 prompts still passed says `weak_signal: false`; the tables
    judge its recorded evidence again, so the writer is marked as the rule now says."""
    from train.story import Story
    from train.story_config import SignalsConfig

    recorded = {"grpo": {}, "grpo_rm": {"reward_model": {"ci95": [0.6, 0.75], "prompts": 2, "proven": True}},
                "grpo_principle": {"principle_judge": {"ci95": [0.6, 0.9], "groups": 8, "proven": True}}}
    for run, signals in recorded.items():
        (tmp_path / run).mkdir()
        (tmp_path / run / "manifest.json").write_text(json.dumps({"weak_signal": False, "signals": signals}))
    labels = Story(SignalsConfig(out=str(tmp_path))).labels(set())
    assert (labels["tuned"], labels["tuned_rm"], labels["tuned_principle"]) == (
        "tuned", "tuned_rm [weak signal]", "tuned_principle")
