"""Runs record what they were made from: the dataset's bytes and every prompt's text, by hash."""

import hashlib
import json

import pytest

from generate.backends import Model
from generate.common.errors import UsageError
from generate.common.paths import CONFIG_DIR
from generate.common.resumable import Resumable
from generate.datasets import dataset_sha256
from generate.runner import RunConfig, Runner, check_resumable
from tests.generate.fakes import RecordingEcho

ROWS = [{"id": "p1", "aspect": "Pacing", "prompt": "A race against a dying sun."},
        {"id": "p2", "aspect": "Pacing", "prompt": "The last train off Europa."}]


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_dataset(path, rows, newline="\n"):
    path.write_bytes("".join(json.dumps(r) + newline for r in rows).encode("utf-8"))
    return path


def generate(out, dataset, **kw):
    cfg = RunConfig(framework="single", model="echo", dataset=str(dataset), out=str(out), **kw)
    path = Runner(cfg, model=Model(RecordingEcho())).run()
    return [json.loads(line) for line in path.read_text().splitlines()], json.loads((out / "manifest.json").read_text())


def test_manifest_and_stories_record_dataset_and_prompt_hashes(tmp_path):
    dataset = write_dataset(tmp_path / "d.jsonl", ROWS, newline="\r\n")  # the bytes, not the parsed text
    stories, manifest = generate(tmp_path / "run", dataset)
    assert manifest["dataset_sha256"] == sha(dataset.read_bytes())
    assert manifest["prompts"] == {r["id"]: sha(r["prompt"].encode()) for r in ROWS}
    assert {s["prompt_id"]: s["prompt_sha256"] for s in stories} == manifest["prompts"]


def test_a_named_dataset_hashes_the_file_it_resolves_to(tmp_path):
    assert dataset_sha256("default") == sha((CONFIG_DIR / "datasets" / "default.jsonl").read_bytes())
    _, manifest = generate(tmp_path / "run", "default", limit=3)
    assert manifest["dataset_sha256"] == dataset_sha256("default") and len(manifest["prompts"]) == 3


def test_resuming_after_a_prompt_text_changed_is_refused(tmp_path):
    dataset = write_dataset(tmp_path / "d.jsonl", ROWS)
    generate(tmp_path / "run", dataset)
    write_dataset(dataset, [ROWS[0], {**ROWS[1], "prompt": "The first train off Europa."}])
    with pytest.raises(UsageError, match="p2"):
        generate(tmp_path / "run", dataset)


def test_resuming_after_a_template_changed_is_refused(tmp_path):
    from generate.prompts import DEFAULT_TEMPLATES

    templates = tmp_path / "templates.yaml"
    templates.write_text(DEFAULT_TEMPLATES.read_text())
    generate(tmp_path / "run", "default", limit=1, templates=str(templates))
    templates.write_text(DEFAULT_TEMPLATES.read_text().replace("Writing task:", "Task:"))
    with pytest.raises(UsageError, match="template:single_write"):
        generate(tmp_path / "run", "default", limit=1, templates=str(templates))


@pytest.mark.parametrize(("old", "refused"), [
    ({"framework": "review", "review_sees": "latest"}, True),  # the public code's reading, now `public_code`
    ({"framework": "review", "review_sees": "first"}, False),
    ({"framework": "single", "review_sees": "latest"}, False),  # the variant changes nothing outside Review
    ({"framework": "review", "review_variant": "public_code"}, True),
])
def test_resume_refusal_knows_the_review_variant(tmp_path, old, refused):
    (tmp_path / "manifest.json").write_text(json.dumps({"config": old}))
    cfg = RunConfig(framework=old["framework"], out=str(tmp_path))
    run = Resumable(tmp_path, "a run")
    if refused:
        with pytest.raises(UsageError, match="review_variant"):
            check_resumable(run, cfg)
    else:
        check_resumable(run, cfg)


def test_a_manifest_recorded_with_the_removed_engine_option_resumes(tmp_path):
    """`engine` (the hf decode path) changes the speed, not the stories: it is no longer a setting."""
    dataset = write_dataset(tmp_path / "d.jsonl", ROWS)
    generate(tmp_path / "run", dataset, limit=1)
    manifest = tmp_path / "run" / "manifest.json"
    data = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**data, "config": {**data["config"], "engine": "generate"}}))
    stories, _ = generate(tmp_path / "run", dataset, limit=2)
    assert len(stories) == 2


class MachineEcho(RecordingEcho):
    """Echo replies from a backend that, like the hf one, picks its dtype by the machine."""

    NUMERICS = ("dtype",)

    def __init__(self, dtype: str | None):
        super().__init__()
        self.dtype = dtype

    def describe(self) -> dict:
        return {**super().describe(), **({"dtype": self.dtype} if self.dtype else {})}


def test_resuming_on_a_machine_that_computes_in_another_dtype_is_refused(tmp_path):
    """bf16 where the CPU has it, float32 elsewhere: the same command resumed on another machine
    would mix stories sampled from other logits into one run."""
    dataset = write_dataset(tmp_path / "d.jsonl", ROWS)

    def run(dtype, limit):
        cfg = RunConfig(framework="single", model="echo", dataset=str(dataset), out=str(tmp_path / "run"), limit=limit)
        return Runner(cfg, model=Model(MachineEcho(dtype))).run()

    run("bfloat16", 1)
    with pytest.raises(UsageError, match="dtype 'bfloat16' then, 'float32' now"):
        run("float32", 2)
    run("bfloat16", 2)  # the same numerics resume
    run("float32", 2)  # nothing left to generate: nothing to mix
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    # ... and nothing to record: the manifest still describes the invocations that made the stories
    # (it was rewritten with no backend, and the latest commit, by every finished run invoked again)
    assert manifest["backend"]["dtype"] == "bfloat16" and manifest["machine"]["cores"] >= 1


def test_a_run_recorded_before_numerics_were_resumes(tmp_path):
    dataset = write_dataset(tmp_path / "d.jsonl", ROWS)
    cfg = RunConfig(framework="single", model="echo", dataset=str(dataset), out=str(tmp_path / "run"), limit=1)
    Runner(cfg, model=Model(MachineEcho(None))).run()  # a manifest whose backend has no dtype
    cfg.limit = 2
    Runner(cfg, model=Model(MachineEcho("float32"))).run()
