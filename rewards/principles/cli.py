"""`review-lab principles {optimize,weak-labels}`: the principle judge's two steps.

Each subcommand takes a YAML file of its options plus flags that override it (unknown keys are an
error); bad input prints one `error:` line and exits 2.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from generate.common.config import add_dataclass_args, build_config, new_parser
from rewards.principles.optimize import Optimiser, OptimizeConfig
from rewards.principles.weak_labels import WeakLabelConfig, build

# subcommand -> (its options, what runs them and returns the output path, one line of help, an example)
COMMANDS: dict[str, tuple[type, Callable[[Any], Path], str, str]] = {
    "weak-labels": (WeakLabelConfig, build, "build a weakly labelled set from the reference corpus, split by work",
                    "review-lab principles weak-labels --works 25 --per-work 2 --out runs/principles/weak.jsonl"),
    "optimize": (OptimizeConfig, lambda cfg: Optimiser(cfg).run(),
                 "optimise the Detector's principles adversarially, with reflection",
                 "review-lab principles optimize --labelled runs/principles/weak.jsonl --iterations 2 "
                 "--out runs/principles/opt"),
}
EXAMPLE = COMMANDS["weak-labels"][3]


def main(argv: Sequence[str] | None = None) -> int:
    parser = new_parser("review-lab principles", __doc__.split("\n")[0], EXAMPLE)
    sub = parser.add_subparsers(dest="command", required=True, metavar="{" + ",".join(COMMANDS) + "}")
    for name, (cls, _, help_text, example) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text, epilog=f"example:\n  {example}")
        p.add_argument("--config", help="YAML file of options; command-line flags override it")
        add_dataclass_args(p, cls)
    args = vars(parser.parse_args(argv))
    command, config = args.pop("command"), args.pop("config")
    cls, run, *_ = COMMANDS[command]
    print(run(build_config(cls, config, args)))
    return 0
