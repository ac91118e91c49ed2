"""Resuming an interrupted training run (GRPO, `train/grpo.py`; the reward model,
`train/reward_model.py`): from its newest complete checkpoint, and only with the settings it was
trained with.

Both scripts checkpoint every few steps (their recipes' `save_steps`). Run again with the same
command, a run continues from the newest complete `checkpoint-N` in its `output_dir` (or the one
`--resume_from_checkpoint` names): transformers' Trainer restores the weights, the optimizer,
the scheduler, the RNG states and the place in the data. The settings it was trained with are
recorded in `output_dir/run_settings.json` (every recipe field but how long, where and how
visibly it trains: `BOOKKEEPING`); a checkpoint made with other settings is refused, since
resuming it would continue that run while the manifest recorded the new settings as its own.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

from generate.common.errors import UsageError
from generate.common.files import make_dir

log = logging.getLogger("train.resume")


def last_checkpoint(output_dir: str | Path) -> str | None:
    """The newest complete `checkpoint-N` in `output_dir`: one whose trainer_state.json, which the
    trainer writes last, is whole. A checkpoint cut short by a kill is skipped, not resumed from."""
    steps = []
    for path in Path(output_dir).glob("checkpoint-*"):
        match = re.fullmatch(r"checkpoint-(\d+)", path.name)
        try:
            if match:
                json.loads((path / "trainer_state.json").read_text(encoding="utf-8"))
                steps.append((int(match.group(1)), str(path)))
        except (OSError, ValueError):
            continue
    return max(steps)[1] if steps else None


def resume_point(training_args: Any) -> str | None:
    """Where training starts: the checkpoint `resume_from_checkpoint` names, else (also for
    `true`/`last`) the newest complete one in `output_dir`, else the beginning."""
    requested = training_args.resume_from_checkpoint
    if requested not in (None, True, "true", "True", "last"):
        return requested
    found = last_checkpoint(training_args.output_dir)
    if found:
        log.info("resuming from %s", found)
    return found


SETTINGS_FILE = "run_settings.json"
# Training arguments that say how long, where and how visibly to train, not what is trained, and
# `local_rank`, which differs between the processes of one run.
BOOKKEEPING = ("log", "save_", "hub_", "eval_", "report_to", "run_name", "output_dir", "push_to_hub", "disable_tqdm",
               "resume_from_checkpoint", "max_steps", "num_train_epochs", "torch_empty_cache_steps", "dataloader_",
               "local_rank")


def check_resumable(output_dir: str | Path, settings: dict, checkpoint: str | None, record: bool = True) -> None:
    """Resume only a run trained with these settings; record them (`record`: the main process) for
    the next resume.

    A changed recipe resumed from the old checkpoint would go on training (or, at `max_steps`,
    not train at all) the old run while the manifest recorded the new settings as its own.

    Raises:
        UsageError: `output_dir` holds a checkpoint trained with other settings."""
    path = Path(output_dir) / SETTINGS_FILE
    try:
        recorded = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        recorded = None
    if checkpoint and recorded is not None and recorded != settings:
        changed = sorted(f"{part}.{k}" for part in settings for k in {*settings[part], *recorded.get(part, {})}
                         if settings[part].get(k) != recorded.get(part, {}).get(k))
        raise UsageError(f"{output_dir} holds a run trained with other settings ({', '.join(changed)}); resuming it "
                         "would continue that run under these: use another --output_dir, or delete that one")
    if checkpoint and recorded is None:
        log.warning("%s records no settings: resuming %s as the same run", output_dir, checkpoint)
    if not record:
        return
    make_dir(path.parent)
    path.write_text(json.dumps(settings, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def settings_of(script: dict, training_args: Any, model_args: Any) -> dict:
    """A run's settings: its script arguments (`script`, as recorded), its model arguments and every
    training argument but the bookkeeping ones, as JSON values."""
    training = {k: v for k, v in training_args.to_dict().items() if not k.startswith(BOOKKEEPING)}
    return json.loads(json.dumps({"script": script, "model": vars(model_args), "training": training}, default=str))
