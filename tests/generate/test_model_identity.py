"""A model is known by what it is, not only by its name: a writer retrained into the same directory
is another model, so a run does not resume with it and a journal does not replay its calls."""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace

import pytest

from generate.backends import Model
from generate.backends.embedded import GGUF_DISTRIBUTION, embedded_dir, smollm2_dir
from generate.backends.identity import model_identity
from generate.common.errors import UsageError
from generate.common.fingerprint import content_hash, package_version
from generate.journal import Journal
from generate.runner import RunConfig, Runner
from tests.generate.fakes import RecordingEcho
from tests.generate.test_provenance import ROWS, write_dataset


def tiny_model(directory, seed: int, tokenizer_dir=None) -> None:
    """A one-layer Llama with SmolLM2's tokenizer (from `tokenizer_dir`, default the converted bundled
    model), its weights drawn from `seed`: retraining it is saving another seed into the same directory."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir or smollm2_dir())
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=256,
                         eos_token_id=tokenizer.eos_token_id, bos_token_id=tokenizer.bos_token_id)
    torch.manual_seed(seed)
    LlamaForCausalLM(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)


def hf_model(directory) -> Model:
    from generate.backends.hf import HFBackend

    return Model(HFBackend(str(directory), batch_size=4, dtype="float32", device="cpu", path="generate"))


def test_a_run_resumed_after_its_model_was_retrained_in_place_is_refused(tmp_path):
    weights = tmp_path / "merged"
    tiny_model(weights, seed=0)
    dataset = write_dataset(tmp_path / "d.jsonl", ROWS)

    def run(limit):
        cfg = RunConfig(framework="single", model=f"hf:{weights}", dataset=str(dataset), out=str(tmp_path / "run"),
                        limit=limit, max_new_tokens=4)
        return Runner(cfg, model=hf_model(weights)).run()

    run(1)
    before = content_hash(weights)
    tiny_model(weights, seed=1)  # retrained into the same directory, the same command again
    with pytest.raises(UsageError, match=r"another backend numerics \(identity.weights_sha256 .* then, .* now\); "
                                         r"finish with the same weights"):
        run(2)
    assert len((tmp_path / "run" / "stories.jsonl").read_text().splitlines()) == 1  # nothing of the new model
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["backend"]["identity"] == {"weights_sha256": before}  # the model that wrote the stories


def test_the_embedded_model_is_known_by_its_package_version_not_a_hash(tmp_path, monkeypatch):
    """Hundreds of MB are not hashed: the package that ships the weights names them."""
    converted = smollm2_dir()  # the real cache's, for the tokenizer: converting anew costs ~20 s
    monkeypatch.setenv("SCIFI_CACHE_DIR", str(tmp_path))
    tiny_model(embedded_dir(), seed=0, tokenizer_dir=converted)

    def no_hashing(*_):
        raise AssertionError("the embedded model's directory was hashed")

    monkeypatch.setattr("generate.backends.identity.directory_hash", no_hashing)
    expected = {"package": f"{GGUF_DISTRIBUTION} {package_version(GGUF_DISTRIBUTION)}"}
    assert model_identity(str(embedded_dir())) == expected and not expected["package"].endswith("not installed")
    assert hf_model(embedded_dir()).backend.numerics()["identity"] == expected


def test_a_vllm_model_directory_is_known_by_its_content(tmp_path, monkeypatch):
    from generate.backends.vllm_backend import VLLMBackend

    monkeypatch.setitem(sys.modules, "vllm", SimpleNamespace(LLM=lambda model, **kw: object()))
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "model.safetensors").write_bytes(b"weights")
    assert VLLMBackend(str(tmp_path / "m")).numerics() == {"identity": {"weights_sha256": content_hash(tmp_path / "m")}}
    assert VLLMBackend("org/hub-model").numerics() == {"identity": {}}  # a hub id: its name only


class Computing(RecordingEcho):
    """Echo replies from a backend that records the dtype it computes in and its weights."""

    NUMERICS = ("dtype", "identity")

    def __init__(self, dtype: str, weights: str = "a" * 64):
        super().__init__()
        self.dtype, self.weights = dtype, weights

    def describe(self) -> dict:
        return {**super().describe(), "dtype": self.dtype, "identity": {"weights_sha256": self.weights}}


def complete(journal: Journal, backend: RecordingEcho) -> list[str]:
    from generate.backends import ChatRequest

    requests = [ChatRequest([{"role": "user", "content": f"story {i}"}], seed=i) for i in range(3)]
    return [c.text for c in journal.complete(Model(backend), "hf:runs/grpo/merged", requests)]


def test_a_journal_refuses_to_replay_calls_made_with_other_numerics(tmp_path):
    path = tmp_path / "calls.jsonl"
    first = complete(Journal(path), Computing("bfloat16"))
    same = Computing("bfloat16")
    assert complete(Journal(path), same) == first and same.requests == []  # replayed
    for other, differs in [(Computing("float32"), "dtype"), (Computing("bfloat16", "b" * 64), "weights")]:
        with pytest.raises(UsageError, match=rf"^{path} holds calls made with other backend numerics \(one of "
                                             r"dtype, identity differs: .*\); use another --out \(curate: or "
                                             r"another --journal\)$"):
            complete(Journal(path), other)
        assert other.requests == [], differs  # nothing asked, nothing mixed in


def test_a_journal_row_without_numerics_still_replays(tmp_path):
    """Journals written before rows recorded their numerics are replayed as before."""
    path = tmp_path / "calls.jsonl"
    complete(Journal(path), Computing("bfloat16"))
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert len({r["numerics"] for r in rows}) == 1 and len(rows[0]["numerics"]) == 16
    path.write_text("".join(json.dumps({k: v for k, v in r.items() if k != "numerics"}) + "\n" for r in rows))
    backend = Computing("float32")
    assert complete(Journal(path), backend) == [r["text"] for r in rows] and backend.requests == []



def test_a_run_resumed_under_another_decode_path_is_refused(tmp_path):
    """The paths draw a sampled request's tokens differently from the same logits: one run's stories
    must not mix them under a manifest that names one path."""
    from generate.backends.hf import HFBackend

    weights = tmp_path / "model"
    tiny_model(weights, seed=0)
    dataset = write_dataset(tmp_path / "d.jsonl", ROWS)

    def run(limit, path):
        cfg = RunConfig(framework="single", model=f"hf:{weights}", dataset=str(dataset), out=str(tmp_path / "run"),
                        limit=limit, max_new_tokens=4)
        backend = HFBackend(str(weights), batch_size=4, dtype="float32", device="cpu", path=path)
        assert backend.numerics() == HFBackend(str(weights), dtype="float32", device="cpu", path="fast").numerics()
        return Runner(cfg, model=Model(backend)).run()

    run(1, "generate")
    with pytest.raises(UsageError, match=r"another backend numerics \(path 'generate' then, 'fast' now\).*"
                                         r"the same \$REVIEW_LAB_HF_PATH"):
        run(2, "fast")
    assert len((tmp_path / "run" / "stories.jsonl").read_text().splitlines()) == 1
    run(2, "generate")  # the same path: resumed
    assert len((tmp_path / "run" / "stories.jsonl").read_text().splitlines()) == 2
