"""The judge reward: the evaluation's LLM judge (`eval.judge.Judge`), as a quality score in [0, 1].

Known failure modes of judge rewards in GRPO (trl issues): serial calls are slow, and one hung
call freezes every rank. So the reward is `async` (trl gathers async rewards concurrently), all
completions of a step go to the judge as ONE batched `ascore` call, and that call runs under a
per-call timeout: a failed or timed-out call gives None for the affected completions (trl leaves
None out of the weighted sum) and training moves on.

A local (hf) judge runs its forward passes in a worker thread that cannot be interrupted: after a
timeout that pass finishes in the background and the next call may queue behind it (and time out
in turn) — training still never waits longer than `timeout` per step. With several processes each
rank judges its own slice of completions with its own judge instance (one model copy per rank
for a local judge; for a server, `concurrency` requests in flight per rank).

The judge is a role: `model` is any backend spec (`openai:<model>` with `base_url` for a separate
server while the trainer owns the GPU, `hf:<dir>`, or the embedded `smollm2-135m-instruct`,
which only works in `logprob` mode). The quality gate awaits the same batched call: concurrent
callers with the same options and stories share one in-flight task.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import OrderedDict
from functools import lru_cache

from eval.judge import Judge, Judgement
from generate.backends import backend_options, load_model
from rewards import timing
from rewards.registry import reward
from rewards.text import completion_texts

log = logging.getLogger(__name__)

_KEEP = 4
_inflight: OrderedDict[tuple, tuple[asyncio.AbstractEventLoop, asyncio.Future]] = OrderedDict()


@lru_cache(maxsize=4)
def get_judge(model: str, mode: str, samples: int, rubric: str | None, batch_size: int, base_url: str | None,
              concurrency: int, retries: int) -> Judge:
    """One judge per configuration and process (loading a local judge model takes seconds)."""
    options = backend_options(model, batch_size=batch_size, base_url=base_url, concurrency=concurrency)
    log.info("loading judge %s (%s mode)", model, mode)
    return Judge(load_model(model, retries=retries, **options), rubric, mode=mode, samples=samples)


def quality(judgement: Judgement, low: int, high: int) -> float | None:
    """Mean of the judged aspects, scaled from `low..high` to [0, 1]; None if none was judged.

    Aspects the judge failed on are left out of the mean rather than counted as 0: a judge
    failure is not evidence of a bad story.
    """
    values = [v for v in judgement.scores.values() if v is not None and math.isfinite(v)]
    if not values:
        return None
    return (sum(values) / len(values) - low) / (high - low)


async def _score(judge: Judge, stories: list[str], timeout: float) -> list[float | None]:
    with timing.timed("judge"):
        try:
            judgements = await asyncio.wait_for(judge.ascore(stories, desc=None), timeout)
        except asyncio.TimeoutError:
            log.warning("judge: no answer within %.0fs for %d stories; their judge reward is None", timeout,
                        len(stories))
            return [None] * len(stories)
        except Exception as exc:  # noqa: BLE001 - a judge failure must never stop training
            log.warning("judge: call failed (%s: %s); judge reward is None for this batch", type(exc).__name__, exc)
            return [None] * len(stories)
    return [quality(j, judge.rubric.low, judge.rubric.high) for j in judgements]


@reward("judge")
async def judge(prompts, completions, *, model: str = "smollm2-135m-instruct", mode: str = "logprob",
                samples: int = 1, rubric: str | None = None, timeout: float = 300.0, batch_size: int = 16,
                base_url: str | None = None, concurrency: int = 8, retries: int = 2, **columns) -> list[float | None]:
    """Judge quality in [0, 1]: the mean of the rubric's aspect scores, rescaled.

    Options: `model` (backend spec), `mode` ("logprob" | "sample"), `samples` (replies per aspect
    in sample mode), `rubric` (path; default `configs/judge/rubric.yaml`), `timeout` (seconds for
    the whole batched call), `batch_size` (hf judges), `base_url` and `concurrency` (OpenAI-
    compatible servers; the key comes from OPENAI_API_KEY), `retries` (per engine call).
    """
    stories = completion_texts(completions)
    key = (model, mode, samples, rubric, timeout, batch_size, base_url, concurrency, retries, tuple(stories))
    loop = asyncio.get_running_loop()
    entry = _inflight.get(key)
    if entry is None or entry[0] is not loop:
        judge_ = get_judge(model, mode, samples, rubric, batch_size, base_url, concurrency, retries)
        entry = (loop, asyncio.ensure_future(_score(judge_, stories, timeout)))
        _inflight[key] = entry
        while len(_inflight) > _KEEP:
            _inflight.popitem(last=False)
    return list(await asyncio.shield(entry[1]))
