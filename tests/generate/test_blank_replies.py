"""A reply that is still blank after the re-asks fails its prompt: it is never written as a story,
never shown to a reviewer or reviser, and is recorded in failed.jsonl; a re-run retries it, with a
new seed for that call only. A request the backend refuses fails its prompt for good."""

import json

import pytest

from generate.cli import main
from generate.backends import Completion, Model
from generate.backends.model import GAVE_UP
from generate.common.cli import run_cli
from generate.datasets import load_dataset, spread_over_aspects
from generate.journal import derive_seed
from generate.runner import PromptsFailed, RunConfig, Runner
from tests.generate.fakes import RecordingEcho, Scripted

TASK_A, TASK_B = spread_over_aspects(load_dataset("default"), 2)
CHATTER = "Certainly! I'd be happy to help."  # blank once cleaned, as a story and as feedback


def texts(request) -> str:
    return "\n".join(m["content"] for m in request.messages)


def about_a(request) -> bool:
    return TASK_A.prompt in texts(request)


def run(tmp_path, backend, framework="review", name="run", **kw):
    kw.setdefault("limit", 2)
    kw.setdefault("rounds", 2)
    cfg = RunConfig(framework=framework, model="echo", out=str(tmp_path / name), **kw)
    runner = Runner(cfg, model=Model(backend))
    try:
        path = runner.run()
        assert not runner.failed
    except PromptsFailed as exc:  # raised only after every other prompt was written
        assert exc.failed == {**runner.failed, **runner.final} and exc.failed
        path = exc.stories
    return runner, [json.loads(line) for line in path.read_text().splitlines()]


def failures(tmp_path, name="run") -> list[dict]:
    path = tmp_path / name / "failed.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def comparable(stories, prompt_id):
    return [(s["agent"], s["text"], s["drafts"], s["feedback"]) for s in stories if s["prompt_id"] == prompt_id]


def is_compose(request, persona: str) -> bool:
    body = texts(request)
    return (about_a(request) and f"You are the {persona} Writer" in body and "current story" not in body
            and "fellow writer" not in body)


def test_a_story_blank_after_cleaning_fails_its_prompt_only(tmp_path):
    backend = Scripted(lambda r: "Here's my story:\n\n" if is_compose(r, "Humanistic") else None)
    runner, stories = run(tmp_path, backend)

    assert {s["prompt_id"] for s in stories} == {TASK_B.id}
    assert list(runner.failed) == [TASK_A.id]
    reason = runner.failed[TASK_A.id]
    assert "humanistic" in reason and "compose" in reason and "2 re-asks" in reason
    (record,) = failures(tmp_path)
    assert record["prompt_id"] == TASK_A.id and record["attempt"] == 0
    assert (record["agent"], record["role"], record["phase"], record["reasks"]) == ("humanistic", "write", "compose", 2)
    assert record["reason"] == reason
    # Asked once and re-asked twice with new seeds; then the prompt stopped: no review, no revision.
    asked = [r for r in backend.requests if is_compose(r, "Humanistic")]
    assert len(asked) == 3 and len({r.seed for r in asked}) == 3
    assert len([r for r in backend.requests if about_a(r)]) == 3 + 2
    # The other prompt of the chunk is exactly what a run without the blank produces.
    _, clean = run(tmp_path, RecordingEcho(), name="clean")
    assert comparable(stories, TASK_B.id) == comparable(clean, TASK_B.id)


def manifest_phases(tmp_path, name="run") -> dict:
    return json.loads((tmp_path / name / "manifest.json").read_text())["phases"]


