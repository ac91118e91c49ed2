"""Tests of the command-line scripts under scripts/, loaded from their files as `python scripts/X.py` runs them."""

import importlib.util

from tests.conftest import REPO


def load_script(name):
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
