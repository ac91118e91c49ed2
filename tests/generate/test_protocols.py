"""Framework protocols driven through the real runner with a recording backend.

The echo backend makes every reply unique, so "does a revision request contain a peer's
story?" has an exact answer.
"""

import json

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
                     if "Revise your story" in texts(r) and any(v in texts(r) for v in own[:-1])]
        assert len(revisions) == rounds - 1
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
        revisions = [r for r in backend.requests if "Revise your story" in texts(r) and s["drafts"][1] in texts(r)]
        assert len(revisions) == 1 and s["drafts"][0] not in texts(revisions[0])


def test_the_paper_reading_is_the_default():
    assert RunConfig().review_variant == "paper"


def test_unknown_review_variant_is_bad_input(tmp_path):
    from generate.common.errors import UsageError

    with pytest.raises(UsageError, match="review_variant"):
        run(tmp_path, "review", review_variant="latest")