def test_a_raw_blank_is_reasked_by_the_runner_alone_and_both_attempts_are_counted(tmp_path):
    """One layer re-asks (the runner): the blank attempt is one more call in the agent's usage, the
    prompt's and the phase's, with its tokens, instead of being overwritten inside the model."""
    asked = []

    def blank_once(request):
        if is_compose(request, "Humanistic") and not asked:
            asked.append(request)
            return ""  # scripted: 10 prompt tokens, 1 completion token; echo replies: 10 and 3
        return None

    backend = Scripted(blank_once)
    _, stories = run(tmp_path, backend, limit=1)
    _, clean = run(tmp_path, RecordingEcho(), name="clean", limit=1)
    assert len([r for r in backend.requests if is_compose(r, "Humanistic")]) == 2
    usage, clean_usage = ({s["agent"]: s["usage"] for s in runs} for runs in (stories, clean))
    assert usage["humanistic"] == {"calls": clean_usage["humanistic"]["calls"] + 1,
                                   "prompt_tokens": clean_usage["humanistic"]["prompt_tokens"] + 10,
                                   "completion_tokens": clean_usage["humanistic"]["completion_tokens"] + 1}
    assert usage["futuristic"] == clean_usage["futuristic"]
    assert stories[0]["prompt_usage"]["calls"] == clean[0]["prompt_usage"]["calls"] + 1
    compose = manifest_phases(tmp_path)["compose"]
    assert (compose["calls"], compose["prompt_tokens"], compose["completion_tokens"]) == (4, 40, 3 * 3 + 1)


def test_a_call_that_stays_blank_is_sent_once_plus_two_reasks(tmp_path):
    """Not 9 times (the model's 2 re-asks inside each of the runner's 3 tries): failed.jsonl's "2
    re-asks" is what happened, and its cost counts all 3 tries."""
    backend = Scripted(lambda r: "" if is_compose(r, "Humanistic") else None)
    run(tmp_path, backend)
    assert len([r for r in backend.requests if is_compose(r, "Humanistic")]) == 1 + 2
    (record,) = failures(tmp_path)
    assert record["reasks"] == 2 and "2 re-asks" in record["reason"]
    # Prompt A's compose: the blank call 3 times (10 + 1 tokens each), the two others once (10 + 3).
    assert record["prompt_usage"] == {"calls": 5, "prompt_tokens": 50, "completion_tokens": 3 * 1 + 2 * 3}


def is_review_by(request, persona: str) -> bool:
    body = texts(request)
    return about_a(request) and "Give this writer specific" in body and f"You are the {persona} Writer" in body


def test_a_blank_review_fails_the_prompt_and_never_reaches_a_reviser(tmp_path):
    backend = Scripted(lambda r: "  \n" if is_review_by(r, "Futuristic") else None)
    runner, stories = run(tmp_path, backend)

    assert {s["prompt_id"] for s in stories} == {TASK_B.id}
    (record,) = failures(tmp_path)
    assert (record["agent"], record["role"], record["phase"], record["reasks"]) == ("futuristic", "review", "review-1", 2)
    assert record["to"] in ("humanistic", "ecological")
    assert not [r for r in backend.requests if about_a(r) and "Revise your" in texts(r)]
    assert not any("no feedback" in texts(r) for r in backend.requests)
    assert runner.failed == {TASK_A.id: record["reason"]}


@pytest.mark.parametrize(("framework", "phase", "role"), [
    ("single", "write", "write"), ("teacher", "advice", "advice"), ("debate", "debate-1", "write"),
    ("discussion", "discussion-1", "write"), ("review", "compose", "write"),
])
def test_no_framework_lets_a_blank_through(tmp_path, framework, phase, role):
    backend = Scripted(lambda r: CHATTER if about_a(r) else None)
    runner, stories = run(tmp_path, backend, framework=framework)
    assert {s["prompt_id"] for s in stories} == {TASK_B.id}
    assert all(s["text"].strip() for s in stories)
    assert {(f["prompt_id"], f["phase"], f["role"]) for f in failures(tmp_path)} == {(TASK_A.id, phase, role)}
    assert list(runner.failed) == [TASK_A.id]


