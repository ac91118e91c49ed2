"""The GPU path in one prepared run: engines, GRPO (two generation modes), a benchmark sample
projected to the full benchmark, and one ZeRO-2 step; prints one table.

    python scripts/gpu_check.py --out runs/gpu_check                # where torch sees a GPU
    python scripts/gpu_check.py --smoke --out /tmp/gpu_smoke        # every part but zero2, tiny, on a CPU

Each part is one of the project's own commands run as a subprocess with its own time limit, all
inside `--budget` seconds (a part that would start with too little left is skipped, and says so),
so the run fits one call to a lent machine (`scripts/gpu_pack.py` prepares what travels). Parts:

1. `static`: `scripts/check_static.py`, the static path checked before it is timed: its decode
   step replayed from a CUDA graph gives the eager loop's tokens, and its padded prefill the
   logits of a float32 reference.
2. `engines`: `scripts/bench_engines.py --paths fast static`, LLM Review on 20 prompts x 200
   tokens: completion tokens per second of each hf path and their ratio (target >= 10x), and
   whether the static path decoded from CUDA graphs.
3. `grpo_generate`: `train/grpo.py` with `configs/grpo/smollm2_gpu.yaml` for a few steps with
   trl's transformers generation: steps per minute (the first step, which compiles and warms up,
   left out), the reward per step, each reward's share.
4. `zero2`: one GRPO step under `configs/accelerate/zero2.yaml` (DeepSpeed ZeRO-2).
5. `benchmark`: `review-lab benchmark` on 20 SciFi-100 prompts (five frameworks, 400 tokens,
   evaluated), its wall time projected linearly to the 100 prompts of `make benchmark-full`
   (target < 15 min): an upper bound on a GPU, where more prompts widen batches (`sample_prompts`).
6. `grpo_paged`: part 3 with trl's continuous batching, the alternative to measure: last, so a
   budget that runs short skips it before a part the GPU issue requires.

A loan too short for all of them: `--only` runs the parts named (the next loan, the rest).
A part stopped by its time limit keeps what it measured: the paths the engines finished, the
steps the trainer printed (trainer_state.json is written only at the end). The results are
written after every part, so a call stopped before the end still brings back the parts it ran.
GRPO runs the recipe's rewards (judge, novelty_cos, kl, group_diversity, length) as they are. The
results go to `<out>/gpu_check.json` and `<out>/gpu_check.md`, each part's output to `<out>/<part>.log`,
and nothing else to `<out>`: the device tool brings back at most 8 files of 16 MiB from $OUT, so
what the parts write (trainer output folders, the benchmark's runs) goes to `--work`, outside it.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable
RECIPE = "configs/grpo/smollm2_gpu.yaml"
RETURNED_FILES = 8  # the most files the device tool brings back from $OUT: the results and one log per part


def sample_prompts(smoke: bool) -> int:
    """SciFi-100 prompts the benchmark part runs (then projected to 100). On a GPU a phase's calls
    go in one batch, so more prompts widen the batches rather than add decode steps: the time is
    mostly fixed per phase, and a linear projection from a small sample overstates the whole (from
    4 prompts, up to 25 times). 20 (two per aspect) keeps that bound within 5 times."""
    return 1 if smoke else 20


def parts(work: Path, smoke: bool, scifi100: str | None) -> list[tuple[str, list[str], int]]:
    """(name, command, seconds allowed) per part, each writing its outputs under `work`; `smoke`
    shrinks every part to run on a CPU."""
    tiny = smoke
    engines = ["--paths", "fast", "static", "--prompts", "1" if tiny else "20", "--max-new-tokens",
               "8" if tiny else "200", "--batch-size", "48", "--ceiling-tokens", "8" if tiny else "128"]
    # No checkpoints and no merged model: seconds of writing a part's budget would pay for nothing measured.
    grpo = ["train/grpo.py", "--config", RECIPE, "--save_strategy", "no", "--save_merged", "false",
            "--max_steps", "1" if tiny else "4", "--logging_steps", "1"]
    if tiny:
        grpo += ["--use_cpu", "true", "--per_device_train_batch_size", "4", "--gradient_accumulation_steps", "1",
                 "--num_generations", "4", "--max_completion_length", "8"]
    launch = [PY, "-m", "accelerate.commands.launch", "--num_processes", "1"]
    single = [*launch, "--config_file", f"configs/accelerate/{'cpu' if tiny else 'ddp'}.yaml"]
    bench = [PY, "-m", "train.cli", "benchmark", "--dataset", scifi100 or "default",
             "--limit", str(sample_prompts(tiny)),
             "--max-new-tokens", "8" if tiny else "400", "--reference-max-chunks", "2000",  # as packed and cached
             "--out", str(work / "benchmark")]
    check = ["--prompts", "3", "--max-new-tokens", "8"] if tiny else []
    # Cheapest definite answers first: the one ZeRO-2 step (about a minute) before the benchmark
    # sample, which takes what the budget has left; the alternative generation mode last.
    out_parts = [
        ("static", [PY, "scripts/check_static.py", *check], 90),
        ("engines", [PY, "scripts/bench_engines.py", *engines], 300),
        ("grpo_generate", [*single, *grpo, "--output_dir", str(work / "grpo_generate")], 150),
    ]
    if not tiny:  # DeepSpeed needs a GPU
        # One ZeRO-2 step shows DeepSpeed runs; one micro-batch (4 prompts x 8) keeps it cheap.
        out_parts.append(("zero2", [*launch, "--config_file", "configs/accelerate/zero2.yaml", *grpo,
                                    "--max_steps", "1", "--gradient_accumulation_steps", "1",
                                    "--output_dir", str(work / "zero2")], 120))
    out_parts += [("benchmark", bench, 210),
                  ("grpo_paged", [*single, *grpo, "--use_transformers_continuous_batching", "true",
                                  "--output_dir", str(work / "grpo_paged")], 150)]
    return out_parts


def run_part(name: str, cmd: list[str], seconds: float, out: Path) -> dict:
    """Run one part, its output in `<out>/<name>.log`; {"rc", "seconds", "log"}.

    The part runs in its own process group, killed whole at its time limit: `accelerate launch`
    runs the trainer as a child, which killing the launcher alone would leave on the card, still
    running beside the next part and skewing its timings."""
    log = out / f"{name}.log"
    start = time.perf_counter()
    with log.open("w") as f:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=f, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            rc = proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            rc = "timeout"
        finally:  # also when this script is interrupted: nothing of the part outlives it
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
    return {"rc": rc, "seconds": round(time.perf_counter() - start, 1), "log": log.read_text(errors="replace")}


def engines_result(log: str) -> dict:
    """Tokens per second per path and the ratios, from bench_engines' lines."""
    rates = {m[1]: float(m[2]) for m in re.finditer(r"^(\w+): review, .*?([\d.]+) completion tokens/s", log, re.M)}
    ratios = {m[1]: float(m[2]) for m in re.finditer(r"^ratio (\w+/\w+) .*?: ([\d.]+)x", log, re.M)}
    if not ratios and len(rates) > 1:  # stopped before its last lines: the ratios from the paths it finished
        first, *others = rates
        ratios = {f"{p}/{first}": round(rates[p] / rates[first], 2) for p in others}
    mode = re.search(r"^static decode: (.*)$", log, re.M)
    return {"tokens_per_s": rates, "ratios": ratios, **({"static_decode": mode[1]} if mode else {})}


