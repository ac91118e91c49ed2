"""The Detector's requests and verdicts, and the Generator / Detector / Reflector protocols,
driven with scripted replies."""

from __future__ import annotations

import random

import pytest

from eval.scorers.principles.detector import Detector
from eval.scorers.principles.texts import State, load_templates
from generate.backends import Completion, SamplingParams, TokenLogprob
from generate.common.errors import UsageError
from rewards.principles.protocols import (
    Attempt,
    Check,
    Example,
    Limits,
    Step,
    aligned,
    attack,
    detect,
    diagnose,
    mistakes,
    revise,
    run_phases,
)
from tests.principles.fakes import digit_reply, good_digit, role_of, says_good

T = load_templates()
P = SamplingParams(64, 0.8, 0.95)
GOOD = Example("g1", "Write a story.", "The ship woke before its crew did.", 1, "w1")
BAD = Example("b1", "Write a story.", "The ship the ship the ship the ship.", 0, "w1")


def det(**kw) -> Detector:
    return Detector(("Stay on the task.", "Never repeat yourself."), T, **kw)


def test_logprob_detector_asks_both_label_orders_prefilled():
    requests = det().requests("Write a story.", "A tale. Score: 1")
    assert len(requests) == 2 and all(r.prefill == "Score:" and r.logprobs and r.params.temperature == 0
                                       for r in requests)
    assert [good_digit(r, T) for r in requests] == ["1", "0"]
    assert all("Score: 1" not in r.messages[0]["content"].split("<<<STORY-")[1] for r in requests)
    assert len(det(orders=1).requests("t", "x")) == 1
    assert det().requests("t", "  \x00 ") == [] and det().verdict([]) == 0.0  # empty: bad, no call


def test_both_orders_cancel_a_constant_digit_preference():
    requests = det().requests("t", "A tale.")
    assert det().verdict([digit_reply("1", 0.9), digit_reply("1", 0.9)]) == pytest.approx(0.5)
    assert det().verdict([says_good(True, r, T, 0.8) for r in requests]) == pytest.approx(0.8)
    assert det().verdict([says_good(False, r, T, 0.8) for r in requests]) == pytest.approx(0.2)


def test_verdict_failures_are_none_never_zero():
    no_digit = Completion(text="x", logprobs=[TokenLogprob("x", 0.0, {"x": 0.0, "a": -1.0})])
    assert det().verdict([digit_reply("1"), no_digit]) is None
    assert det().verdict([digit_reply("1"), Completion(text="", error="too long")]) is None
    assert det().verdict([digit_reply("1"), None]) is None


def test_sample_mode_is_binary_and_parse_failures_are_none():
    d = det(mode="sample", orders=1)
    (request,) = d.requests("t", "A tale.")
    assert request.prefill is None and request.params.temperature > 0 and request.seed is not None
    assert d.verdict([Completion(text="Thinking... Score: 1")]) == 1.0
    assert d.verdict([Completion(text="Score: 0")]) == 0.0
    assert d.verdict([Completion(text="I think it is good")]) is None
    with pytest.raises(UsageError):
        det(mode="sample", orders=2)


def replies_by_role(rules):
    """A `complete` function answering by role, recording (phase, roles) per batch."""
    batches = []

    def complete(requests, phase):
        roles = [role_of(r, T) for r in requests]
        batches.append((phase, roles))
        outs = [rules[role](r) for role, r in zip(roles, requests)]
        return [Completion(text=out) if isinstance(out, str) else out for out in outs]
    return complete, batches


def test_attack_caught_fooled_and_skipped():
    def run(generated, good_verdict):
        complete, _ = replies_by_role({"degrade": lambda r: generated,
                                       "detector": lambda r: says_good(good_verdict, r, T)})
        return run_phases({"a": attack(GOOD, "Swap two events.", det(), T, P, 7)}, ("generate", "detect"),
                          complete)["a"]

    caught = run("The crew woke before the ship did, oddly.", False)
    assert caught.caught and not caught.fooled and caught.text.startswith("The crew")
    assert run("The crew woke before the ship did, oddly.", True).fooled
    assert run("   ", True).skipped == "blank"
    assert run(GOOD.response, True).skipped == "unchanged"


def test_attack_writes_from_the_prompt_when_the_source_is_not_good():
    complete, batches = replies_by_role({"write_bad": lambda r: "A flat tale.", "detector": lambda r: says_good(False, r, T)})
    out = run_phases({"a": attack(BAD, "Be dull.", det(), T, P, 7)}, ("generate", "detect"), complete)["a"]
    assert batches[0] == ("generate", ["write_bad"]) and out.caught


def test_the_reflector_diagnoses_mistakes_of_both_kinds_in_turn():
    checks = [Check(GOOD, 0.9), Check(BAD, 0.9), Check(BAD, 0.7), Check(GOOD, 0.2), Check(BAD, 0.1), Check(BAD, None)]
    assert [c.wrong for c in checks] == [False, True, True, True, False, False]
    picked = mistakes(checks, 2, random.Random(0))
    assert sorted(c.label for c in picked) == [0, 1]  # one called good wrongly, one called bad wrongly
    assert len(mistakes(checks, 8, random.Random(0))) == 3

    complete, batches = replies_by_role({"diagnose": lambda r: "Principle 2 misses loops. " + "x " * 100})
    done = run_phases({"bad": diagnose(BAD, 0.9, det().principles, T, P, 2)}, ("diagnose",), complete)
    assert done["bad"].startswith("Principle 2") and done["bad"].endswith("...")
    assert batches == [("diagnose", ["diagnose"])]
    echo = "The judge called the response good (P(good) = 0.90), but it is bad."
    complete, _ = replies_by_role({"diagnose": lambda r: echo + "\n" + echo})  # only echoes the request: nothing
    assert run_phases({"x": diagnose(BAD, 0.9, det().principles, T, P, 2)}, ("diagnose",), complete) == {"x": None}


