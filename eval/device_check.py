"""`review-lab device-check`: the hf backend on an accelerator, checked against a CPU evaluation of
the same stories.

Run it where torch sees a GPU, on a run evaluated on a CPU (`stories.jsonl` + `eval/scores.jsonl`):
it re-scores the run's stories with the judge (logprob mode, the run's rubric and seed) and the
writer's surprisal on this machine, and prints how far each number moved. Both sides compute in
bf16 but through different kernels (oneDNN and our CPU decode kernel there, cuBLAS and SDPA here),
so the differences must be numerical noise: `--tolerance` bounds the largest one (exit 1 beyond).
An expected judge score is the most sensitive number: the digit logits are rounded to bf16 (steps of
0.125 at their magnitude of 16-32, ~13% in a probability), so it moves by up to ~0.2 where a
surprisal, a mean over hundreds of tokens, moves by ~0.01.

Which stories share a forward pass moves a bf16 score too (up to ~0.1 of an expected judge score
on a CPU: logits are rounded to bf16), so the stories are scored in the chunks and batch width the
evaluation used (`eval.run.group_chunks`); on the CPU that evaluated the run every difference is 0.

    review-lab device-check --run runs/benchmark_full/single --chunks 1 --out runs/device_check
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from eval.judge import Judge
from eval.metrics.surprisal import surprisal
from eval.run import group_chunks, prompt_groups
from eval.text import sanitize
from generate.backends import backend_options, load_model
from generate.common.config import parse_config
from generate.common.errors import UsageError
from generate.common.inputs import read_json
from generate.common.jsonl import read_jsonl
from generate.common.manifest import write_manifest
from generate.common.ranges import NON_NEGATIVE, in_range

log = logging.getLogger("device_check")
EXAMPLE = "review-lab device-check --run runs/benchmark/single --chunks 1 --out runs/device_check"


@dataclass
class DeviceCheckConfig:
    run: str = field(default="", metadata={"help": "a generation run evaluated on a CPU (logprob judge)"})
    out: str = "runs/device_check"
    chunks: int | None = field(default=1, metadata=in_range(
        NON_NEGATIVE, help="the evaluation's first N chunks of stories (all: 0)"))
    tolerance: float = field(default=0.25, metadata=in_range(
        NON_NEGATIVE, help="largest allowed |device - cpu| of any score"))


def main(argv: Sequence[str] | None = None) -> int:
    cfg = parse_config(DeviceCheckConfig, argv, prog="review-lab device-check", description=__doc__.split("\n\n")[0],
                       example=EXAMPLE)
    run = Path(cfg.run)
    manifest, cpu = _cpu_evaluation(run)
    judge_fp, ecfg = manifest["provenance"]["judge"], manifest["config"]
    scored = [s for s in read_jsonl(run / "stories.jsonl") if s["story_id"] in cpu]
    chunks = [[s for g in chunk for s in g] for chunk in group_chunks(prompt_groups(scored), ecfg["chunk_stories"])]
    chunks = chunks[:cfg.chunks or None]
    stories = [s for chunk in chunks for s in chunk]
    models = {s["model"] for s in stories}
    if len(models) != 1:
        raise UsageError(f"{run} holds stories of {len(models)} writer models; the check takes one")
    spec = models.pop()
    model = load_model(spec, **backend_options(spec, batch_size=ecfg["batch_size"]))
    judge = Judge(model, mode="logprob", seed=ecfg["seed"])
    if judge.rubric.sha256() != judge_fp["rubric_sha256"]:
        raise UsageError(f"{run} was judged with another rubric than configs/judge/rubric.yaml")
    here, seconds = _rescore(judge, model, chunks)
    rows = {key: _agreement([cpu[s["story_id"]].get(key) for s in stories], [h.get(key) for h in here])
            for key in (*judge.aspects, "surprisal")}
    worst = max((r["max_abs_diff"] for r in rows.values() if r["n"]), default=math.inf)
    result = {"stories": len(stories), "backend": model.backend.describe(), "cpu_judge": judge_fp,
              "seconds": seconds, "agreement": rows, "max_abs_diff": worst, "tolerance": cfg.tolerance,
              "passed": worst <= cfg.tolerance}
    out = Path(cfg.out)
    write_manifest(out, kind="device_check", config=asdict(cfg), seed=0)
    (out / "device_check.json").write_text(json.dumps(result, indent=2) + "\n")
    print(_markdown(result))
    return 0 if result["passed"] else 1


def _cpu_evaluation(run: Path) -> tuple[dict, dict[str, dict]]:
    """(the evaluation's manifest, its scores by story id); a run not judged in logprob mode is refused."""
    scores_path, manifest_path = run / "eval" / "scores.jsonl", run / "eval" / "manifest.json"
    if not scores_path.is_file() or not manifest_path.is_file():
        raise UsageError(f"no {scores_path} with its manifest (evaluate the run on a CPU first)")
    manifest = read_json(manifest_path, "manifest")
    judge_fp = (manifest.get("provenance") or {}).get("judge")
    if not judge_fp or judge_fp.get("mode") != "logprob":
        raise UsageError(f"{run} was not judged in logprob mode; the check compares expected scores")
    return manifest, {r["story_id"]: r for r in read_jsonl(scores_path)}


def _rescore(judge: Judge, model, chunks: list[list[dict]]) -> tuple[list[dict], dict[str, float]]:
    """Judge scores and surprisal of every story on this machine, chunk by chunk, with their seconds."""
    judged, surprisals, judge_s, surprisal_s = [], [], 0.0, 0.0
    for chunk in chunks:
        texts = [sanitize(s["text"])[0] for s in chunk]
        started = time.perf_counter()
        judged += judge.score(texts)
        judge_s += time.perf_counter() - started
        started = time.perf_counter()
        surprisals += surprisal(model, [s["prompt"] for s in chunk], texts)
        surprisal_s += time.perf_counter() - started
    here = [{**j.scores, "surprisal": m.values.get("surprisal")} for j, m in zip(judged, surprisals)]
    return here, {"judge": round(judge_s, 2), "surprisal": round(surprisal_s, 2)}


def _agreement(cpu: list[float | None], here: list[float | None]) -> dict:
    """How one score's values on this device compare with the CPU's, over stories both scored."""
    pairs = np.array([(a, b) for a, b in zip(cpu, here) if a is not None and b is not None], dtype=float)
    if len(pairs) == 0:
        return {"n": 0, "missing_here": sum(b is None for b in here)}
    diff = np.abs(pairs[:, 1] - pairs[:, 0])
    r = float(np.corrcoef(pairs.T)[0, 1]) if len(pairs) > 2 and pairs.std(axis=0).min() > 0 else None
    return {"n": len(pairs), "missing_here": sum(b is None for b in here), "cpu_mean": float(pairs[:, 0].mean()),
            "device_mean": float(pairs[:, 1].mean()), "mean_diff": float((pairs[:, 1] - pairs[:, 0]).mean()),
            "mean_abs_diff": float(diff.mean()),
            "max_abs_diff": float(diff.max()), "pearson": r}


def _markdown(result: dict) -> str:
    b = result["backend"]
    lines = [f"{result['stories']} stories; device {b.get('device')} ({b.get('dtype')}), CPU judge "
             f"{result['cpu_judge'].get('numerics')}; judge {result['seconds']['judge']} s, "
             f"surprisal {result['seconds']['surprisal']} s", "",
             "| score | n | CPU mean | device mean | mean abs diff | max abs diff | Pearson r |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for key, r in result["agreement"].items():
        if not r["n"]:
            lines.append(f"| {key} | 0 | | | | | |")
            continue
        pearson = "" if r["pearson"] is None else f"{r['pearson']:.4f}"
        lines.append(f"| {key} | {r['n']} | {r['cpu_mean']:.4f} | {r['device_mean']:.4f} | {r['mean_abs_diff']:.4f} "
                     f"| {r['max_abs_diff']:.4f} | {pearson} |")
    verdict = "within" if result["passed"] else "BEYOND"
    lines += ["", f"largest difference {result['max_abs_diff']:.4f}: {verdict} the tolerance {result['tolerance']}"]
    return "\n".join(lines)
