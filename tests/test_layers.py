"""The house's rules, checked on every import statement and every function of the library code.

The packages are layers: `generate` (the model layer and the generation app, with the plumbing
in `generate/common`) <- `eval` (every scorer) <- `rewards` (wraps the scorers for trl) <- `train`
(the top: trainers, the end-to-end flows and the `review-lab` dispatcher). An import may only
point down. The CPU-only engine parts sit behind one seam (`generate/backends/cpu`), which only
the hf backend asks; nothing else may reach into that folder. A file over 400 lines or a function
over 60 is a sign that two jobs share one place. Each rule is a scan, so a new violation fails here
instead of waiting for a reviewer.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
LAYERS = ["generate", "eval", "rewards", "train"]  # bottom to top
CPU = "generate.backends.cpu"
CPU_SEAM = {"generate/backends/hf/backend.py"}  # the only module outside the folder that may import it
SPECIFIC_BACKENDS = ("generate.backends.hf", "generate.backends.openai_backend", "generate.backends.vllm_backend")
MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 60


def library_files() -> list[Path]:
    return sorted(p for layer in LAYERS for p in (REPO / layer).rglob("*.py"))


def imports(path: Path) -> list[tuple[int, str]]:
    """Every module an import statement names, at any depth (lazy imports inside functions count)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from a.b import c` may import the module a.b.c: count both names.
            found += [(node.lineno, node.module)] + [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return found


def rel(path: Path) -> str:
    return path.relative_to(REPO).as_posix()


def test_imports_point_down_the_layers():
    bad = []
    for path in library_files():
        layer = LAYERS.index(rel(path).split("/")[0])
        for line, module in imports(path):
            top = module.split(".")[0]
            if top in LAYERS and LAYERS.index(top) > layer:
                bad.append(f"{rel(path)}:{line} imports {module}")
    assert not bad, "imports pointing up the layers:\n" + "\n".join(bad)


def test_cpu_only_folder_is_reached_through_one_seam():
    bad = []
    for path in library_files():
        name = rel(path)
        if name.startswith("generate/backends/cpu/"):
            continue
        for line, module in imports(path):
            if module == CPU or module.startswith(CPU + "."):
                if name not in CPU_SEAM or module != CPU:
                    bad.append(f"{name}:{line} imports {module}")
    assert not bad, "reaching into the CPU-only folder past its seam:\n" + "\n".join(bad)


def test_train_does_not_import_a_specific_backend():
    bad = [f"{rel(p)}:{line} imports {m}" for p in library_files() if rel(p).startswith("train/")
           for line, m in imports(p) if m.startswith(SPECIFIC_BACKENDS)]
    assert not bad, "\n".join(bad)


def test_files_and_functions_stay_small():
    long_files = [f"{rel(p)}: {n} lines" for p in library_files()
                  if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_FILE_LINES]
    long_functions = []
    for path in library_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION_LINES:
                    long_functions.append(f"{rel(path)}:{node.lineno} {node.name}: {n} lines")
    assert not long_files + long_functions, "\n".join(long_files + long_functions)


@pytest.mark.parametrize("source, expected", [
    ("import eval.judge\n", ["eval.judge"]),
    ("from generate.backends import cpu\n", ["generate.backends", "generate.backends.cpu"]),
    ("def f():\n    from rewards import x\n", ["rewards", "rewards.x"]),
    ("from . import sibling\n", []),
])
def test_the_scan_sees_lazy_imports(source, expected, tmp_path):
    path = tmp_path / "m.py"
    path.write_text(source)
    assert [m for _, m in imports(path)] == expected
