"""`review-lab train` and `review-lab reward-model`: the training scripts under `accelerate launch`.

The scripts stay scripts (`accelerate launch train/grpo.py --config ...` is how trl and open-r1
run training, and keeps working), so these commands only build that launch line: the script's path
comes from the installed package, and accelerate runs from this interpreter
(`python -m accelerate.commands.launch`), so an installed venv needs no `accelerate` on PATH.
A few of accelerate's own options are taken before the script's; everything else is forwarded to
the script unchanged, and what follows `--` is forwarded even when it looks like ours. The script's
own error line stands alone: accelerate runs `--quiet` (no traceback of its launcher under it),
and its exit status is the script's (`EXIT_STATUS_FILE`), not accelerate's 1 for any failure.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Sequence
from pathlib import Path

from generate.common.cli import EXIT_STATUS_FILE
from generate.common.config import load_yaml, new_parser
from generate.common.ranges import AT_LEAST_1, PORT, ranged

log = logging.getLogger("train.launch")

# accelerate's options this command takes before the script's (each takes one value).
ACCELERATE_OPTIONS = {
    "--config_file": "accelerate config (e.g. configs/accelerate/cpu.yaml, zero2.yaml); default: accelerate's",
    "--num_processes": "processes to launch (e.g. 2 with zero2.yaml)",
    "--main_process_port": "port of the main process, when several launches share a machine",
}
# Checked here: accelerate would refuse a bad value with its page of usage.
ACCELERATE_TYPES = {"--num_processes": ranged(int, AT_LEAST_1), "--main_process_port": ranged(int, PORT)}
SCRIPTS = {
    "train": ("grpo.py", "GRPO on the recipe's creativity rewards (train/grpo.py)",
              "review-lab train --config_file configs/accelerate/cpu.yaml --config configs/grpo/smollm2_cpu.yaml "
              "--max_steps 4"),
    "reward-model": ("reward_model.py", "a Bradley-Terry reward model on curated preferences (train/reward_model.py)",
                     "review-lab reward-model --config configs/rm/smollm2_cpu.yaml "
                     "--preferences runs/curation/preferences.jsonl --output_dir runs/rm"),
}


def script_path(name: str) -> Path:
    """The training script `name` of the installed `train` package."""
    import train

    return Path(train.__file__).resolve().parent / name


def accelerate_command(script: str, accelerate_args: Sequence[str], script_args: Sequence[str]) -> list[str]:
    """`accelerate launch --quiet [accelerate_args] <train/script> [script_args]` with this interpreter."""
    return [sys.executable, "-m", "accelerate.commands.launch", "--quiet", *accelerate_args, str(script_path(script)),
            *script_args]


def run_launch(cmd: Sequence[str], **kwargs) -> int:
    """Run an `accelerate_command` line; returns the script's exit status (accelerate says 1 for any)."""
    with tempfile.TemporaryDirectory() as tmp:
        status = Path(tmp) / "status"
        env = {**(kwargs.pop("env", None) or os.environ), EXIT_STATUS_FILE: str(status)}
        rc = subprocess.run(cmd, env=env, **kwargs).returncode
        if rc and status.is_file():
            rc = int(status.read_text(encoding="utf-8") or rc)
    return rc


def split_args(command: str, argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """(accelerate's options, the script's arguments) of a command line; `--help` is ours."""
    script, description, example = SCRIPTS[command]
    about = (f"Runs `accelerate launch [ACCELERATE OPTIONS] train/{script} [ARGS]`. The options below go to "
             "accelerate; every other argument (a recipe `--config FILE`, any recipe field as `--field value`) "
             f"goes to the script unchanged, as does everything after `--`. `review-lab {command} -- --help` "
             "lists the script's own options.")
    parser = new_parser(f"review-lab {command}",
                        f"{description}, under accelerate launch.\n\n{textwrap.fill(about, 96)}", example)
    parser.allow_abbrev = False  # `--config` (the script's recipe) must not read as `--config_file`
    for option, help_text in ACCELERATE_OPTIONS.items():
        parser.add_argument(option, type=ACCELERATE_TYPES.get(option), help=help_text)
    argv, rest = list(argv), []
    if "--" in argv:
        cut = argv.index("--")
        argv, rest = argv[:cut], argv[cut + 1:]
    ours, forwarded = parser.parse_known_args(argv)
    accelerate = [item for option in ACCELERATE_OPTIONS
                  if (value := getattr(ours, option[2:])) is not None for item in (option, str(value))]
    return accelerate, [*forwarded, *rest]


def launch(command: str, argv: Sequence[str] | None) -> int:
    """Run the command's script under accelerate and return its exit code."""
    accelerate, script_args = split_args(command, [] if argv is None else argv)
    if "--config_file" in accelerate:  # read now: accelerate refuses a missing one with a traceback
        load_yaml(accelerate[accelerate.index("--config_file") + 1])
    cmd = accelerate_command(SCRIPTS[command][0], accelerate, script_args)
    log.info("%s", " ".join(cmd))
    return run_launch(cmd)


def grpo_main(argv: Sequence[str] | None = None) -> int:
    return launch("train", argv)


def reward_model_main(argv: Sequence[str] | None = None) -> int:
    return launch("reward-model", argv)
