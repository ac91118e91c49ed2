"""Command line: `python -m rewards.principles {optimize,weak-labels} [--config FILE] [flags]`.

Each subcommand takes a YAML file of its options plus flags that override it (unknown keys are an
error); bad input prints one `error:` line and exits 2.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from generate.common.cli import run_cli
from generate.common.config import add_dataclass_args, build_config
from rewards.principles.optimize import Optimiser, OptimizeConfig
from rewards.principles.weak_labels import WeakLabelConfig, build

COMMANDS = {
    "optimize": (OptimizeConfig, "optimise the Detector's principles adversarially, with reflection"),
    "weak-labels": (WeakLabelConfig, "build a weakly labelled set from the reference corpus, split by work"),
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rewards.principles", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (cls, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.add_argument("--config", help="YAML file of options; command-line flags override it")
        add_dataclass_args(p, cls)
    args = vars(parser.parse_args(argv))
    command, config = args.pop("command"), args.pop("config")
    cfg = build_config(COMMANDS[command][0], config, args)
    if command == "optimize":
        path = Optimiser(cfg).run()
    else:
        path = build(cfg)
    print(path)
    return 0


if __name__ == "__main__":
    run_cli(main)
