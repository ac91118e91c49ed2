"""`review-lab corpus fetch` against a mirror on 127.0.0.1, and the corpus resolution order.

The mirror holds each work as GITenberg serves it: in its source encoding (utf-8, latin-1,
cp1252, one with a byte-order mark) with CRLF line ends. The fetch must turn each back into the
normal form whose hash the manifest gives, cache only what verified, resume, and never let an
incomplete corpus be used.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from eval.corpus import cache, download, main
from eval.corpus.manifest import DEFAULT_MANIFEST, read_manifest
from eval.corpus.normalise import normalise, source_form
from eval.corpus.resolve import (ENV, EXPLICIT, FETCHED, FROM_ENV, NONE, locate_reference, one_notice,
                                 report_unavailable)
from eval.metrics.story import StoryMetrics
from eval.reference import ReferenceCorpus, load_reference
from generate.common.cli import run_cli
from tests.conftest import SHARED
from tests.embedders import CountingEmbedder

# file -> (source encoding, normal form). Each non-utf-8 text uses characters whose bytes differ
# between its encoding and UTF-8, so decoding with the wrong one cannot pass the hash.
WORKS = {
    "alpha.txt": ("utf-8", "The rocket — named Hélène — rose.\nStars wheeled past the port.\n"),
    "beta.txt": ("latin-1", "Señor Müller read the dials.\nThe ship's café was quiet.\n"),
    "gamma.txt": ("cp1252", "“Is it far?” she asked…\nThe engines hummed — then stopped.\n"),
    "delta.txt": ("utf-8", "A plain tale of Mars.\nNo accents here at all.\n"),  # served with a BOM
}


def served(name: str) -> bytes:
    """The bytes a source server holds: CRLF, source encoding (delta with a byte-order mark)."""
    encoding, text = WORKS[name]
    return (b"\xef\xbb\xbf" if name == "delta.txt" else b"") + source_form(text.encode(), encoding)


def normal(name: str) -> bytes:
    return WORKS[name][1].encode("utf-8")


class Mirror:
    """A loopback HTTP server: `files` by name, `truncate` names cut short mid-body, `fail_once`
    names answered 503 the first time; `requests` counts GETs per name."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {name: served(name) for name in WORKS}
        self.truncate: set[str] = set()
        self.fail_once: set[str] = set()
        self.requests: Counter[str] = Counter()
        mirror = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                name = self.path.rsplit("/", 1)[-1]
                mirror.requests[name] += 1
                if name in mirror.fail_once:
                    mirror.fail_once.discard(name)
                    return self.send_error(503)
                if name not in mirror.files:
                    return self.send_error(404)
                body = mirror.files[name]
                self.send_response(200)
                self.send_header("Content-Length", str(len(body) + (1000 if name in mirror.truncate else 0)))
                self.end_headers()
                # A truncated answer sends half the body and closes (HTTP/1.0: close after the handler).
                self.wfile.write(body[: len(body) // 2] if name in mirror.truncate else body)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/works"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def mirror():
    server = Mirror()
    yield server
    server.close()


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private cache root, no SCIFI_REFERENCE_DIR, no waiting between attempts."""
    monkeypatch.setenv("SCIFI_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.setattr(download, "RETRY_WAIT", 0.0)
    return tmp_path / "cache"


def write_manifest(path: Path, url: str | None = None) -> Path:
    """A manifest of WORKS; `url` is the base of each work's own URL (else a host never reached)."""
    base = url or "https://example.invalid/never"
    rows = ["# a test corpus", "file\ttitle\tsource_encoding\turl\tsha256\tbytes"]
    for name, (encoding, _) in WORKS.items():
        data = normal(name)
        rows.append(f"{name}\t{name[:-4].title()}\t{encoding}\t{base}/{name}\t{hashlib.sha256(data).hexdigest()}"
                    f"\t{len(data)}")
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def run(argv: list[str], capsys) -> tuple[int, list[str], list[str]]:
    """The command as a user runs it: exit code, stdout lines, stderr lines."""
    with pytest.raises(SystemExit) as exit_info:
        run_cli(main, argv)
    out, err = capsys.readouterr()
    return exit_info.value.code, out.splitlines(), [line for line in err.splitlines() if line.strip()]


def fetch(manifest: Path, capsys, *extra: str) -> tuple[int, list[str], list[str]]:
    return run(["fetch", "--manifest", str(manifest), "--attempts", "1", *extra], capsys)


def cached(manifest: Path) -> dict[str, bytes]:
    directory = cache.texts_dir(read_manifest(manifest))
    return {p.name: p.read_bytes() for p in directory.glob("*")} if directory.is_dir() else {}


def leftovers(manifest: Path) -> list[Path]:
    staging = cache.texts_dir(read_manifest(manifest)).parent / cache.PARTIAL
    return list(staging.iterdir()) if staging.is_dir() else []


def test_source_forms_really_differ_from_the_normal_form() -> None:
    assert all(b"\r\n" in served(name) for name in WORKS)
    assert served("delta.txt").startswith(b"\xef\xbb\xbf")
    for name in ("beta.txt", "gamma.txt"):
        assert served(name).replace(b"\r\n", b"\n") != normal(name)
    assert all(normalise(served(name), WORKS[name][0]) == normal(name) for name in WORKS)


def test_good_fetch_caches_the_normal_form_and_is_used(env, mirror, tmp_path, capsys) -> None:
    manifest = write_manifest(tmp_path / "works.tsv", url=mirror.url)  # each work's own URL
    code, out, err = fetch(manifest, capsys)
    assert code == 0, err
    assert cached(manifest) == {name: normal(name) for name in WORKS}
    directory = cache.texts_dir(read_manifest(manifest))
    assert out[-1] == str(directory) and directory.is_relative_to(env)
    assert leftovers(manifest) == []
    where = locate_reference(manifest=manifest)
    assert (where.path, where.source) == (directory, FETCHED)

    # The fetched copy is byte for byte the curated one: same corpus hash, same embedding cache.
    curated = tmp_path / "curated"
    curated.mkdir()
    for name in WORKS:
        (curated / name).write_bytes(normal(name))
    embedder = CountingEmbedder()
    fetched = ReferenceCorpus.load(directory, embedder, cache_dir=tmp_path / "emb")
    local = ReferenceCorpus.load(curated, embedder, cache_dir=tmp_path / "emb")
    assert fetched.content_sha256 == local.content_sha256 and len(embedder.calls) == 1


def test_a_mirror_holding_the_normal_form_is_accepted(env, mirror, tmp_path, capsys) -> None:
    mirror.files = {name: normal(name) for name in WORKS}  # e.g. a copy of the curated texts
    manifest = write_manifest(tmp_path / "works.tsv")
    assert fetch(manifest, capsys, "--mirror", mirror.url)[0] == 0
    assert cached(manifest) == {name: normal(name) for name in WORKS}


def test_a_resumed_fetch_requests_only_what_is_missing(env, mirror, tmp_path, capsys) -> None:
    manifest = write_manifest(tmp_path / "works.tsv")
    held_back = {name: mirror.files.pop(name) for name in ("beta.txt", "delta.txt")}
    code, _, err = fetch(manifest, capsys, "--mirror", mirror.url)
    assert code == 1 and set(cached(manifest)) == {"alpha.txt", "gamma.txt"}
    assert err[-1].startswith("error: 2 of 4 works failed") and len(err) == 3
    assert locate_reference(manifest=manifest).source == NONE

    mirror.files.update(held_back)
    assert fetch(manifest, capsys, "--mirror", mirror.url)[0] == 0
    assert mirror.requests == {"alpha.txt": 1, "gamma.txt": 1, "beta.txt": 2, "delta.txt": 2}
    assert cached(manifest) == {name: normal(name) for name in WORKS}

    assert fetch(manifest, capsys, "--mirror", mirror.url)[0] == 0  # complete: nothing requested
    assert sum(mirror.requests.values()) == 6


def test_a_work_whose_hash_differs_is_refused(env, mirror, tmp_path, capsys) -> None:
    manifest = write_manifest(tmp_path / "works.tsv")
    mirror.files["beta.txt"] = source_form(b"Senor Muller read the dials.\n", "latin-1")  # another edition
    code, _, err = fetch(manifest, capsys, "--mirror", mirror.url)
    assert code == 1
    assert len(err) == 2 and err[0].startswith("beta.txt: hash mismatch") and err[1].startswith("error: 1 of 4")
    assert "beta.txt" not in cached(manifest) and len(cached(manifest)) == 3 and leftovers(manifest) == []

    where = locate_reference(manifest=manifest)  # never used as if whole
    assert where.path is None and "incomplete (3 of 4 works verified)" in where.missing
    assert "review-lab corpus fetch" in where.missing


def test_a_server_failing_mid_file_caches_nothing_for_it(env, mirror, tmp_path, capsys) -> None:
    manifest = write_manifest(tmp_path / "works.tsv")
    mirror.truncate.add("gamma.txt")
    code, _, err = fetch(manifest, capsys, "--mirror", mirror.url)
    assert code == 1 and err[0].startswith("gamma.txt: connection closed mid-file")
    assert "gamma.txt" not in cached(manifest) and leftovers(manifest) == []
    assert locate_reference(manifest=manifest).path is None

    mirror.truncate.clear()  # healthy again: the re-run completes, fetching only gamma
    mirror.requests.clear()
    assert fetch(manifest, capsys, "--mirror", mirror.url)[0] == 0
    assert mirror.requests == {"gamma.txt": 1}
    assert locate_reference(manifest=manifest).source == FETCHED


def test_a_transient_failure_is_retried(env, mirror, tmp_path, capsys) -> None:
    manifest = write_manifest(tmp_path / "works.tsv")
    mirror.fail_once.add("alpha.txt")
    assert fetch(manifest, capsys, "--mirror", mirror.url, "--attempts", "2")[0] == 0
    assert mirror.requests["alpha.txt"] == 2 and len(cached(manifest)) == 4


def test_an_unreachable_source_stops_at_once_with_one_line(env, tmp_path, capsys) -> None:
    closed = Mirror()
    closed.close()  # its port now refuses connections
    manifest = write_manifest(tmp_path / "works.tsv")
    code, out, err = fetch(manifest, capsys, "--mirror", closed.url, "--attempts", "3")
    assert code == 1 and out == [] and len(err) == 1
    assert err[0].startswith("error: cannot reach the corpus source") and "0 of 4 works cached" in err[0]
    assert "--reference-dir" in err[0] and cached(manifest) == {}


@pytest.mark.parametrize(("rows", "message"), [
    (["file\tsource_encoding\turl\tsha256", "a.txt\tutf-8\thttp://x/a\t" + "0" * 64,
      "a.txt\tutf-8\thttp://x/a\t" + "1" * 64], "duplicate file name(s) a.txt"),
    (["file\tsource_encoding\turl\tsha256", "../a.txt\tutf-8\thttp://x/a\t" + "0" * 64], "plain name"),
    (["file\tsource_encoding\turl\tsha256", "a.txt\tebcdic-9\thttp://x/a\t" + "0" * 64], "unknown source_encoding"),
    (["file\tsource_encoding\turl\tsha256", "a.txt\tutf-8\thttp://x/a\tabc"], "64 lowercase hex"),
    (["file\turl\tsha256"], "missing column(s) source_encoding"),
    (["file\tsource_encoding\turl\tsha256", "a.txt\tbase64\thttp://x/a\t" + "0" * 64], "unknown source_encoding"),
    (["file\tsource_encoding\turl\tsha256", "a.txt\tutf-8\t\t" + "0" * 64], "url must be an http://"),
], ids=["duplicate", "path", "encoding", "hash", "columns", "not-a-text-encoding", "no-url"])
def test_a_bad_manifest_is_one_error_line(env, tmp_path, capsys, rows, message) -> None:
    manifest = tmp_path / "bad.tsv"
    manifest.write_text("\n".join(rows) + "\n", encoding="utf-8")
    code, _, err = fetch(manifest, capsys)
    assert code == 2 and len(err) == 1 and err[0].startswith("error: ") and message in err[0]


def test_a_manifest_saved_with_a_bom_is_read_and_one_not_in_utf8_is_one_error_line(env, tmp_path, capsys) -> None:
    manifest = write_manifest(tmp_path / "works.tsv")
    with_bom = tmp_path / "bom.tsv"
    with_bom.write_bytes(b"\xef\xbb\xbf" + manifest.read_bytes().split(b"\n", 1)[1])  # header row first
    assert read_manifest(with_bom).works == read_manifest(manifest).works
    latin = tmp_path / "latin.tsv"
    latin.write_bytes(manifest.read_bytes().replace(b"Alpha", "Alpha – Hélène".encode("cp1252")))
    code, _, err = fetch(latin, capsys)
    assert code == 2 and len(err) == 1 and err[0].startswith(f"error: {latin}: not UTF-8 text")


def test_a_mirror_must_be_a_url(env, tmp_path, capsys) -> None:
    code, _, err = fetch(write_manifest(tmp_path / "works.tsv"), capsys, "--mirror", "mirror.example.org")
    assert code == 2 and err == ["error: --mirror must be an http://, https:// or file:// URL, got "
                                 "'mirror.example.org'"]


def test_a_local_mirror_must_exist_and_a_file_missing_from_it_fails_at_once(env, tmp_path, monkeypatch,
                                                                             capsys) -> None:
    """A `file://` mirror that is not a directory is one error line (not one line per work after
    every work's retries), and a work missing from it is the local 404: not retried."""
    manifest = write_manifest(tmp_path / "works.tsv")
    nowhere = tmp_path / "nowhere"
    code, _, err = fetch(manifest, capsys, "--mirror", nowhere.as_uri())
    assert code == 2 and err == [f"error: --mirror {nowhere.as_uri()}: {nowhere} is not a directory"]

    local = tmp_path / "local"
    local.mkdir()
    for name in WORKS.keys() - {"beta.txt"}:
        (local / name).write_bytes(served(name))
    reads: Counter[str] = Counter()
    real = download._read
    monkeypatch.setattr(download, "_read", lambda url, timeout: reads.update([url.rsplit("/", 1)[-1]]) or
                        real(url, timeout))
    code, _, err = fetch(manifest, capsys, "--mirror", local.as_uri(), "--attempts", "3")
    assert code == 1 and err[0].startswith("beta.txt: FileNotFoundError") and "after" not in err[0]
    assert reads["beta.txt"] == 1 and set(cached(manifest)) == WORKS.keys() - {"beta.txt"}


def test_resolution_order(env, mirror, tmp_path, monkeypatch, capsys) -> None:
    manifest = write_manifest(tmp_path / "works.tsv")
    given, from_env = tmp_path / "given", tmp_path / "from-env"
    assert locate_reference(manifest=manifest).source == NONE
    assert fetch(manifest, capsys, "--mirror", mirror.url)[0] == 0
    fetched = cache.texts_dir(read_manifest(manifest))

    monkeypatch.setenv(ENV, str(from_env))
    assert locate_reference(str(given), manifest=manifest) == locate_reference(given, manifest=manifest)
    assert (locate_reference(given, manifest=manifest).path, locate_reference(given).source) == (given, EXPLICIT)
    assert (locate_reference(None, manifest=manifest).path, locate_reference("").source) == (from_env, FROM_ENV)
    monkeypatch.setenv(ENV, "")  # what `make` passes when it has no local copy: not given
    assert (locate_reference(None, manifest=manifest).path, locate_reference(manifest=manifest).source) == (
        fetched, FETCHED)
    (fetched / "extra.txt").write_text("not in the manifest", encoding="utf-8")  # would change the corpus
    assert locate_reference(manifest=manifest).path is None
    (fetched / "extra.txt").unlink()
    (fetched / "alpha.txt").write_bytes(b"damaged")
    assert locate_reference(manifest=manifest).path is None
    assert fetch(manifest, capsys, "--mirror", mirror.url)[0] == 0  # a re-run repairs it
    assert locate_reference(manifest=manifest).path == fetched


def test_path_says_which_corpus_and_why(env, mirror, tmp_path, monkeypatch, capsys) -> None:
    manifest = write_manifest(tmp_path / "works.tsv")
    code, out, _ = run(["path", "--manifest", str(manifest)], capsys)
    assert code == 1 and out[0].startswith("none: no corpus found; run `review-lab corpus fetch`")
    fetch(manifest, capsys, "--mirror", mirror.url)
    code, out, _ = run(["path", "--manifest", str(manifest)], capsys)
    assert (code, out) == (0, [f"{cache.texts_dir(read_manifest(manifest))} (from fetched cache)"])
    nowhere = tmp_path / "nowhere"
    monkeypatch.setenv(ENV, str(nowhere))
    code, out, _ = run(["path", "--manifest", str(manifest)], capsys)
    assert (code, out) == (1, [f"{nowhere} (from SCIFI_REFERENCE_DIR): {nowhere} is not a directory"])


def test_path_refuses_a_directory_the_metrics_would_refuse(env, tmp_path, capsys) -> None:
    """`path` applies the loader's check: exit 0 only for a directory the metrics can read."""
    given = tmp_path / "given"
    given.mkdir()
    code, out, _ = run(["path", "--reference-dir", str(given)], capsys)
    assert (code, out) == (1, [f"{given} (from --reference-dir): no .txt files in {given}"])
    (given / "pg35.txt").symlink_to(tmp_path / "moved-away.txt")  # a link into a copy that moved
    code, out, _ = run(["path", "--reference-dir", str(given)], capsys)
    assert (code, out) == (1, [f"{given} (from --reference-dir): cannot read {given / 'pg35.txt'}: "
                               "No such file or directory"])
    (given / "pg35.txt").unlink()
    (given / "alpha.txt").write_bytes(normal("alpha.txt"))  # a copy of the manifest's corpus, cut short
    code, out, err = run(["path", "--reference-dir", str(given), "--manifest", str(write_manifest(tmp_path / "w.tsv"))],
                         capsys)
    assert (code, out) == (0, [f"{given} (from --reference-dir)"])
    assert err == [f"note: {given} holds 1 of the manifest's 4 works (3 missing, 0 with other bytes, 0 not in it)"]


def test_help_ends_with_an_example(capsys) -> None:
    for argv in (["--help"], ["fetch", "--help"], ["path", "--help"]):
        code, out, _ = run(argv, capsys)
        assert code == 0 and out[-2] == "example:" and out[-1].startswith("  review-lab corpus ")


def test_without_a_corpus_one_line_says_how_to_get_it(env, tmp_path, monkeypatch, caplog) -> None:
    monkeypatch.setattr("eval.corpus.resolve.DEFAULT_MANIFEST", write_manifest(tmp_path / "works.tsv"))
    embedder = CountingEmbedder()
    with caplog.at_level(logging.WARNING), one_notice():
        for _ in range(3):  # a benchmark evaluating three runs
            assert StoryMetrics.load(None, embedder).reference is None
        assert load_reference(None, embedder, cache_dir=tmp_path / "emb") is None
    (line,) = [r.getMessage() for r in caplog.records]
    assert line == ("reference metrics unavailable: no corpus found; run `review-lab corpus fetch` to download it, "
                    "or point --reference-dir or SCIFI_REFERENCE_DIR at a local copy")
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        report_unavailable(logging.getLogger("x"), "why")
        report_unavailable(logging.getLogger("x"), "why")
    assert len(caplog.records) == 2  # outside one_notice(), every evaluation says it


def test_the_committed_manifest() -> None:
    manifest = read_manifest(DEFAULT_MANIFEST)
    assert len(manifest) == 150 and len({w.file for w in manifest.works}) == 150
    for work in manifest.works:
        assert re.fullmatch(r"[0-9a-f]{64}", work.sha256) and re.fullmatch(r"[0-9a-f]{40}", work.commit)
        assert work.url == f"https://raw.githubusercontent.com/{work.source_repo}/{work.commit}/{work.source_path}"
        assert work.source_encoding in ("utf-8", "latin-1", "cp1252") and work.title and work.bytes
    texts = SHARED / "data" / "scifi-reference" / "texts"
    if not texts.is_dir():
        pytest.skip(f"no curated copy at {texts} to compare the hashes with")
    assert sorted(p.name for p in texts.glob("*.txt")) == sorted(w.file for w in manifest.works)
    for work in manifest.works:
        data = (texts / work.file).read_bytes()
        assert (hashlib.sha256(data).hexdigest(), len(data)) == (work.sha256, work.bytes), work.file