def test_phases_are_batched_one_at_a_time_across_roles():
    complete, batches = replies_by_role({"degrade": lambda r: "DAMAGED copy.",
                                         "detector": lambda r: says_good(False, r, T)})
    protocols = {("attack", i): attack(GOOD, "s", det(), T, P, i) for i in range(3)}
    protocols.update({("check", i): detect(GOOD, det()) for i in range(2)})
    done = run_phases(protocols, ("generate", "detect"), complete)
    assert batches == [("generate", ["degrade"] * 3), ("detect", ["detector"] * 10)]
    assert all(done[("attack", i)].caught for i in range(3)) and done[("check", 0)] < 0.5


def test_a_protocol_out_of_phase_order_is_a_bug():
    def backwards():
        yield Step("detect", [])
        yield Step("generate", [])

    with pytest.raises(RuntimeError, match="order"):
        run_phases({"x": backwards()}, ("generate", "detect"), lambda r, p: [])
    assert run_phases({"x": detect(GOOD, det(), "evaluate", response="")}, ("evaluate",), lambda r, p: []) == {"x": 0.0}
    gen = aligned(iter(()), ("a", "b"))  # ends at once: still one (empty) step per phase
    assert [s.phase for s in gen] == ["a", "b"]


STATE = State(("Stay on the task.", "Never repeat yourself."), "Swap two events.")
LIMITS = Limits(max_principles=4, max_words=20)
SEEDS = {"generator": 1, "feedback": 2, "reflector": 3}


def run_revise(attempts, checks, rules):
    complete, batches = replies_by_role(rules)
    out = run_phases({"r": revise(STATE, attempts, checks, T, LIMITS, P, SEEDS)}, ("revise", "reflect"), complete)
    return out["r"], batches


def test_caught_attacks_push_the_strategy_fooling_ones_the_principles():
    rules = {"subtler": lambda r: "<<<STORY-0123456789AB\nNew strategy:\nHide the swap inside a long sentence.\n"
                                  "A judge noticed the flaws in every one of them:",
             "feedback": lambda r: "- Check that causes come before effects.\n- Stay on the task."}
    rev, batches = run_revise([Attempt("a", "caught text", 0.1)], [], rules)
    assert batches == [("revise", ["subtler"])] and rev.state.principles == STATE.principles
    assert rev.state.strategy == "Hide the swap inside a long sentence."
    rev, batches = run_revise([Attempt("a", "caught", 0.1), Attempt("b", "FOOLING TEXT", 0.9)], [], rules)
    assert batches == [("revise", ["subtler", "feedback"])]
    assert rev.state.principles == ("Check that causes come before effects.", "Stay on the task.")
    assert [u["role"] for u in rev.updates] == ["generator", "feedback"] and all(u["used"] for u in rev.updates)


def test_the_reflector_rewrites_from_diagnoses_after_the_feedback():
    seen = []
    rules = {"feedback": lambda r: "- Check causes and effects.\n- Stay on the task.",
             "reflect": lambda r: seen.append(r.messages[0]["content"]) or "1. Loops are bad.\n2. Stay on the task."}
    rev, batches = run_revise([Attempt("b", "FOOLING", 0.9)], ["Principle 2 misses loops."], rules)
    assert batches == [("revise", ["feedback"]), ("reflect", ["reflect"])]
    assert "Check causes and effects." in seen[0] and "Principle 2 misses loops." in seen[0]
    assert rev.state.principles == ("Loops are bad.", "Stay on the task.")


def test_unusable_rewrites_are_recorded_and_the_old_text_kept():
    rules = {"subtler": lambda r: "Ok.", "feedback": lambda r: "I cannot help with that.",
             "reflect": lambda r: Completion(text="", error="too long for the context")}
    rev, _ = run_revise([Attempt("a", "c", 0.1), Attempt("b", "f", 0.9)], ["d"], rules)
    assert rev.state == STATE
    assert [(u["role"], u["used"]) for u in rev.updates] == [("generator", False), ("feedback", False),
                                                              ("reflector", False)]
    assert "usable principle" in rev.updates[1]["reason"] and rev.updates[2]["reason"] == "too long for the context"
    nothing, batches = run_revise([Attempt("a", "", skipped="blank")], [], rules)
    assert nothing.state == STATE and nothing.updates == [] and batches == []


def test_a_prefilling_backend_starts_principle_rewrites_inside_the_list():
    asked = []
    rules = {"subtler": lambda r: asked.append(r) or "Hide the swap in a long sentence.",
             "feedback": lambda r: asked.append(r) or "Causes come before effects.\n- Stay on the task.",
             "reflect": lambda r: asked.append(r) or "Loops are bad.\n- Stay on the task."}
    complete, _ = replies_by_role(rules)
    rev = run_phases({"r": revise(STATE, [Attempt("a", "c", 0.1), Attempt("b", "f", 0.9)], ["d"], T, LIMITS, P, SEEDS,
                                  prefill=True)}, ("revise", "reflect"), complete)["r"]
    assert [r.prefill for r in asked] == [None, "- ", "- "]
    assert rev.state.principles == ("Loops are bad.", "Stay on the task.") and all(u["used"] for u in rev.updates)
