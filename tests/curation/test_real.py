"""Real models: curation with the bundled SmolLM2 in logprob mode, a RewardTrainer run on CPU, and the
`reward_model` reward inside a real GRPO step."""

from __future__ import annotations

import json
import math

import pytest

from generate.common.jsonl import read_jsonl
from tests.curation.test_retrieval_and_pairs import story, write_jsonl


@pytest.mark.slow
def test_real_curation_with_the_bundled_model(default_model, tmp_path, monkeypatch):
    from eval.embed import Embedder
    from rewards.curation import CurateConfig, Curator

    monkeypatch.setenv("SCIFI_CACHE_DIR", str(tmp_path / "cache"))
    stories = write_jsonl(tmp_path / "stories.jsonl", [
        story("a/1", "A comet visits", "The comet's ice sang as the drill bit in; Mira heard her mother's voice."),
        story("a/2", "A comet visits", "comet comet comet comet comet"),
        story("b/1", "A robot gardener", "Rust bloomed on the orbital garden while the last drone learned to grieve."),
    ])
    exemplars = write_jsonl(tmp_path / "exemplars.jsonl", [
        {"prompt": "A comet", "response": "Its tail combed the dark like silver hair over the sleeping colony."}])
    cfg = CurateConfig(candidates=[str(stories)], out=str(tmp_path / "out"), exemplars=str(exemplars), k=1,
                       list_tokens=40)
    prefs = Curator(cfg, model=default_model, embedder=Embedder()).run()
    rows = list(read_jsonl(tmp_path / "out" / "judgments.jsonl"))
    assert len(rows) == 3 and not (tmp_path / "out" / "failed.jsonl").exists()
    for row in rows:
        assert row["usage"]["calls"] == 10 and row["positive"]["items"] and row["negative"]["items"]
        assert len(row["judge"]["views"]) == 4 and 0 < row["judge"]["p"] < 1 and 0 < row["reflect"]["p"] < 1
        assert row["final"] in (0, 1) and row["overturned"] == (row["final"] != row["initial"])
    for pair in read_jsonl(prefs):
        assert pair["prompt_sha256"] == rows[0]["prompt_sha256"]  # only the comet prompt has two responses
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["counts"]["judged"] == 3 and manifest["counts"]["seconds_per_response"] > 0


def preference_rows() -> list[dict]:
    """Four prompts (four aspects), two pairs each: a sentence of prose beats a repetition loop."""
    rows = []
    for n, (aspect, topic) in enumerate([("a", "comet"), ("b", "robot"), ("c", "ocean"), ("d", "moon")]):
        prompt = [{"role": "user", "content": f"Writing task: a story about a {topic}."}]
        for k, good in enumerate([f"The {topic} hummed while Mira mended the sky.",
                                  f"Under the {topic}, the colony learned a new song."]):
            rows.append({"prompt": prompt, "chosen": [{"role": "assistant", "content": good}],
                         "rejected": [{"role": "assistant", "content": f"{topic} " * 12}],
                         "prompt_sha256": f"{n:064d}", "aspect": aspect, "prompt_id": topic})
    return rows


@pytest.fixture(scope="module")
def trained_rm(tmp_path_factory):
    """A few RewardTrainer steps on CPU through `train/reward_model.py`'s main."""
    from trl import ModelConfig, RewardConfig

    from train.reward_model import RMScriptArguments, main

    tmp = tmp_path_factory.mktemp("rm")
    prefs = write_jsonl(tmp / "preferences.jsonl", preference_rows())
    out = tmp / "run"
    training = RewardConfig(output_dir=str(out), use_cpu=True, bf16=False, max_steps=3, per_device_train_batch_size=2,
                            per_device_eval_batch_size=16, learning_rate=2e-4, lr_scheduler_type="cosine",
                            logging_steps=1, save_strategy="no", report_to="none", gradient_checkpointing=False,
                            max_length=256)
    model = ModelConfig(model_name_or_path="smollm2-135m-instruct", dtype="float32", use_peft=True,
                        lora_task_type="SEQ_CLS", lora_r=16, lora_alpha=32, lora_target_modules=["q_proj", "v_proj"])
    metrics = main(RMScriptArguments(preferences=[str(prefs)], eval_fraction=0.25), training, model)
    return out, metrics


