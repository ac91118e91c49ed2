"""LLM-as-a-judge: each story scored 0-5 on each rubric aspect, every aspect in its own request.

Two modes:

- `sample` (the paper's protocol): K sampled replies per (story, aspect), each ending in a
  `Score: <digit>` line, averaged. A reply that cannot be parsed is asked again with a new seed
  (up to `max_parse_retries` times); a sample that never parses is missing, never 0, because a
  0 would read as "plagiarism-like" and drag the mean down for what is a judge failure. A blank
  reply is one that cannot be parsed, so this is the one layer that re-asks it (the `Model` is
  asked with `reask_blank=False`): a sample that stays blank is sent 1 + `max_parse_retries`
  times, and every one of them counts in `Judgement.requests`.
- `logprob`: one greedy pass; the score is the expectation of the digit distribution right after
  a fixed `Score:` prefix, sum_d p(d) d over the digits of the scale, renormalised. It uses the
  judge's whole belief instead of one sampled digit, so one pass replaces K samples, and it works
  with small models that cannot follow a reply format (the embedded SmolLM2 judge).
  Backends that can prefill (hf, vLLM) start the assistant turn with `Score:` and generate 2
  tokens; for the others (OpenAI-compatible servers) the judge generates a few tokens and reads
  the position that follows the first token run ending in `Score:`. If the reply never produces
  `Score:`, or the digits of the scale there are together less likely than the token the judge
  chose (" N" of "N/A"; a whitespace token is stepped over instead), the score is missing.

Stories reach the judge as `eval.rubric.judged_text` makes them: sanitised, and with any line
that mimics the reply format ("Score: 5") replaced by a marker, so a story cannot hand the judge
its own score. Per-request seeds derive from that text. An empty story is not judged; every
missing score carries its reason (`Judgement.reasons`).

Every request of a pass, over all stories x aspects x samples, goes to the model as ONE batch:
the `Model` wrapper sorts and splits it for the engine. A backend that stays down after its
retries makes the affected requests missing (counted in the diagnostics), not the run crash.
Such a score is missing for a transient cause (`Judgement.retry`): with a call journal
(`journal`), every finished judge call is kept, and the evaluation scores that story again on its
next run, asking only the calls that failed, with the same seeds. A score missing for a
deterministic cause (an empty story, a request the backend refused, no parseable reply) is final.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from dataclasses import dataclass, field

from eval.metrics.story import EMPTY
from eval.rubric import MODES, Rubric, judged_text, load_rubric
from eval.rubric_reply import SCORE_PREFIX, expected_score, logprob_score, parse_score, score_from_logprobs
from generate.backends import BackendUnavailable, ChatRequest, Completion, Model, SamplingParams, gave_up
from generate.backends.identity import model_identity
from generate.common.errors import UsageError
from generate.journal import Journal, derive_seed, request_key

__all__ = ["SCORE_PREFIX", "Judge", "JudgeStats", "Judgement", "expected_score", "logprob_score", "model_identity",
           "parse_score", "score_from_logprobs"]
log = logging.getLogger(__name__)


@dataclass
class Judgement:
    """One story's judgement.

    Attributes:
        scores: aspect -> mean of the valid samples (sample mode) or expected score (logprob
            mode); None when no valid judgement exists, and then `reasons[aspect]` says why.
        samples: aspect -> the valid judgements: sampled digits (sample mode) or the one
            expected score (logprob mode); their count is the aspect's `n_samples`.
        requests: judge replies received for this story, re-asks included.
        parse_failures: replies that held no valid score (each re-ask counts again).
        backend_failures: requests lost because the backend stayed down.
        reasons: aspect -> why its score is missing.
        replies: aspect -> every reply the judge gave in sample mode (re-asks included, in the
            order received), so a reader can see why a story got its score.
        retry: aspects with a judge call lost to a transient failure (retries run out): their
            scores are not final, a later run asks those calls again.
    """

    scores: dict[str, float | None]
    samples: dict[str, list[float]] = field(default_factory=dict)
    requests: int = 0
    parse_failures: int = 0
    backend_failures: int = 0
    reasons: dict[str, str] = field(default_factory=dict)
    replies: dict[str, list[str]] = field(default_factory=dict)
    retry: set[str] = field(default_factory=set)

    @classmethod
    def empty(cls, aspects: list[str]) -> Judgement:
        return cls({a: None for a in aspects}, {a: [] for a in aspects})

    def diagnostics(self) -> dict:
        return {"n_samples": {a: len(v) for a, v in self.samples.items()}, "requests": self.requests,
                "parse_failures": self.parse_failures, "backend_failures": self.backend_failures}


@dataclass
class JudgeStats:
    """Totals over every `score` call of a judge."""

    requests: int = 0
    parse_failures: int = 0
    backend_failures: int = 0

    @property
    def parse_failure_rate(self) -> float | None:
        return self.parse_failures / self.requests if self.requests else None

    def add(self, j: Judgement) -> None:
        self.requests += j.requests
        self.parse_failures += j.parse_failures
        self.backend_failures += j.backend_failures


class Judge:
    """Scores stories on every rubric aspect with one batched model call per pass.

    Args:
        model: the judge model.
        rubric: a `Rubric` or a path to one (default: `configs/judge/rubric.yaml`).
        mode: "sample" or "logprob".
        samples: K replies per (story, aspect) in sample mode.
        max_parse_retries: re-asks of an unparseable sample reply, each with a new seed.
        temperature, top_p: sampling settings of sample mode (logprob mode is greedy).
        max_new_tokens: reply budget in sample mode (reasoning plus the score line).
        seed: base of the per-request seeds, which depend on the text the judge sees, aspect,
            sample and attempt, so a resumed evaluation asks exactly the same questions.
        top_logprobs: alternatives read per position in logprob mode (20 is the OpenAI maximum).
        journal: where finished judge calls are kept and replayed from (an evaluation's
            `judge_calls.jsonl`); None: every call is asked.
    """

    def __init__(self, model: Model, rubric: Rubric | str | None = None, *, mode: str = "sample", samples: int = 3,
                 max_parse_retries: int = 2, temperature: float = 0.7, top_p: float = 1.0,
                 max_new_tokens: int = 192, seed: int = 0, top_logprobs: int = 20, journal: Journal | None = None):
        if mode not in MODES:
            raise UsageError(f"unknown judge mode {mode!r}; expected one of: {', '.join(MODES)}")
        if samples < 1 or max_parse_retries < 0:
            raise UsageError("judge samples must be >= 1 and max_parse_retries >= 0")
        self.model = model
        self.rubric = rubric if isinstance(rubric, Rubric) else load_rubric(rubric)
        self.mode = mode
        self.samples = samples
        self.max_parse_retries = max_parse_retries
        self.sample_params = SamplingParams(max_new_tokens, temperature, top_p)
        self.seed = seed
        self.top_logprobs = top_logprobs
        self.journal = journal
        self.prefill = bool(model.backend.supports_prefill)
        # Prefilled: " " and the digit at most. Otherwise room for "Score", ":", " 4" and a preamble.
        self.logprob_params = SamplingParams(2 if self.prefill else 12, 0.0, 1.0)
        self.stats = JudgeStats()

    @property
    def aspects(self) -> list[str]:
        return list(self.rubric.aspects)

    def fingerprint(self) -> dict:
        """What identifies this judge's scores: model (by name and, where it can be read, by content:
        `model_identity`), mode, decoding, rubric and, where the backend picks them by the machine,
        the numerics (bf16 or float32) its logits were computed in."""
        out = {"model": self.model.name, **model_identity(self.model.name), "mode": self.mode,
               "rubric_sha256": self.rubric.sha256()}
        numerics = self.model.backend.numerics()
        if numerics:
            out["numerics"] = numerics
        if self.mode == "sample":
            p = self.sample_params
            out.update(samples=self.samples, max_parse_retries=self.max_parse_retries, temperature=p.temperature,
                       top_p=p.top_p, max_new_tokens=p.max_new_tokens)
        return out

    def score(self, stories: list[str], desc: str | None = "judge") -> list[Judgement]:
        """Judge every story on every aspect (synchronous wrapper of `ascore`)."""
        return asyncio.run(self.ascore(stories, desc))

    async def ascore(self, stories: list[str], desc: str | None = "judge") -> list[Judgement]:
        """Judge every story on every aspect; usable from a running event loop (async rewards).

        An empty story is not sent: its aspects are missing with the reason "empty story".
        """
        texts = [judged_text(s) for s in stories]
        out = [Judgement.empty(self.aspects) for _ in texts]
        todo = [i for i, t in enumerate(texts) if t]
        for i in set(range(len(texts))) - set(todo):
            out[i].reasons = {a: EMPTY for a in self.aspects}
        if todo:
            scored = await (self._logprob if self.mode == "logprob" else self._sample)([texts[i] for i in todo], desc)
            for i, j in zip(todo, scored):
                out[i] = j
        for j in out:
            self.stats.add(j)
        return out

    def _messages(self, mode: str, aspect: str, story: str) -> list[dict[str, str]]:
        return [{"role": "user", "content": self.rubric.render(mode, aspect, story)}]

    async def _sample(self, stories: list[str], desc: str | None) -> list[Judgement]:
        low, high = self.rubric.low, self.rubric.high
        out = [Judgement.empty(self.aspects) for _ in stories]
        keys = [_story_key(s) for s in stories]
        errors: dict[tuple[int, str], str] = {}
        pending = [(i, a, k) for i in range(len(stories)) for a in self.aspects for k in range(self.samples)]
        for attempt in range(self.max_parse_retries + 1):
            if not pending:
                break
            requests = [ChatRequest(self._messages("sample", a, stories[i]), self.sample_params,
                                    seed=derive_seed(self.seed, keys[i], a, k, attempt)) for i, a, k in pending]
            label = desc if attempt == 0 or desc is None else f"{desc} (re-ask {attempt})"
            replies = await self._generate(requests, label)
            retry = []
            for (i, a, k), reply in zip(pending, replies):
                if reply is None or reply.error is not None:
                    out[i].backend_failures += 1
                    errors[(i, a)] = _failure(reply)
                    if reply is None or gave_up(reply):
                        out[i].retry.add(a)
                    continue
                out[i].requests += 1
                out[i].replies.setdefault(a, []).append(reply.text)
                value = parse_score(reply.text, low, high)
                if value is None:
                    out[i].parse_failures += 1
                    retry.append((i, a, k))
                else:
                    out[i].samples[a].append(value)
            pending = retry
        if pending:
            log.warning("judge: %d sample(s) still unparseable after %d re-asks; counted as missing",
                        len(pending), self.max_parse_retries)
        for i, j in enumerate(out):
            j.scores = {a: (sum(v) / len(v) if v else None) for a, v in j.samples.items()}
            j.reasons = {a: errors.get((i, a), f"no parseable Score line in {1 + self.max_parse_retries} "
                                              f"attempt(s) per sample") for a, v in j.scores.items() if v is None}
        return out

    async def _logprob(self, stories: list[str], desc: str | None) -> list[Judgement]:
        slots = [(i, a) for i in range(len(stories)) for a in self.aspects]
        requests = [ChatRequest(self._messages("logprob", a, stories[i]), self.logprob_params,
                                logprobs=self.top_logprobs, prefill=SCORE_PREFIX if self.prefill else None)
                    for i, a in slots]
        replies = await self._generate(requests, desc)
        out = [Judgement.empty(self.aspects) for _ in stories]
        for (i, a), reply in zip(slots, replies):
            if reply is None or reply.error is not None:
                out[i].backend_failures += 1
                out[i].reasons[a] = _failure(reply)
                if reply is None or gave_up(reply):
                    out[i].retry.add(a)
                continue
            out[i].requests += 1
            value, why = logprob_score(reply, self.prefill, self.rubric.low, self.rubric.high)
            if value is None:
                out[i].parse_failures += 1
                out[i].reasons[a] = why
            else:
                out[i].samples[a].append(value)
            out[i].scores[a] = value
        return out

    async def _generate(self, requests: list[ChatRequest], desc: str | None) -> list[Completion | None]:
        """One batched call of the requests the journal does not hold (each journaled as its engine
        call returns); requests lost to a backend that stays down come back as None."""
        # Keyed by content too: calls a judge retrained at the same path made are not replayed.
        name = "@".join([self.model.name, *model_identity(self.model.name).values()])
        keys = [request_key(name, r) for r in requests] if self.journal is not None else []
        results: list[Completion | None] = [self.journal.get(k) for k in keys] if keys else [None] * len(requests)
        todo = [i for i, r in enumerate(results) if r is None]
        if not todo:
            return results

        def keep(idx: list[int], outs: list[Completion]) -> None:
            for i, o in zip(idx, outs):
                results[todo[i]] = o
            if self.journal is not None:
                self.journal.add([keys[todo[i]] for i in idx], outs)

        try:
            # Sample mode re-asks unusable (blank included) replies itself (`_sample`): the model must
            # not re-ask them too, or a blank sample would be sent (1 + its re-asks) x (1 + ours) times.
            await self.model.agenerate([requests[i] for i in todo], desc=desc, on_done=keep,
                                       reask_blank=self.mode != "sample")
        except BackendUnavailable as exc:
            lost = sum(r is None for r in results)
            log.warning("judge backend unavailable (%s): %d of %d judge calls are missing", exc, lost, len(requests))
        return results


def _failure(reply: Completion | None) -> str:
    if reply is None:
        return "judge backend failed after its retries"
    return f"judge request failed: {reply.error}"


def _story_key(story: str) -> str:
    return hashlib.sha256(story.encode("utf-8")).hexdigest()[:16]