def static_result(log: str) -> dict:
    """The check's verdict line, less its prefix."""
    line = re.search(r"^static check: (.*)$", log, re.M)
    return {"check": line[1]} if line else {}


def logged_steps(log: str) -> list[dict]:
    """The per-step dicts the trainer printed (values as `{:.4g}` strings): what a part stopped by
    its time limit leaves, since trainer_state.json is written only at the end."""
    steps = []
    for m in re.finditer(r"\{'loss'.*?\}", log):
        try:
            entry = ast.literal_eval(m[0])
        except (ValueError, SyntaxError):
            continue
        numbers = {}
        for k, v in entry.items():
            try:
                numbers[k] = float(v)
            except (TypeError, ValueError):
                pass
        steps.append(numbers)
    return steps


def grpo_result(output_dir: Path, log: str = "") -> dict:
    """Steps per minute (the first step left out when there are more), rewards and reward shares,
    from trainer_state.json, or from the printed steps when the run stopped before writing it whole
    (a part killed at its limit while the trainer writes it leaves it cut short)."""
    try:
        history = json.loads((output_dir / "trainer_state.json").read_text())["log_history"]
    except (OSError, ValueError, KeyError):
        history = logged_steps(log)
    logs = [e for e in history if "timing/step_s" in e]
    if not logs:
        return {}
    steady = logs[1:] or logs
    step_s = statistics.fmean(e["timing/step_s"] for e in steady)
    shares = {k.removeprefix("timing/reward/").removesuffix("_s"): round(statistics.fmean(
        e[k] for e in steady) / step_s, 3) for k in steady[0] if k.startswith("timing/reward/")}
    return {"steps": len(logs), "step_s": round(step_s, 2), "steps_per_min": round(60 / step_s, 2),
            "first_step_s": round(logs[0]["timing/step_s"], 2),
            "reward": [round(e.get("reward", 0.0), 4) for e in logs],
            "rewards_share": round(statistics.fmean(e.get("timing/rewards_share", 0.0) for e in steady), 3),
            "reward_shares": shares}


