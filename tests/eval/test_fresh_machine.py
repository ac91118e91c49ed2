"""A fresh machine with a corpus mirror: the benchmark measures every novelty metric.

Outside this workplace there is no `../shared`: nothing names a corpus, so the main job would
measure only surprisal. Here the committed manifest's 150 works are served from a loopback mirror
as GITenberg serves them (source encodings, CRLF), fetched with `review-lab corpus fetch` into a
private cache, and a one-prompt benchmark run with no `--reference-dir` and no
`SCIFI_REFERENCE_DIR` finds them and reports KL, 1 - cosine and volume gain for every story.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from eval.corpus.manifest import read_manifest
from eval.corpus.normalise import source_form
from tests.conftest import REPO, SHARED, private_cache

pytestmark = pytest.mark.slow
TEXTS = SHARED / "data" / "scifi-reference" / "texts"
REVIEW_LAB = Path(sys.executable).parent / "review-lab"


@pytest.fixture
def mirror(tmp_path):
    """Every work of the committed manifest in its source form, served over loopback HTTP."""
    if not TEXTS.is_dir():
        pytest.skip("the curated corpus (../shared) is not on this machine")
    root = tmp_path / "mirror"
    root.mkdir()
    for work in read_manifest().works:
        (root / work.file).write_bytes(source_form((TEXTS / work.file).read_bytes(), work.source_encoding))
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *args: None
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def fresh_env(tmp_path: Path) -> dict[str, str]:
    """No corpus named anywhere, a private cache that shares only the converted bundled model."""
    cache = private_cache(tmp_path / "cache")  # the corpus is what must be fresh, not the converted model
    env = {k: v for k, v in os.environ.items() if k != "SCIFI_REFERENCE_DIR"}
    env.update(SCIFI_CACHE_DIR=str(cache), HF_HUB_OFFLINE="1", OMP_NUM_THREADS="2")
    return env


def review_lab(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([str(REVIEW_LAB), *args], env=env, cwd=REPO, capture_output=True, text=True, timeout=600)


def test_fetched_corpus_gives_every_story_its_novelty_metrics(tmp_path, mirror):
    env = fresh_env(tmp_path)
    before = review_lab("corpus", "path", env=env)
    assert before.returncode == 1 and "review-lab corpus fetch" in before.stdout + before.stderr

    fetched = review_lab("corpus", "fetch", "--mirror", mirror, env=env)
    assert fetched.returncode == 0, fetched.stderr[-2000:]
    where = review_lab("corpus", "path", env=env)
    assert where.returncode == 0 and "fetched cache" in where.stdout

    out = tmp_path / "bench"
    # More reference chunks than MiniLM's 384 dimensions, else volume gain is missing (its covariance
    # is singular); 400 cost ~10 s more to embed than 64 on 2 cores.
    bench = review_lab("benchmark", "--frameworks", "single", "--limit", "2", "--max-new-tokens", "48",
                       "--reference-max-chunks", "400", "--out", str(out), env=env)
    assert bench.returncode == 0, bench.stderr[-2000:]
    assert "reference metrics unavailable" not in bench.stderr
    scores = [json.loads(line) for line in (out / "single" / "eval" / "scores.jsonl").read_text().splitlines()]
    assert len(scores) == 2
    for row in scores:
        assert all(isinstance(row[m], float) for m in ("kl", "novelty_cos", "volume_gain")), row.get("missing")
    reference = json.loads((out / "single" / "eval" / "manifest.json").read_text())["provenance"]["reference"]
    assert reference, "the evaluation records which corpus it measured against"