def test_a_request_the_backend_refuses_fails_its_prompt_at_once(tmp_path):
    refused = Completion(text="", prompt_tokens=9000, finish_reason="error", error="prompt exceeds the context")
    backend = Scripted(lambda r: refused if is_compose(r, "Humanistic") else None)
    runner, stories = run(tmp_path, backend)
    assert {s["prompt_id"] for s in stories} == {TASK_B.id}
    (record,) = failures(tmp_path)
    assert record["reasks"] == 0 and "prompt exceeds the context" in record["reason"]
    assert len([r for r in backend.requests if is_compose(r, "Humanistic")]) == 1
    journal = (tmp_path / "run" / "calls.jsonl").read_text()
    assert len(journal.splitlines()) == len(backend.requests) - 1  # a refusal is not a result to replay
    assert runner.final == {TASK_A.id: record["reason"]} and not runner.failed
    assert record["final"] and record["cause"] == "deterministic" and record["reseed"] == []
    # Refused, it would be refused again: the re-run does not retry it, and says so.
    again = Scripted(backend.rule)
    with pytest.raises(PromptsFailed, match="1 prompt\\(s\\) failed for good, not retried") as info:
        Runner(RunConfig(framework="review", model="echo", out=str(tmp_path / "run"), limit=2, rounds=2),
               model=Model(again)).run()
    assert not again.requests and list(info.value.failed) == [TASK_A.id]


def test_greedy_decoding_is_not_reasked(tmp_path):
    backend = Scripted(lambda r: CHATTER if about_a(r) else None)
    run(tmp_path, backend, framework="single", temperature=0.0)
    assert len([r for r in backend.requests if about_a(r)]) == 1
    assert failures(tmp_path)[0]["reasks"] == 0


def test_first_attempt_keeps_the_seed_derivation_of_existing_journals(tmp_path):
    backend = RecordingEcho()
    run(tmp_path, backend, framework="single", limit=1)
    (request,) = backend.requests
    assert request.seed == derive_seed(0, TASK_A.id, 0, 0)


def cli(tmp_path, backend, monkeypatch, capsys) -> tuple[int, str]:
    monkeypatch.setattr("generate.backends.load_model", lambda *a, **k: Model(backend))
    with pytest.raises(SystemExit) as exit_info:
        run_cli(main, ["--framework", "review", "--model", "hf:echo", "--limit", "2", "--rounds", "2",
                       "--out", str(tmp_path / "run")])
    return exit_info.value.code, capsys.readouterr().err


def test_cli_reports_failed_prompts_exits_1_and_a_rerun_retries_them(tmp_path, monkeypatch, capsys):
    blank = Scripted(lambda r: "Here's my story:" if is_compose(r, "Ecological") else None)
    code, err = cli(tmp_path, blank, monkeypatch, capsys)
    assert code == 1
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    failed_log = tmp_path / "run" / "failed.jsonl"
    kept = len((tmp_path / "run" / "calls.jsonl").read_text().splitlines())
    # Review, 3 agents, 2 rounds: 12 calls for the prompt; the 2 compose calls that were answered are kept.
    expected = (f"error: 1 prompt(s) left to retry ({TASK_A.id}) with 10 call(s) left; re-run the same command: it "
                f"replays the {kept} finished call(s) kept in calls.jsonl and asks only the rest "
                f"(reasons in {failed_log})")
    assert errors == [expected]
    (record,) = failures(tmp_path)
    assert record["cause"] == "deterministic" and not record["final"] and record["reseed"] == [[0, 2]]

    # Same command, still blank: only the blank call is asked again, with new seeds (a journal replay
    # would be the same blank forever); the two compose calls that finished are replayed.
    still_blank = Scripted(blank.rule)
    assert cli(tmp_path, still_blank, monkeypatch, capsys)[0] == 1
    assert [f["attempt"] for f in failures(tmp_path)] == [0, 1]
    assert len(still_blank.requests) == 3 and all(is_compose(r, "Ecological") for r in still_blank.requests)
    assert not {r.seed for r in still_blank.requests} & {r.seed for r in blank.requests}

    # The backend stops being blank: the re-run finishes the prompt and exits 0.
    healthy = RecordingEcho()
    code, err = cli(tmp_path, healthy, monkeypatch, capsys)
    assert code == 0 and "error:" not in err
    assert all(about_a(r) for r in healthy.requests) and len(healthy.requests) == 10
    stories = [json.loads(line) for line in (tmp_path / "run" / "stories.jsonl").read_text().splitlines()]
    assert sorted(s["prompt_id"] for s in stories) == sorted([TASK_A.id] * 3 + [TASK_B.id] * 3)
    assert len(failures(tmp_path)) == 2  # append-only history
    assert cli(tmp_path, RecordingEcho(), monkeypatch, capsys)[0] == 0  # nothing left to do


