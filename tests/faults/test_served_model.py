"""A model served under a name is known by what the server lists of it: a run resumed after the
server was restarted on other weights under the same name is refused, as a retrained local model
is (`generate.backends.served`)."""

from __future__ import annotations

import json

import pytest

from generate.backends import Model
from generate.backends.openai_backend import OpenAIBackend
from generate.common.errors import UsageError
from generate.journal import Journal
from generate.runner import RunConfig, Runner
from tests.faults.stub import StubServer
from tests.generate.test_provenance import ROWS, write_dataset

ROWS3 = [*ROWS, {"id": "p3", "aspect": "Pacing", "prompt": "A lighthouse on a moon without seas."}]
CARD = {"id": "writer", "owned_by": "vllm", "root": "/ckpt/step-100", "parent": None, "max_model_len": 2048,
        "permission": [{"id": "modelperm-1", "created": 1}]}


def backend(stub: StubServer) -> OpenAIBackend:
    return OpenAIBackend("writer", base_url=stub.base_url, api_key="k")


def generate(stub: StubServer, tmp_path, limit: int) -> None:
    """A single-agent run of `limit` prompts through the stub into `tmp_path / "run"`."""
    dataset = write_dataset(tmp_path / "d.jsonl", ROWS3)
    cfg = RunConfig(framework="single", model="openai:writer", dataset=str(dataset), out=str(tmp_path / "run"),
                    limit=limit, max_new_tokens=4)
    Runner(cfg, model=Model(backend(stub))).run()


def test_only_the_fields_that_name_the_weights_are_kept():
    with StubServer() as stub:
        stub.cards = [{"id": "judge", "owned_by": "vllm", "root": "/other"}, CARD]
        first, second = backend(stub).describe(), backend(stub).describe()  # two listings, two times stamped
    assert first["served"] == {"owned_by": "vllm", "root": "/ckpt/step-100", "max_model_len": 2048}
    assert second == first


@pytest.mark.parametrize("cards", [None, [], [{"id": "someone-else", "owned_by": "x"}]],
                         ids=["no listing", "empty listing", "not listed"])
def test_a_model_the_server_does_not_list_is_known_by_its_name_only(cards):
    with StubServer() as stub:
        stub.cards = cards
        described = backend(stub).describe()
    assert "served" not in described and backend(stub).numerics() == {}


def test_an_unreachable_listing_is_no_error():
    with StubServer() as stub:
        url = stub.base_url
    described = OpenAIBackend("writer", base_url=url, api_key="k").describe()  # the server is gone
    assert "served" not in described


def test_a_run_resumed_against_other_weights_under_the_same_name_is_refused(tmp_path):
    with StubServer() as stub:
        stub.cards = [CARD]
        generate(stub, tmp_path, 1)
        manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
        assert manifest["backend"]["served"]["root"] == "/ckpt/step-100"
        stub.cards = [{**CARD, "root": "/ckpt/step-200"}]  # restarted on another checkpoint, same name
        with pytest.raises(UsageError, match=r"another backend numerics \(served.root '/ckpt/step-100' then, "
                                             r"'/ckpt/step-200' now\)"):
            generate(stub, tmp_path, 2)
        assert len((tmp_path / "run" / "stories.jsonl").read_text().splitlines()) == 1
        stub.cards = None  # a listing that cannot be read proves nothing either way: the run goes on
        generate(stub, tmp_path, 2)
    assert len((tmp_path / "run" / "stories.jsonl").read_text().splitlines()) == 2


def test_a_journal_does_not_replay_calls_of_other_weights_under_the_same_name(tmp_path):
    with StubServer() as stub:
        stub.cards = [CARD]
        generate(stub, tmp_path, 1)
        rows = Journal(tmp_path / "run" / "calls.jsonl")
        stub.cards = [{**CARD, "root": "/ckpt/step-200"}]
        key = json.loads((tmp_path / "run" / "calls.jsonl").read_text().splitlines()[0])["key"]
        with pytest.raises(UsageError, match="other backend numerics"):
            rows.get(key, backend(stub).numerics())


def test_an_invocation_that_cannot_read_the_listing_keeps_the_recorded_one(tmp_path):
    """Else the run would record no listing, and the next invocation would be compared with nothing."""
    with StubServer() as stub:
        stub.cards = [CARD]
        generate(stub, tmp_path, 1)
        stub.cards = None  # not read: this invocation goes on, and the manifest keeps what it knew
        generate(stub, tmp_path, 2)
        manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
        assert manifest["backend"]["served"]["root"] == "/ckpt/step-100"
        stub.cards = [{**CARD, "root": "/ckpt/step-200"}]
        with pytest.raises(UsageError, match=r"served.root '/ckpt/step-100' then, '/ckpt/step-200' now"):
            generate(stub, tmp_path, 3)
    assert len((tmp_path / "run" / "stories.jsonl").read_text().splitlines()) == 2
