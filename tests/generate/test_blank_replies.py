"""A reply that is still blank after the re-asks fails its prompt: it is never written as a story,
never shown to a reviewer or reviser, and is recorded in failed.jsonl; a re-run retries it."""

import json

import pytest

from generate.cli import main
from generate.backends import Completion, Model
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
        assert exc.failed == runner.failed and runner.failed
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
    assert not [r for r in backend.requests if about_a(r) and "Revise your story" in texts(r)]
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
    assert runner.failed == {TASK_A.id: record["reason"]}


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
        run_cli(main, ["--framework", "review", "--model", "echo", "--limit", "2", "--rounds", "2",
                       "--out", str(tmp_path / "run")])
    return exit_info.value.code, capsys.readouterr().err


def test_cli_reports_failed_prompts_exits_1_and_a_rerun_retries_them(tmp_path, monkeypatch, capsys):
    blank = Scripted(lambda r: "Here's my story:" if is_compose(r, "Ecological") else None)
    code, err = cli(tmp_path, blank, monkeypatch, capsys)
    assert code == 1
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    failed_log = tmp_path / "run" / "failed.jsonl"
    expected = (f"error: 1 prompt(s) failed: {TASK_A.id} (reasons in {failed_log}); "
                "re-run the same command to retry them")
    assert errors == [expected]

    # Same command, still blank: the retry uses new seeds (a journal replay would be the same blank
    # forever), fails again and is recorded as attempt 1.
    still_blank = Scripted(blank.rule)
    assert cli(tmp_path, still_blank, monkeypatch, capsys)[0] == 1
    assert [f["attempt"] for f in failures(tmp_path)] == [0, 1]
    assert not {r.seed for r in still_blank.requests} & {r.seed for r in blank.requests}
    assert all(about_a(r) for r in still_blank.requests)  # the finished prompt is not touched

    # The backend stops being blank: the re-run finishes the prompt and exits 0.
    healthy = RecordingEcho()
    code, err = cli(tmp_path, healthy, monkeypatch, capsys)
    assert code == 0 and "error:" not in err
    stories = [json.loads(line) for line in (tmp_path / "run" / "stories.jsonl").read_text().splitlines()]
    assert sorted(s["prompt_id"] for s in stories) == sorted([TASK_A.id] * 3 + [TASK_B.id] * 3)
    assert len(failures(tmp_path)) == 2  # append-only history
    assert cli(tmp_path, RecordingEcho(), monkeypatch, capsys)[0] == 0  # nothing left to do
