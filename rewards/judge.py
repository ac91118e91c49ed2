"""The judge reward: the evaluation's LLM judge (`eval.judge.Judge`), as a quality score in [0, 1].

Known failure modes of judge rewards in GRPO (trl issues): serial calls are slow, and one hung
call freezes every rank. So the reward is `async` (trl gathers async rewards concurrently), all
completions of a step go to the judge as ONE batched `ascore` call, and that call runs under a
per-call timeout: a failed or timed-out call, or an aspect the judge failed on, gives None for the
affected completions (a judge failure carries no information: see `rewards.groups` for how the
trainer turns it into a zero advantage) and training moves on. A refusal only the user can fix (a
wrong key or model name, a spent quota: a `UsageError` from the backend) is no judge failure: every
step would fail alike, so it stops the run in one line (`RewardContext.judgements`).

An empty completion is not a judge failure: it gets quality 0, the rubric's floor ("no story").

A local (hf) judge runs its forward passes in a worker thread that cannot be interrupted: after a
timeout that pass finishes in the background and the next call may queue behind it (and time out
in turn) — training still never waits longer than `timeout` per step. With several processes each
rank judges its own slice of completions with its own judge instance.

The judge is a role: `model` is any backend spec (`openai:<model>` with `base_url` for a separate
server while the trainer owns the GPU, `hf:<dir>`, or the embedded `smollm2-135m-instruct`,
which only works in `logprob` mode). The quality gate awaits the same batched call through the
`RewardContext`.
"""

from __future__ import annotations

from collections.abc import Sequence

from eval.judge import Judgement
from eval.metrics.story import EMPTY
from eval.rubric import MODES, judge_average, load_rubric
from generate.backends.specs import check_spec
from generate.common.ranges import AT_LEAST_1, NON_NEGATIVE, POSITIVE, OneOf, checked, http_url, in_range
from rewards.context import RewardContext
from rewards.registry import reward
from rewards.text import completion_texts


def quality(judgement: Judgement | None, low: int, high: int, aspects: Sequence[str] | None = None) -> float | None:
    """The story's judge average (`eval.rubric.judge_average`, the evaluation's own definition)
    scaled from `low..high` to [0, 1]; 0 for an empty story; None when any aspect of `aspects`
    (default: every aspect the judgement holds, i.e. the rubric's) has no score.

    A story whose judge failed on one aspect gets no value rather than the mean of the others:
    that mean would rise whenever the failed aspect was the story's weakest, so judge failures
    would pay. None is a failed reward value, which the trainer fills with its group's mean
    (`rewards.groups`): no advantage either way.
    """
    if judgement is None:
        return None
    if judgement.reasons and all(r == EMPTY for r in judgement.reasons.values()):
        return 0.0
    average = judge_average(judgement.scores, list(judgement.scores) if aspects is None else aspects)
    return None if average is None else (average - low) / (high - low)


# What each option admits (`rewards.registry`), checked when a recipe is bound: a bad rubric file
# is read then, not when the judge first loads.
OPTIONS = {"model": checked(check_spec), "mode": checked(OneOf(MODES)), "samples": in_range(AT_LEAST_1),
           "rubric": checked(load_rubric), "timeout": in_range(POSITIVE), "batch_size": in_range(AT_LEAST_1),
           "base_url": checked(http_url), "concurrency": in_range(AT_LEAST_1), "retries": in_range(NON_NEGATIVE)}


@reward("judge", options=OPTIONS)
async def judge(prompts, completions, *, context: RewardContext, model: str = "smollm2-135m-instruct",
                mode: str = "logprob", samples: int = 1, rubric: str | None = None, timeout: float = 120.0,
                batch_size: int = 16, base_url: str | None = None, concurrency: int = 16, retries: int = 2,
                **columns) -> list[float | None]:
    """Judge quality in [0, 1]: the judge average over the rubric's aspects, rescaled (None, a failed
    value, when an aspect has no score).

    Options: `model` (backend spec), `mode` ("logprob" | "sample"), `samples` (replies per aspect
    in sample mode), `rubric` (path; default `configs/judge/rubric.yaml`), `timeout` (seconds for
    the whole batched call), `batch_size` (hf judges), `base_url` and `concurrency` (OpenAI-
    compatible servers; the key comes from OPENAI_API_KEY), `retries` (per engine call).
    """
    judge_ = context.judge(model, mode, samples, rubric, batch_size, base_url, concurrency, retries)
    verdicts = await context.judgements(judge_, completion_texts(completions), timeout)
    return [quality(v, judge_.rubric.low, judge_.rubric.high, judge_.aspects) for v in verdicts]
