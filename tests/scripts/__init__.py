"""Tests of the command-line scripts under scripts/, imported as the modules `python scripts/X.py` runs."""

import importlib


def load_script(name):
    return importlib.import_module(f"scripts.{name}")
