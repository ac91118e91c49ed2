"""`review-lab corpus fetch` when the network drops part-way: the fetch stops like an offline one.

The first work is fetched alone, so an offline machine stops at once; a source lost after it
would otherwise let every remaining work wait out its timeouts and retries, one after another.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from eval.corpus import fetch as fetch_module
from tests.eval.test_corpus_fetch import Mirror, cached, env, fetch, write_manifest  # noqa: F401 - env: a fixture


def test_a_source_lost_after_the_first_work_stops_the_fetch(env, tmp_path: Path, capsys,  # noqa: F811
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    mirror = Mirror()
    real, asked = fetch_module.download, []

    def dropping(url: str, **options) -> bytes:
        """The first work arrives, then the mirror's port closes (refused: unreachable)."""
        asked.append(url.rsplit("/", 1)[-1])
        try:
            return real(url, **options)
        finally:
            if url.endswith("alpha.txt"):
                mirror.close()

    monkeypatch.setattr(fetch_module, "download", dropping)
    manifest = write_manifest(tmp_path / "works.tsv")
    code, out, err = fetch(manifest, capsys, "--mirror", mirror.url, "--jobs", "1", "--attempts", "2")
    assert code == 1 and out == [] and len(err) == 1, err
    assert err[0].startswith("error: cannot reach the corpus source") and "1 of 4 works cached" in err[0]
    assert asked[0] == "alpha.txt" and len(asked) == 3  # two in a row unreachable: the fourth is not tried
    assert list(cached(manifest)) == ["alpha.txt"]


def test_works_that_fail_for_other_reasons_do_not_stop_the_fetch(env, tmp_path: Path, capsys) -> None:  # noqa: F811
    mirror = Mirror()
    try:
        del mirror.files["beta.txt"], mirror.files["gamma.txt"]  # 404: not a lost source
        manifest = write_manifest(tmp_path / "works.tsv")
        code, _, err = fetch(manifest, capsys, "--mirror", mirror.url, "--jobs", "1")
    finally:
        mirror.close()
    assert code == 1 and mirror.requests["delta.txt"] == 1
    assert sorted(cached(manifest)) == ["alpha.txt", "delta.txt"] and "2 of 4 works failed" in err[-1]