def test_a_call_out_of_retries_keeps_its_seed_and_the_finished_calls_are_replayed(tmp_path):
    """A transient failure (the Model gave up) is retried by the next run with the same seed; the
    prompt's other calls are replayed from the journal, so the re-run asks only what is left."""
    gone = Completion(text="", finish_reason=GAVE_UP, error="HTTP 503: still failing after 5 retries")
    flaky = Scripted(lambda r: gone if is_review_by(r, "Futuristic") else None)
    run(tmp_path, flaky)
    (record,) = failures(tmp_path)
    assert record["cause"] == "transient" and record["reseed"] == [] and not record["final"]
    assert {c["failure"] for c in record["calls"]} == {"transient"} and len(record["calls"]) == 2
    failed_seeds = {r.seed for r in flaky.requests if is_review_by(r, "Futuristic")}

    healthy = RecordingEcho()
    runner, stories = run(tmp_path, healthy)
    assert not runner.failed and {s["prompt_id"] for s in stories} == {TASK_A.id, TASK_B.id}
    asked = [r for r in healthy.requests if is_review_by(r, "Futuristic")]
    assert {r.seed for r in asked} == failed_seeds  # same seeds, asked again
    assert not [r for r in healthy.requests if "Give this writer" not in texts(r) and "Revise" not in texts(r)]
    # The stories are those of a run that never failed.
    _, clean = run(tmp_path, RecordingEcho(), name="clean")
    assert comparable(stories, TASK_A.id) == comparable(clean, TASK_A.id)
    # Every finished call was made once: the journal has one line per request of the clean run.
    journal = [json.loads(line)["key"] for line in (tmp_path / "run" / "calls.jsonl").read_text().splitlines()]
    assert len(journal) == len(set(journal)) == len((tmp_path / "clean" / "calls.jsonl").read_text().splitlines())


def test_failed_lines_without_causes_still_reseed_every_call(tmp_path):
    """A failed.jsonl written before causes were recorded keeps meaning what it meant: the prompt's
    next attempt draws every call's seed from its attempt number, so its journal stays valid."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "failed.jsonl").write_text(json.dumps({"prompt_id": TASK_A.id, "attempt": 0}) + "\n")
    backend = RecordingEcho()
    run(tmp_path, backend, framework="single", limit=1)
    (request,) = backend.requests
    assert request.seed == derive_seed(0, TASK_A.id, 0, 0, "attempt-1")


def test_a_finished_prompt_costs_the_blank_calls_of_its_failed_attempts_too(tmp_path):
    """A call blank after its re-asks is asked anew with a new seed by the next attempt, never
    replayed: its tokens were spent on the prompt, so its cost counts them (the calls the failed
    attempt finished are replayed and counted once)."""
    blank = Scripted(lambda r: "Here's my story:" if is_compose(r, "Ecological") else None)
    run(tmp_path, blank)
    (record,) = failures(tmp_path)
    assert record["lost_usage"] == {"calls": 3, "prompt_tokens": 30, "completion_tokens": 3}  # 1 + 2 re-asks
    healthy = RecordingEcho()
    _, stories = run(tmp_path, healthy)
    made = [r for r in blank.requests + healthy.requests if about_a(r)]
    (cost,) = {json.dumps(s["prompt_usage"]) for s in stories if s["prompt_id"] == TASK_A.id}
    assert len(made) == 15  # the failed attempt's 3 blank and 2 finished composes, then the 10 calls left
    assert json.loads(cost) == {"calls": 15, "prompt_tokens": 150, "completion_tokens": 12 * 3 + 3}
