"""Framework protocols driven through the real runner with a recording backend.

The echo backend makes every reply unique, so "does a revision request contain a peer's
story?" has an exact answer.
"""

import json
import re

import pytest

from generate.backends import Model
from generate.runner import RunConfig, Runner
from tests.generate.fakes import RecordingEcho


def run(tmp_path, framework, **kw):
    backend = RecordingEcho()
    kw.setdefault("limit", 2)
    cfg = RunConfig(framework=framework, model="echo", out=str(tmp_path / framework), **kw)
    path = Runner(cfg, model=Model(backend)).run()
    return backend, [json.loads(line) for line in path.read_text().splitlines()]


def texts(request) -> str:
    return "\n".join(m["content"] for m in request.messages)


@pytest.mark.parametrize("rounds", [1, 2, 3])
def test_review_is_blind(tmp_path, rounds):
    backend, stories = run(tmp_path, "review", rounds=rounds)
    assert len(stories) == 6
    for s in stories:
        assert len(s["drafts"]) == rounds - 1 and len(s["feedback"]) == rounds - 1
        peers = [p for p in stories if p["prompt_id"] == s["prompt_id"] and p["agent"] != s["agent"]]
        peer_versions = [v for p in peers for v in (*p["drafts"], p["text"])]
        own = [*s["drafts"], s["text"]]
        revisions = [r for r in backend.requests
                     if "Revise your" in texts(r) and any(v in texts(r) for v in own[:-1])]
        assert len(revisions) == rounds - 1
        # From round 2 on the writer is also shown the first draft its reviewers read: its own.
        assert sum("Other writers read your first draft" in texts(r) for r in revisions) == max(rounds - 2, 0)
        for r in revisions:
            assert s["prompt"] in texts(r)  # the reviser is reminded of the task (public-code bug 4)
            assert not any(v in texts(r) for v in peer_versions), "a peer's story reached a reviser"


def test_review_routes_each_feedback_to_its_target(tmp_path):
    backend, stories = run(tmp_path, "review", rounds=2)
    replies = {}  # reply text -> the story the review request was about
    for r in backend.requests:
        if "Give this writer specific" in texts(r):
            body = texts(r)
            reviewed = [s for s in stories if s["drafts"][0] in body]
            assert len(reviewed) == 1 and reviewed[0]["prompt"] in body
            replies[reviewed[0]["story_id"]] = reviewed[0]
    for s in stories:
        assert len(s["feedback"][0]) == 2
        assert {f["from"] for f in s["feedback"][0]} == {"humanistic", "futuristic", "ecological"} - {s["agent"]}
    assert len(replies) == 6


def test_phase_synchronous_batching_spans_prompts(tmp_path):
    backend, _ = run(tmp_path, "review", rounds=2)
    # compose: 2 prompts x 3 agents = 6 calls in one phase -> batches of 4 + 2, not 6 calls of 1
    assert backend.batches[:2] == [4, 2]
    assert len(backend.requests) == 2 * (3 + 6 + 3)


@pytest.mark.parametrize(("framework", "calls_per_prompt", "stories_per_prompt"), [
    ("single", 1, 1), ("teacher", 1 + 3 + 2 * (1 + 3), 3), ("debate", 9, 3), ("discussion", 9, 3),
    ("review", 3 + 2 * (6 + 3), 3),
])
def test_call_counts_and_usage(tmp_path, framework, calls_per_prompt, stories_per_prompt):
    backend, stories = run(tmp_path, framework)
    assert len(backend.requests) == 2 * calls_per_prompt
    assert len(stories) == 2 * stories_per_prompt
    for s in stories:
        assert s["prompt_usage"]["calls"] == calls_per_prompt
        assert s["text"] and s["framework"] == framework
        assert s["truncated"] is False  # the echo backend never reports finish_reason "length"
    if framework == "teacher":  # the teacher's calls count for the prompt, not for a student
        assert sum(s["usage"]["calls"] for s in stories) == 2 * (calls_per_prompt - 3)


def test_debate_and_discussion_see_previous_round_peers(tmp_path):
    backend, stories = run(tmp_path, "debate", rounds=2, limit=1)
    first = {s["agent"]: s["drafts"][0] for s in stories}
    second_round = backend.requests[3:]
    for r, (agent, own) in zip(second_round, first.items()):
        last_user = r.messages[-1]["content"]
        assert all(v in last_user for a, v in first.items() if a != agent)
        assert own not in last_user and r.messages[1]["content"] == own  # own story is in its history


def test_identical_settings_across_frameworks(tmp_path):
    params = set()
    for fw in ("single", "review", "debate"):
        backend, _ = run(tmp_path, fw, max_new_tokens=33, temperature=0.7, top_p=0.8)
        params |= {r.params for r in backend.requests}
    assert len(params) == 1