def benchmark_result(seconds: float, limit: int, full: int = 100) -> dict:
    return {"sample_prompts": limit, "seconds": seconds, "projected_full_min": round(seconds * full / limit / 60, 1)}


def why(log: str) -> str:
    """Why a part failed: the project's own `error:` line, else the last error-looking line that is
    not a launcher's echo of the failed command."""
    lines = log.splitlines()
    ours = [x for x in lines if x.startswith("error:")]
    found = ours or [x for x in lines if re.search(r"[Ee]rror|refuse|cannot", x) and "CalledProcessError" not in x]
    return (found or lines or ["(no output)"])[-1][:200]


def table(results: dict) -> str:
    rows = ["| part | result | seconds |", "|---|---|---:|"]
    for name, r in results["parts"].items():
        if r.get("skipped"):
            rows.append(f"| {name} | skipped: {r['skipped']} | |")
            continue
        if r["rc"] != 0:
            done = (f"; before that: {summary(name, r)}" if r.get("tokens_per_s") or r.get("steps") or r.get("check")
                    else "")
            rows.append(f"| {name} | failed ({r['rc']}): {r.get('why', '')}{done} | {r['seconds']} |")
            continue
        rows.append(f"| {name} | {summary(name, r)} | {r['seconds']} |")
    return "\n".join(rows)


def summary(name: str, r: dict) -> str:
    if r.get("unreadable"):
        return f"its output could not be read: {r['unreadable']}"
    if name == "static":
        return r.get("check", "no verdict printed")
    if name == "engines":
        rates = ", ".join(f"{p} {v:,.0f} tok/s" for p, v in r["tokens_per_s"].items())
        mode = f"; static decode: {r['static_decode']}" if r.get("static_decode") else ""
        return rates + "".join(f"; {k} {v:.1f}x" for k, v in r["ratios"].items()) + mode
    if name.startswith("grpo") or name == "zero2":
        if not r.get("steps"):
            return "no steps logged"
        shares = ", ".join(f"{k} {v:.0%}" for k, v in r["reward_shares"].items())
        return (f"{r['steps']} steps, {r['step_s']} s/step ({r['steps_per_min']}/min; first {r['first_step_s']} s); "
                f"reward {r['reward']}; rewards {r['rewards_share']:.0%} of a step ({shares})")
    if name == "benchmark":
        return (f"{r['sample_prompts']} prompts in {r['seconds']} s: full benchmark <= {r['projected_full_min']} min "
                "(linear from the sample: an upper bound where batches widen with the prompts)")
    return "ok"


