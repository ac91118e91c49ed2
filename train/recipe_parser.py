"""trl's argument parser with the project's error contract, for the training scripts.

`TrlParser` reads a recipe (`--config FILE`) and the command line into trl's dataclasses and ours.
Bad input there surfaced as a traceback (a recipe that is missing or not YAML: `FileNotFoundError`,
a YAML error; an unknown option: `ValueError`; a value trl's configs refuse in `__post_init__`:
`ValueError`) or as argparse's page of usage. Here each is one `UsageError`, which `run_cli` prints
as one `error:` line with exit status 2.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any, NoReturn

from trl import TrlParser

from generate.common.config import load_yaml
from generate.common.errors import UsageError


class RecipeParser(TrlParser):
    def error(self, message: str) -> NoReturn:
        """argparse's refusals (a value of the wrong type, a missing value): one line."""
        raise UsageError(f"{message} (see --help)")

    def parse_args_and_config(self, args: Iterable[str] | None = None, **kwargs: Any) -> tuple[Any, ...]:
        args = list(args) if args is not None else sys.argv[1:]
        if "--config" in args:
            at = args.index("--config")
            if at + 1 == len(args):
                raise UsageError("--config needs a recipe file")
            load_yaml(args[at + 1])  # missing, not YAML or not a mapping: one line, before trl opens it
        try:
            return super().parse_args_and_config(args, **kwargs)
        except ValueError as exc:  # an unknown option or key, or a value trl's configs refuse
            raise UsageError(str(exc).splitlines()[0]) from None