@pytest.mark.slow
@pytest.mark.train
def test_reward_trainer_run_saves_a_model_and_its_heldout_accuracy(trained_rm):
    out, metrics = trained_rm
    assert (out / "adapter_config.json").is_file() and (out / "merged" / "config.json").is_file()
    split = json.loads((out / "split.json").read_text())
    assert len(split["eval"]) == 2 and not set(split["eval"]) & set(split["train"])  # 2 held out: an interval
    assert metrics["pairs"] == {"train": 4, "heldout": 4} and metrics["train_seconds"] > 0
    heldout = metrics["heldout"]
    margins = [m for ms in heldout["margins"].values() for m in ms]
    assert heldout["n"] == 4 and heldout["prompts"] == 2 and len(margins) == 4
    # The accuracy is the share of positive margins of the pairs it was computed on, inside its interval.
    assert heldout["accuracy"] == sum(m > 0 for m in margins) / 4
    assert heldout["mean_margin"] == pytest.approx(sum(margins) / 4, abs=1e-5)
    assert heldout["ci95"][0] <= heldout["accuracy"] <= heldout["ci95"][1]
    # The reward's scorer on the saved model reproduces trl's own evaluation (one eval batch).
    assert heldout["accuracy"] == metrics["trl_eval"]["eval_accuracy"]
    assert heldout["mean_margin"] == pytest.approx(metrics["trl_eval"]["eval_margin"], abs=1e-3)
    assert json.loads((out / "metrics.json").read_text()) == metrics
    assert json.loads((out / "manifest.json").read_text())["kind"] == "reward_model"


@pytest.mark.slow
@pytest.mark.train
def test_the_reward_model_reward_drives_a_real_grpo_step(trained_rm, tmp_path):
    from rewards import RewardContext, build_rewards
    from tests.train.conftest import one_grpo_step

    out, _ = trained_rm
    context = RewardContext()
    funcs = build_rewards(["reward_model", "length"], {"reward_model": {"model_dir": str(out)},
                                                       "length": {"target_words": 5}}, context=context)
    logged = one_grpo_step(tmp_path, funcs)
    assert math.isfinite(logged["rewards/reward_model/mean"]) and logged["rewards/reward_model/filled"] == 0
    assert len([k for k in context._resources if k[0] == "reward_model"]) == 1


@pytest.mark.slow
@pytest.mark.server
def test_curation_through_an_openai_compatible_server(llama_server, tmp_path):
    """No prefill on a server: the `Score:` line must come from the model itself and the verdict is
    read from the top logprobs after it. The 135M model writes no numbered list unprefilled (its
    Positive agent fails every time), so this run ablates the debate and exercises the verdicts; a
    response whose verdict the model never writes is recorded as failed with its reason."""
    from generate.common.errors import PartialFailure
    from rewards.curation import CurateConfig, Curator

    stories = write_jsonl(tmp_path / "stories.jsonl", [
        story("a/1", "A comet visits", "The comet's ice sang as the drill bit in."),
        story("a/2", "A comet visits", "The comet came. It was big.")])
    cfg = CurateConfig(candidates=[str(stories)], out=str(tmp_path / "out"), model="openai:smollm2", k=0,
                       without=["positive", "negative"], base_url=llama_server.base_url, api_key=llama_server.api_key)
    try:
        Curator(cfg).run()
    except PartialFailure:
        pass
    judged = list(read_jsonl(tmp_path / "out" / "judgments.jsonl"))
    failed = list(read_jsonl(tmp_path / "out" / "failed.jsonl"))
    assert len(judged) + len(failed) == 2
    assert all(f["reason"].split()[0] in ("judge", "reflect") for f in failed)
    assert all(0 <= j["judge"]["p"] <= 1 and len(j["judge"]["views"]) == 2 for j in judged)
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["backend"]["backend"] == "OpenAIBackend" and llama_server.api_key not in json.dumps(manifest)