def measured(name: str, r: dict, log: str, work: Path, smoke: bool) -> dict:
    """What a part measured, read from its log or output folder. It counts even when the part
    stopped early (the loan is short): the paths or steps it finished. A benchmark sample that did
    not finish projects nothing. An output this cannot read is reported as such, never raised: the
    parts after it still run and the table is still printed (a loan is not repeated for a parse)."""
    readers = {"static": lambda: static_result(log), "engines": lambda: engines_result(log),
               "benchmark": lambda: benchmark_result(r["seconds"], sample_prompts(smoke)) if r["rc"] == 0 else {}}
    try:
        return readers.get(name, lambda: grpo_result(work / name, log))()  # grpo_generate, zero2, grpo_paged
    except Exception as exc:  # noqa: BLE001 (any misread output: say so, keep going)
        return {"unreadable": f"{type(exc).__name__}: {exc}"[:200]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="runs/gpu_check", help="the results and one log per part, nothing else")
    ap.add_argument("--work", help="where the parts write their outputs (default: <out>-work, beside --out)")
    ap.add_argument("--budget", type=float, default=540, help="seconds for all parts together")
    ap.add_argument("--smoke", action="store_true",
                    help="every part but zero2 (DeepSpeed needs a GPU), tiny: a CPU check of this script")
    ap.add_argument("--only", nargs="*", help="run only these parts")
    ap.add_argument("--scifi100", default=os.environ.get("SCIFI100_PATH"), help="SciFi-100 JSON for the benchmark")
    args = ap.parse_args(argv)
    out = Path(args.out).resolve()
    work = Path(args.work).resolve() if args.work else out.with_name(out.name + "-work")
    if work == out or out in work.parents:
        ap.error(f"--work {work} is inside --out {out}: only the results may be written there")
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    import torch  # after the arguments: --help needs no torch

    results = {"torch": torch.__version__, "python": sys.version.split()[0],
               "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None, "parts": {}}
    if args.scifi100:
        os.environ["SCIFI100_PATH"] = args.scifi100
    deadline = time.monotonic() + args.budget
    for name, cmd, seconds in parts(work, args.smoke, args.scifi100 and "scifi100"):
        if args.only and name not in args.only:
            continue
        left = deadline - time.monotonic()
        if left < 30:
            results["parts"][name] = {"skipped": f"{left:.0f} s of the budget left"}
            continue
        shutil.rmtree(work / name, ignore_errors=True)  # an earlier run's: it would be resumed, or read as this one's
        r = run_part(name, cmd, min(seconds, left), out)
        log = r.pop("log")
        if r["rc"] != 0:
            r["why"] = why(log)
        r.update(measured(name, r, log, work, args.smoke))
        results["parts"][name] = r
        print(f"{name}: {r}", flush=True)
        write(results, out)
    print(write(results, out))
    return 0 if all(r.get("rc") == 0 for r in results["parts"].values()) else 1


def write(results: dict, out: Path) -> str:
    """`gpu_check.json` and `.md` as they stand (after every part: a call stopped early keeps them)."""
    text = f"GPU check: {results['gpu'] or 'no GPU'}, torch {results['torch']}, Python {results['python']}\n\n"
    text += table(results)
    (out / "gpu_check.json").write_text(json.dumps(results, indent=2) + "\n")
    (out / "gpu_check.md").write_text(text + "\n")
    return text


if __name__ == "__main__":
    sys.exit(main())
