"""YAML config + command-line overrides, shared by every CLI of the project.

Precedence: dataclass defaults < YAML file < command-line flags. Unknown keys are an error,
so a typo in a config never silently falls back to a default.
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml

from generate.common.errors import UsageError

T = TypeVar("T")


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping; a missing or malformed file is a UsageError."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"config file not found: {path}")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise UsageError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError(f"{path}: expected a mapping of option -> value")
    return data


def build_config(cls: type[T], config_path: str | Path | None, overrides: dict[str, Any]) -> T:
    """Merge a YAML file and explicit overrides (None values are 'not given') into `cls`."""
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    values: dict[str, Any] = {}
    if config_path:
        file_values = {k.replace("-", "_"): v for k, v in load_yaml(config_path).items()}
        unknown = sorted(set(file_values) - names)
        if unknown:
            raise UsageError(f"{config_path}: unknown config key(s) {', '.join(unknown)}; valid: {', '.join(sorted(names))}")
        values.update(file_values)
    for key, value in overrides.items():
        if value is None:
            continue
        if key not in names:
            raise UsageError(f"unknown option {key}")
        values[key] = value
    try:
        return cls(**values)
    except TypeError as exc:
        raise UsageError(str(exc)) from None


class _Flag(argparse.BooleanOptionalAction):
    """`--flag` / `--no-flag` for a bool field. argparse's own action reads any option starting
    with `--no-` as the negation, so `--no-judge` (field `no_judge`) would set it to False."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, option_string == self.option_strings[0])


def add_dataclass_args(parser: argparse.ArgumentParser, cls: type, skip: tuple[str, ...] = ()) -> None:
    """Expose each dataclass field as --flag (default None so the YAML value can win)."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.name in skip:
            continue
        flag = "--" + f.name.replace("_", "-")
        kind = hints[f.name]
        if typing.get_origin(kind) in (typing.Union, types.UnionType):  # "int | None" -> int
            kind = next(a for a in typing.get_args(kind) if a is not type(None))
        help_text = f.metadata.get("help", "")
        if kind is bool:
            parser.add_argument(flag, dest=f.name, action=_Flag, default=None, help=help_text)
        elif kind in (int, float, str):
            parser.add_argument(flag, dest=f.name, type=kind, default=None, help=help_text)
        elif typing.get_origin(kind) is list:  # "list[str]" -> --flag a b c
            (inner,) = typing.get_args(kind) or (str,)
            parser.add_argument(flag, dest=f.name, type=inner, nargs="+", action="extend", default=None,
                                help=help_text)
        else:
            parser.add_argument(flag, dest=f.name, default=None, help=help_text)


def parse_config(cls: type[T], argv: Sequence[str] | None, *, prog: str | None = None, description: str = "",
                 skip: tuple[str, ...] = ()) -> T:
    """The command line of a CLI or script whose options are the fields of `cls`: `--config FILE`
    (YAML) and one flag per field, merged with `build_config`'s precedence."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--config", help="YAML file of options; command-line flags override it")
    add_dataclass_args(parser, cls, skip=skip)
    args = vars(parser.parse_args(argv))
    return build_config(cls, args.pop("config"), args)
