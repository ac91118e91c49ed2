"""`review-lab plot-rewards`: a GRPO run's reward curves, from its `trainer_state.json`.

Top panel: the total (weighted) reward per logged step with a moving average, since one step's
reward is noisy with a handful of completions. Bottom panel: each component trl logged as
`rewards/<name>/mean` (components have different scales, so read them for trends, not levels).

Usage:
    review-lab plot-rewards runs/grpo/smollm2_cpu [--out runs/grpo/smollm2_cpu/rewards.png] [--window 5]
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from eval.plotting import image_formats, pyplot
from generate.common.config import new_parser
from generate.common.errors import UsageError
from generate.common.files import make_dir
from generate.common.inputs import read_json
from generate.common.ranges import AT_LEAST_1, ranged

log = logging.getLogger("plot_rewards")


def reward_series(log_history: list[dict]) -> dict[str, tuple[list[int], list[float]]]:
    """`reward` and every `rewards/<name>/mean` as (steps, values), skipping missing values."""
    series: dict[str, tuple[list[int], list[float]]] = {}
    for entry in log_history:
        for key, value in entry.items():
            if key == "reward" or (key.startswith("rewards/") and key.endswith("/mean")):
                if not isinstance(value, (int, float)) or isinstance(value, bool) or not np.isfinite(value):
                    continue
                name = "total" if key == "reward" else key[len("rewards/"):-len("/mean")]
                steps, values = series.setdefault(name, ([], []))
                steps.append(int(entry.get("step", len(steps))))
                values.append(float(value))
    return series


def moving_average(values: Sequence[float], window: int) -> np.ndarray:
    """Trailing mean over up to `window` points (shorter at the start, never lagging the end)."""
    arr = np.asarray(values, dtype=float)
    sums = np.cumsum(arr)
    out = np.empty_like(arr)
    for i in range(len(arr)):
        lo = max(0, i - window + 1)
        out[i] = (sums[i] - (sums[lo - 1] if lo else 0.0)) / (i - lo + 1)
    return out


def plot(series: dict[str, tuple[list[int], list[float]]], out: Path, window: int, title: str) -> Path:
    if "total" not in series:
        raise UsageError("no `reward` entries in the log history: was anything logged (logging_steps)?")
    plt = pyplot()
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    steps, values = series["total"]
    top.plot(steps, values, color="0.7", marker=".", label="total reward")
    top.plot(steps, moving_average(values, window), color="C0", label=f"moving average ({window})")
    top.set_ylabel("weighted reward")
    top.set_title(title)
    top.legend()
    for i, (name, (s, v)) in enumerate(sorted((k, x) for k, x in series.items() if k != "total")):
        bottom.plot(s, moving_average(v, window), color=f"C{i + 1}", label=name)
    bottom.set_xlabel("step")
    bottom.set_ylabel(f"component mean (moving average {window})")
    bottom.legend(fontsize="small")
    fig.tight_layout()
    make_dir(out.parent)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = new_parser("review-lab plot-rewards", __doc__.split("\n")[0],
                        "review-lab plot-rewards runs/grpo/smollm2_cpu --window 5")
    parser.add_argument("run", help="run directory or its trainer_state.json")
    parser.add_argument("--out", help="PNG path (default: <run>/rewards.png)")
    parser.add_argument("--window", type=ranged(int, AT_LEAST_1), default=5,
                        help=f"moving-average window in logged steps ({AT_LEAST_1})")
    args = parser.parse_args(argv)
    path = Path(args.run)
    state_file = path / "trainer_state.json" if path.is_dir() else path
    if not state_file.is_file():
        raise UsageError(f"no trainer_state.json at {state_file}")
    history = read_json(state_file, "trainer state").get("log_history", [])
    if not isinstance(history, list) or not all(isinstance(entry, dict) for entry in history):
        raise UsageError(f"{state_file}: log_history is not a list of logged steps (a trainer_state.json?)")
    out = Path(args.out) if args.out else state_file.parent / "rewards.png"
    if out.is_dir():
        raise UsageError(f"--out {out} is a directory; give the PNG's path (e.g. {out / 'rewards.png'})")
    out = out if out.suffix else out.with_suffix(".png")  # what matplotlib writes for a path without one
    if (kind := out.suffix[1:].lower()) not in image_formats():
        raise UsageError(f"--out {out}: cannot write a .{kind} image; use one of .{', .'.join(image_formats())}")
    plot(reward_series(history), out, args.window, state_file.parent.name)
    log.info("wrote %s", out)
    return 0
