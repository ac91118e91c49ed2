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


def test_resuming_with_a_reward_model_retrained_into_the_same_directory_is_refused(tmp_path, rm_run,
                                                                                   counting_embedder, isolated_cache):
    """Provenance names the reward model by its weights, not its path: a model retrained in place
    would otherwise mix old and new scores in one evaluation."""
    import shutil

    import torch
    from transformers import AutoModelForSequenceClassification

    rm = tmp_path / "rm"
    shutil.copytree(rm_run, rm)
    review, single = write_stories(tmp_path)
    evaluate([review], tmp_path / "eval", Fakes(), counting_embedder, no_judge=True, reward_model=str(rm))
    model = AutoModelForSequenceClassification.from_pretrained(rm / "merged")
    with torch.no_grad():
        model.score.weight.mul_(-1.0)  # "retrained": other weights, same directory, same threshold
    model.save_pretrained(rm / "merged")
    with pytest.raises(UsageError, match="signals"):
        evaluate([review, single], tmp_path / "eval", Fakes(), counting_embedder, no_judge=True, reward_model=str(rm))
    record = json.loads((tmp_path / "eval" / "manifest.json").read_text())["provenance"]["signals"]["rm_record"]
    assert len(record["weights_sha256"]) == 64 and record["threshold"] == 0.0


def test_principles_are_judged_in_the_mode_and_orders_their_optimisation_recorded(tmp_path, monkeypatch):
    import eval.signals as signals

    path = tmp_path / "principles.yaml"
    path.write_text("principles: [Be vivid., Be concrete.]\ndetector: {model: m, verdict: logprob, orders: 1}\n"
                    "heldout: {auc: 0.7}\n")
    loaded = []
    monkeypatch.setattr(signals.PrincipleScorer, "load", classmethod(lambda cls, *a: loaded.append(a)))
    sig = Signals(load_prompts(), principles=str(path), judge="j", reward_model=None)
    sig.principle_scorer  # noqa: B018 - loads it
    assert loaded == [(str(path), "j", "logprob", 1)]
    record = sig.fingerprint()["principles_record"]
    assert (record["mode"], record["orders"], record["heldout"]) == ("logprob", 1, {"auc": 0.7})
    path.write_text("principles: [Be vivid.]\n")  # the unoptimised starting set records none: logprob, both orders
    assert Signals(load_prompts(), principles=str(path), judge="j", reward_model=None).principle["orders"] == 2


def test_confounds_are_each_signals_rank_correlation_with_length_and_novelty():
    from eval.signals import confound_table, render_confounds

    rows = [{"rm_score": float(i), "words": 10 * i, "kl": -float(i), "novelty_cos": 0.5, "volume_gain": None}
            for i in range(5)]
    table = confound_table(rows)
    assert set(table) == {"rm_score"}  # only the signals that were measured
    assert table["rm_score"]["words"] == {"rho": 1.0, "n": 5} and table["rm_score"]["kl"]["rho"] == -1.0
    assert table["rm_score"]["novelty_cos"]["rho"] is None and table["rm_score"]["volume_gain"]["n"] == 0
    assert "| rm_score | +1.00 (n 5) | -1.00 (n 5) | — | — |" in render_confounds(table)


def test_signal_one_is_the_curation_verdict_on_each_story(tmp_path, counting_embedder, isolated_cache, monkeypatch):
    """`--curation-verdict`: each story gets the curation framework's own verdict (the scorer the
    curation pipeline uses), an empty story is bad without a call, and the manifest names the
    agents' settings so a resume or a comparison with other ones is refused."""
    from tests.curation.fakes import CurationBackend, model_of, story_of

    monkeypatch.delenv("SCIFI_REFERENCE_DIR", raising=False)  # no corpus: the agents read no passages
    files = write_stories(tmp_path)
    review = files[0]
    rows_in = [json.loads(line) for line in review.read_text().splitlines()]
    rows_in[0]["text"] = "A brilliant comet sang of its drowned colonists."
    rows_in[1]["text"] = ""
    review.write_text("".join(json.dumps(r) + "\n" for r in rows_in))
    fakes = Fakes()
    backend = CurationBackend()
    fakes.models["hf:fake-judge"] = model_of(backend)
    out = evaluate(files, tmp_path / "eval", fakes, counting_embedder, no_judge=True, curation_verdict=True)
    verdicts = {r["story_id"]: r["curation_good"] for r in rows(out)}
    assert verdicts == {"review/p1/humanistic": 1.0, "review/p1/ecological": 0.0, "single/p1/single": 0.0}
    assert backend.requests and all(story_of(r) for r in backend.requests)  # the empty story: never asked
    summary = json.loads((out / "summary.json").read_text())
    assert "curation_good" in {m["key"] for m in summary["metrics"]}
    fingerprint = json.loads((out / "manifest.json").read_text())["provenance"]["signals"]["curation"]
    assert fingerprint["verdict"] == "logprob" and fingerprint["k"] == 0  # no corpus here: no passages, recorded
