"""The second paper's signals as evaluation metrics: the reward model's excellence verdict is the
reward function's own value against the threshold the trainer saved; signals need a threshold;
agreement counts only stories both signals judged."""

from __future__ import annotations

import json

import pytest
from test_eval_cli import Fakes, evaluate, rows, write_stories

from eval.signals import Signals, agreement, rm_threshold
from generate.common.errors import UsageError
from generate.prompts import load_prompts
from rewards import RewardContext
from rewards.reward_model import reward_model
from tests.curation.fakes import save_tiny_reward_model


@pytest.fixture(scope="module")
def rm_run(tmp_path_factory):
    run = save_tiny_reward_model(tmp_path_factory.mktemp("rm_run"), max_positions=1024)
    (run / "metrics.json").write_text(json.dumps({"threshold": 0.0}))
    return run


def test_evaluation_reports_the_reward_models_scores_and_verdicts(tmp_path, rm_run, counting_embedder,
                                                                  isolated_cache):
    out = evaluate(write_stories(tmp_path), tmp_path / "eval", Fakes(), counting_embedder, no_judge=True,
                   reward_model=str(rm_run))
    scored = rows(out)
    prompts = [load_prompts().writer_messages(r_prompt) for r_prompt in ["Colonists on a comet discover that the "
                                                                          "ice remembers."] * len(scored)]
    texts = {json.loads(line)["story_id"]: json.loads(line)["text"]
             for f in ("review", "single") for line in (tmp_path / f / "stories.jsonl").read_text().splitlines()}
    direct = reward_model(prompts, [[{"role": "assistant", "content": texts[r["story_id"]]}] for r in scored],
                          context=RewardContext(), model_dir=str(rm_run))
    assert [r["rm_score"] for r in scored] == pytest.approx(direct, abs=1e-5)  # the reward's own values
    assert [r["rm_good"] for r in scored] == [float(v >= 0.0) for v in direct]
    summary = json.loads((out / "summary.json").read_text())
    assert {"rm_good", "rm_score"} <= {m["key"] for m in summary["metrics"]}
    assert summary["frameworks"]["review"]["rm_good"]["n"] == 2
    provenance = json.loads((out / "manifest.json").read_text())["provenance"]["signals"]
    assert provenance["reward_model"] == str(rm_run) and provenance["rm_threshold"] == 0.0


def test_a_reward_model_without_its_threshold_is_refused(tmp_path):
    save_tiny_reward_model(tmp_path / "rm")
    with pytest.raises(UsageError, match="no decision threshold"):
        rm_threshold(tmp_path / "rm")
    with pytest.raises(UsageError, match="no decision threshold"):
        Signals(load_prompts(), principles=None, judge="x", reward_model=str(tmp_path / "rm"))


def test_agreement_counts_only_stories_both_signals_judged():
    got = agreement([{"principle_good": 1.0, "rm_good": 1.0}, {"principle_good": 0.0, "rm_good": 1.0},
                     {"principle_good": 1.0, "rm_good": None}, {"principle_good": None, "rm_good": 0.0}])
    assert got == {"principle_excellence": pytest.approx(2 / 3), "rm_excellence": pytest.approx(2 / 3),
                   "agreement": 0.5, "n_both": 2}
    assert agreement([{"rm_good": 1.0}])["principle_excellence"] is None