@pytest.mark.parametrize(("variant", "seen"), [("paper", 0), ("public_code", 1)])
def test_what_each_reviewer_read_in_round_2(tmp_path, variant, seen):
    """`paper`: reviewers only ever read a peer's initial draft; `public_code`: the peer's latest
    draft (after round 1's revision). Either way a writer revises its own latest draft."""
    backend, stories = run(tmp_path, "review", rounds=3, limit=1, review_variant=variant)
    by_reply = {RecordingEcho.reply(r): r for r in backend.requests}
    for s in stories:
        assert len(s["feedback"][1]) == 2
        for item in s["feedback"][1]:  # the round-2 reviews this writer received
            read = texts(by_reply[item["text"]])
            assert f"You are the {item['from'].capitalize()} Writer" in read
            assert s["drafts"][seen] in read and s["drafts"][1 - seen] not in read and s["text"] not in read
            assert not any(v in read for p in stories if p is not s for v in (*p["drafts"], p["text"]))
        revisions = [r for r in backend.requests if "Revise your" in texts(r) and s["drafts"][1] in texts(r)]
        assert len(revisions) == 1
        # The reviser sees the draft its round-2 reviewers read, and no other earlier one.
        assert (s["drafts"][0] in texts(revisions[0])) == (variant == "paper")


def test_a_paper_reviser_is_shown_the_draft_its_feedback_is_about(tmp_path):
    """`paper`, round 2: the reviews are about the writer's first draft, so its request shows that
    draft as the one the reviewers read, then its current story, then the feedback; it does not
    say the reviewers read the current story. Round 1's request is the one-draft request."""
    backend, stories = run(tmp_path, "review", rounds=3, limit=1)
    for s in stories:
        first, current = s["drafts"]
        (round_1,) = [r for r in backend.requests if "Revise your" in texts(r) and first in texts(r)
                      and current not in texts(r)]
        assert "Other writers read it and sent you this feedback" in texts(round_1)
        (round_2,) = [r for r in backend.requests if "Revise your" in texts(r) and current in texts(r)]
        body = texts(round_2)
        marks = ["Other writers read your first draft", first, "Here is your current story", current,
                 "feedback on your first draft", *(item["text"] for item in s["feedback"][1]),
                 "Revise your current story"]
        assert [body.index(m) for m in marks] == sorted(body.index(m) for m in marks)
        assert "Other writers read it" not in body


def test_each_student_is_told_its_number_in_the_class_critique(tmp_path):
    """The class critique numbers the stories; a student's revision request names its number, and
    Story n of the critique the teacher read is that student's story."""
    backend, stories = run(tmp_path, "teacher", rounds=3, limit=1)
    critiques = [texts(r) for r in backend.requests if "feedback for the whole class" in texts(r)]
    assert len(critiques) == 2
    for s in stories:
        for story, critique in zip(s["drafts"], critiques):  # the story each critique read
            (revision,) = [r for r in backend.requests if "Revise your story" in texts(r) and story in texts(r)]
            number = re.search(r"Your story is Story (\d+)\.", texts(revision)).group(1)
            assert f"Story {number}:\n<<<STORY\n{story}\nSTORY>>>" in critique


def test_the_paper_reading_is_the_default():
    assert RunConfig().review_variant == "paper"


def test_unknown_review_variant_is_bad_input(tmp_path):
    from generate.common.errors import UsageError

    with pytest.raises(UsageError, match="review_variant"):
        run(tmp_path, "review", review_variant="latest")


def test_each_story_says_whether_the_call_that_wrote_it_hit_the_token_cap(tmp_path):
    """`truncated` is the final story's own call's finish_reason == "length": a cut-off first draft
    revised into a complete story is not truncated, a cut-off revision is. A resumed run replays the
    calls from the journal, finish reasons included, and says the same."""
    from generate.backends import Completion
    from tests.generate.fakes import Scripted

    def rule(request):
        body = texts(request)
        cut = ("You are the Humanistic Writer" in body and "Revise your" in body
               or "You are the Futuristic Writer" in body and "Revise your" not in body and "Give this" not in body)
        return Completion(RecordingEcho.reply(request), 10, 3, finish_reason="length") if cut else None

    out = tmp_path / "run"
    cfg = RunConfig(framework="review", model="echo", out=str(out), limit=1, rounds=2)
    stories = Runner(cfg, model=Model(Scripted(rule))).run()
    first = {s["agent"]: s["truncated"] for s in map(json.loads, stories.read_text().splitlines())}
    assert first == {"humanistic": True, "futuristic": False, "ecological": False}

    stories.unlink()  # the run is redone from its journal alone
    replay = RecordingEcho()
    again = {s["agent"]: s["truncated"] for s in map(json.loads, Runner(cfg, model=Model(replay)).run().read_text()
                                                   .splitlines())}
    assert again == first and not replay.requests


def test_a_templates_file_without_a_template_the_protocol_needs_is_refused_before_the_run(tmp_path):
    """Review under `paper` uses `review_revise_later` from round 2 on: an older templates file that
    lacks it is refused when the runner is built, not after two rounds of calls."""
    from generate.common.errors import UsageError
    from generate.prompts import DEFAULT_TEMPLATES

    text = DEFAULT_TEMPLATES.read_text()
    templates = tmp_path / "old.yaml"
    templates.write_text(text.replace("review_revise_later:", "unused_template:"))
    cfg = RunConfig(framework="review", model="echo", out=str(tmp_path / "run"), limit=1, templates=str(templates))
    with pytest.raises(UsageError, match="review_revise_later"):
        Runner(cfg, model=Model(RecordingEcho()))
    assert not (tmp_path / "run").exists()
    Runner(RunConfig(framework="review", model="echo", out=str(tmp_path / "run"), limit=1, rounds=2,
                     templates=str(templates)), model=Model(RecordingEcho()))  # round 1 does not need it
