"""trl's argument parser with the project's error contract, for the training scripts.

`TrlParser` reads a recipe (`--config FILE`) and the command line into trl's dataclasses and ours.
Bad input there surfaced as a traceback (a recipe that is missing or not YAML: `FileNotFoundError`,
a YAML error; an unknown option: `ValueError`; a value trl's configs refuse in `__post_init__`:
`ValueError`) or as argparse's page of usage. Here each is one `UsageError`, which `run_cli` prints
as one `error:` line with exit status 2.

A recipe's values become argparse's defaults, which argparse converts only when they are text: a
YAML list, mapping, bool or NaN for a number went into the run as it was (`max_steps: [1, 2]`, a
`learning_rate: .nan`), and one reward name for the list of them was read letter by letter. Each
value is checked against its field's type here (`config.typed`), and no number the command line
or the recipe gives may be NaN or infinite.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import typing
from collections.abc import Iterable
from typing import Any, NoReturn

from trl import TrlParser

from generate.common.config import load_yaml, typed
from generate.common.errors import UsageError


class RecipeParser(TrlParser):
    recipe = "the recipe"

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
            self.recipe = args[at + 1]
        try:
            parsed = super().parse_args_and_config(args, **kwargs)
        except ValueError as exc:  # an unknown option or key, or a value trl's configs refuse
            raise UsageError(str(exc).splitlines()[0]) from None
        for options in parsed:
            refuse_non_finite(options)
            if hasattr(options, "model_name_or_path") and not options.model_name_or_path:
                raise UsageError("no model to train: give model_name_or_path in the recipe (or --model_name_or_path)")
        return parsed

    def set_defaults_with_config(self, **kwargs: Any) -> list[str]:
        """The recipe's values as defaults, each first checked against its field's type (a text is
        left to argparse, which converts it with the field's type and says so when it cannot)."""
        hints: dict[str, Any] = {}
        for cls in self.dataclass_types:
            hints.update(typing.get_type_hints(cls))
        for key, value in kwargs.items():
            hint = hints.get(key)
            if hint is not None and (not isinstance(value, str) or typing.get_origin(hint) is list):
                kwargs[key] = typed(value, hint, f"{self.recipe}: {key}")
        return super().set_defaults_with_config(**kwargs)


def refuse_non_finite(options: Any) -> None:
    """No option of these dataclasses means NaN or infinity (none has one as its default)."""
    if not dataclasses.is_dataclass(options):
        return
    for f in dataclasses.fields(options):
        value = getattr(options, f.name, None)
        if isinstance(value, float) and not math.isfinite(value):
            raise UsageError(f"--{f.name} must be a finite number, got {value}")
