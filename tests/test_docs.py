"""The docs name only what exists: every `review-lab` or `scripts/` option a command line in
README.md or docs/ shows is in that command's `--help`, every `make` target is in the Makefile,
every link reaches a file and heading. A renamed option or heading fails here instead of in a
newcomer's shell."""

from __future__ import annotations

import contextlib
import io
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from train import cli

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
# Their options beyond their own go to the training script (`review-lab train -- --help`).
FORWARDING = {"train", "reward-model"}
FENCE = re.compile(r"```[^\n]*\n(.*?)```", re.S)


def command_lines(text: str) -> list[str]:
    """Code-block lines (continuations joined) and inline code spans (which may wrap in prose)."""
    blocks = FENCE.findall(text)
    prose = FENCE.sub("", text)
    lines = [line for block in blocks for line in block.replace("\\\n", " ").splitlines()]
    return lines + [" ".join(span.split()) for span in re.findall(r"`([^`]+)`", prose)]


def invocations(line: str, program: str) -> list[list[str]]:
    """The argument lists of each `program ...` in `line`, up to a comment or the next command."""
    out = []
    for m in re.finditer(rf"(?:^|[\s(=`]){re.escape(program)}\s+(.*)", line):
        args = re.split(r"\s(?:#|&&|\|\||;|\|)\s?|[)`]", m.group(1))[0]
        out.append(args.split())
    return out


@cache
def help_text(*argv: str) -> str:
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), pytest.raises(SystemExit):
        cli.main([*argv, "--help"])
    return buffer.getvalue()


def subcommands(job: str) -> set[str]:
    """The subcommands a job's help offers (argparse lists them as `{serve,export}`)."""
    return {name for group in re.findall(r"\{([\w,-]+)\}", help_text(job)) for name in group.split(",")}


def documented_options() -> list[tuple[str, tuple[str, ...], str]]:
    """(where, the job and subcommand, an option) for every option a doc shows a `review-lab` job with."""
    found = []
    for doc in DOCS:
        for line in command_lines(doc.read_text()):
            for args in invocations(line, "review-lab"):
                if not args or args[0] not in cli.COMMANDS or args[0] in FORWARDING:
                    continue
                job = (args[0], args[1]) if len(args) > 1 and args[1] in subcommands(args[0]) else (args[0],)
                found += [(doc.name, job, a.split("=")[0]) for a in args[len(job):] if a.startswith("--")
                          and re.fullmatch(r"--[a-z][a-z0-9-]*(=.*)?", a)]
    return found


def test_the_docs_show_review_lab_jobs_with_options():
    """The scan itself works: it finds the README's first session and dozens of options in all."""
    options = documented_options()
    assert ("README.md", ("generate",), "--framework") in options and len(options) > 60


def test_every_option_the_docs_show_is_in_its_jobs_help():
    wrong = sorted({f"{where}: review-lab {' '.join(job)} {option}" for where, job, option in documented_options()
                    if not re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", help_text(*job))})
    assert not wrong, "options the docs name but the job does not have:\n" + "\n".join(wrong)


def test_every_option_the_docs_show_a_script_with_is_in_its_help():
    shown: dict[str, set[str]] = {}
    for doc in DOCS:
        for line in command_lines(doc.read_text()):
            for script in set(re.findall(r"scripts/\w+\.py", line)):
                for args in invocations(line, script):
                    shown.setdefault(script, set()).update(a.split("=")[0] for a in args
                                                           if re.fullmatch(r"--[a-z][a-z0-9_-]*(=.*)?", a))
    assert "--paths" in shown.get("scripts/bench_engines.py", ())
    wrong = []
    for script, options in sorted(shown.items()):
        text = subprocess.run([sys.executable, str(REPO / script), "--help"], capture_output=True, text=True,
                              timeout=120, check=True).stdout
        wrong += [f"{script} {o}" for o in sorted(options)
                  if not re.search(rf"(?<![\w-]){re.escape(o)}(?![\w-])", text)]
    assert not wrong, "options the docs name but the script does not have:\n" + "\n".join(wrong)


def test_every_make_target_the_docs_name_exists():
    makefile = (REPO / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][a-z0-9-]*):", makefile, re.M))
    named = {(doc.name, args[0]) for doc in DOCS for line in command_lines(doc.read_text())
             for args in invocations(line, "make") if args and re.fullmatch(r"[a-z][a-z0-9-]*", args[0])}
    assert {"benchmark", "test"} <= {t for _, t in named}
    assert not sorted(f"{where}: make {t}" for where, t in named if t not in targets)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but `-` and `_` dropped, spaces to `-`."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(doc: Path) -> set[str]:
    return {slug(h) for h in re.findall(r"^#+\s+(.*)$", FENCE.sub("", doc.read_text()), re.M)}


def test_every_link_between_the_docs_reaches_a_file_and_heading():
    broken = []
    for doc in DOCS:
        for target in re.findall(r"\]\(([^)\s]+)\)", FENCE.sub("", doc.read_text())):
            if re.match(r"[a-z]+:", target):
                continue  # a web address: not checked offline
            path, _, anchor = target.partition("#")
            dest = (doc.parent / path).resolve() if path else doc
            if not dest.exists() or (anchor and dest.suffix == ".md" and anchor not in anchors(dest)):
                broken.append(f"{doc.name}: {target}")
    assert not broken, "links that lead nowhere:\n" + "\n".join(broken)


def test_the_link_check_knows_githubs_anchors():
    assert slug("The whole story: `review-lab story`") == "the-whole-story-review-lab-story"
    assert slug("`make benchmark-full`: 100 prompts") == "make-benchmark-full-100-prompts"
