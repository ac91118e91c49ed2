"""YAML config + command-line overrides, shared by every CLI of the project.

Precedence: dataclass defaults < YAML file < command-line flags. Unknown keys are an error,
so a typo in a config never silently falls back to a default, and a number outside its field's
declared range is one too (`generate.common.ranges`).
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import yaml

from generate.common.errors import UsageError
from generate.common.ranges import OneOf, check_of, check_options, range_of

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
        cfg = cls(**values)
    except TypeError as exc:
        raise UsageError(str(exc)) from None
    check_options(cfg)
    return cfg


class Parser(argparse.ArgumentParser):
    """The project's argument parser: a bad option is a `UsageError` (one `error:` line, exit 2,
    through `run_cli`) instead of argparse's usage block, and `--help` keeps the example's layout."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see {self.prog} --help)")

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> argparse.Namespace:
        """argparse's, but arguments no parser knew point to the --help of the subcommand they
        followed (argparse hands them back to the top parser, whose help does not list them)."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            self.chosen(parsed).error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed

    def chosen(self, parsed: argparse.Namespace) -> argparse.ArgumentParser:
        """The innermost subcommand parser that `parsed` went through (this parser if none)."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                sub = action.choices.get(getattr(parsed, action.dest, None) or "")
                if sub is not None:
                    return sub.chosen(parsed) if isinstance(sub, Parser) else sub
        return self


def new_parser(prog: str | None, description: str = "", example: str | None = None) -> Parser:
    """A `Parser` whose help ends with one example command (`example`, one or more lines)."""
    epilog = "example:\n" + "\n".join(f"  {line}" for line in example.strip().splitlines()) if example else None
    return Parser(prog=prog, description=description, epilog=epilog)


class Flag(argparse.Action):
    """A bool field as a pair of switches that read naturally.

    A field `x` gets `--x` (True) and `--no-x` (False). A field already named in the negative,
    `no_x`, gets `--no-x` (True) and `--with-x` (False): argparse's BooleanOptionalAction would
    offer `--no-no-x`, and `--x` may already name another option (`--judge` is the judge model
    while `no_judge` skips it).
    """

    def __init__(self, option_strings: Sequence[str], dest: str, values: dict[str, bool] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, **kwargs)
        self.values = values or {}

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, self.values[option_string])

    def format_usage(self) -> str:
        return " | ".join(self.option_strings)


def flag_options(name: str) -> dict[str, bool]:
    """{option string: value it sets} for the bool field `name` (see `Flag`)."""
    if name.startswith("no_"):
        rest = name[3:].replace("_", "-")
        return {f"--no-{rest}": True, f"--with-{rest}": False}
    flag = name.replace("_", "-")
    return {f"--{flag}": True, f"--no-{flag}": False}


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
        if (rng := range_of(cls, f)) is not None:
            help_text = f"{help_text} ({rng})".lstrip()
        if isinstance(check := check_of(cls, f), OneOf):
            help_text = f"{help_text} ({check})".lstrip()
        if kind is bool:
            options = flag_options(f.name)
            parser.add_argument(*options, dest=f.name, action=Flag, values=options, default=None, help=help_text)
        elif kind in (int, float, str):
            parser.add_argument(flag, dest=f.name, type=kind, default=None, help=help_text)
        elif typing.get_origin(kind) is list:  # "list[str]" -> --flag a b c
            (inner,) = typing.get_args(kind) or (str,)
            parser.add_argument(flag, dest=f.name, type=inner, nargs="+", action="extend", default=None,
                                help=help_text)
        else:
            parser.add_argument(flag, dest=f.name, default=None, help=help_text)


def parse_config(cls: type[T], argv: Sequence[str] | None, *, prog: str | None = None, description: str = "",
                 skip: tuple[str, ...] = (), example: str | None = None) -> T:
    """The command line of a CLI whose options are the fields of `cls`: `--config FILE` (YAML) and
    one flag per field, merged with `build_config`'s precedence; `example` ends its `--help`."""
    parser = new_parser(prog, description, example)
    parser.add_argument("--config", help="YAML file of options; command-line flags override it")
    add_dataclass_args(parser, cls, skip=skip)
    args = vars(parser.parse_args(argv))
    return build_config(cls, args.pop("config"), args)
