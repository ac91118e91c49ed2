"""YAML config + command-line overrides, shared by every CLI of the project.

Precedence: dataclass defaults < YAML file < command-line flags. Unknown keys are an error,
so a typo in a config never silently falls back to a default, and a number outside its field's
declared range is one too (`generate.common.ranges`).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import yaml

from generate.common.errors import UsageError
from generate.common.inputs import read_text
from generate.common.ranges import OneOf, check_of, check_options, range_of

T = TypeVar("T")


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping of names; a missing, unreadable or malformed file is a UsageError."""
    path = Path(path)
    try:
        data = yaml.safe_load(read_text(path, "config file"))
    except yaml.YAMLError as exc:
        raise UsageError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError(f"{path}: expected a mapping of option -> value, got {_yaml_kind(data)}")
    if bad := [key for key in data if not isinstance(key, str)]:
        raise UsageError(f"{path}: {bad[0]!r} is not an option name (a key must be text)")
    return data


def _yaml_kind(value: Any) -> str:
    """What a YAML value is, in the words of an error line."""
    if isinstance(value, list):
        return "a list"
    return f"the {type(value).__name__} {value!r}" if len(repr(value)) <= 40 else f"a {type(value).__name__}"


def build_config(cls: type[T], config_path: str | Path | None, overrides: dict[str, Any]) -> T:
    """Merge a YAML file and explicit overrides (None values are 'not given') into `cls`.

    Every value must be of its field's type (`typed`) before the config is built, so a YAML
    `limit: abc` or `temperature: .nan` is one error line, not a traceback or a run that
    quietly does something else; then `check_options` checks the ranges."""
    names = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    if config_path:
        file_values = {k.replace("-", "_"): v for k, v in load_yaml(config_path).items()}
        unknown = sorted(set(file_values) - names)
        if unknown:
            raise UsageError(f"{config_path}: unknown config key(s) {', '.join(unknown)}; valid: {', '.join(sorted(names))}")
        values.update({k: typed(v, hints[k], f"{config_path}: {k}") for k, v in file_values.items()})
    for key, value in overrides.items():
        if value is None:
            continue
        if key not in names:
            raise UsageError(f"unknown option {key}")
        values[key] = typed(value, hints[key], f"--{key.replace('_', '-')}")
    try:
        cfg = cls(**values)
    except TypeError as exc:
        raise UsageError(str(exc)) from None
    check_options(cfg)
    return cfg


KINDS = {bool: "true or false", int: "a whole number", float: "a finite number", str: "text"}


def typed(value: Any, hint: Any, name: str) -> Any:
    """`value` as the option `name` of type `hint` takes it, or a UsageError saying what it needs.

    int, float, str, bool, `X | None` and `list[X]` are checked (an int is a float; a bool is no
    number; NaN and infinity are no option's value); a single text given for a list of texts is
    that one-item list. A value of another declared type passes unchecked."""
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    optional = union and type(None) in typing.get_args(hint)
    kinds = [a for a in typing.get_args(hint) if a is not type(None)] if union else [hint]
    if len(kinds) > 1:  # "int | str": either
        return value
    kind = kinds[0]
    if value is None:
        if optional:
            return None
        raise UsageError(f"{name} needs a value ({_needs(kind)}), got null")
    if typing.get_origin(kind) is list:
        item = next(iter(typing.get_args(kind)), Any)
        if isinstance(value, str) and item is str:
            value = [value]
        if not isinstance(value, list):
            raise UsageError(f"{name} must be a list ({_needs(item)} each), got {value!r}")
        return [typed(v, item, f"{name} item") for v in value]
    if kind not in KINDS:
        return value
    if (why := kind_refusal(value, kind)) is not None:
        raise UsageError(f"{name} {why}")
    return value


def kind_refusal(value: Any, kind: type) -> str | None:
    """Why `value` (not None) is no value of the scalar `kind` (a key of `KINDS`), or None: the one
    type check of config fields, trl recipe fields and reward options (`rewards.registry`)."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    ok = {bool: isinstance(value, bool), str: isinstance(value, str), int: number and isinstance(value, int),
          float: number and (isinstance(value, int) or math.isfinite(value))}[kind]
    if ok:
        return None
    hint_text = " (quote it to make it text)" if kind is str and isinstance(value, (int, float, bool)) else ""
    return f"must be {KINDS[kind]}, got {value!r}{hint_text}"


def _needs(kind: Any) -> str:
    return KINDS.get(kind, getattr(kind, "__name__", str(kind)))


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
