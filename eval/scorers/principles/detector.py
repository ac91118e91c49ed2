"""The Detector: a response in, P(good) (logprob mode) or a 0/1 verdict (sample mode) out, judged
against a list of principles.

The optimisation (`rewards.principles`) and the scorer (`scorer.py`: the evaluation's signal and
the `principle_judge` reward) build their requests here and read verdicts here, so the reward and
the evaluation judge exactly as the optimised Detector was measured. Verdicts are read the
way the rubric judge reads scores (`eval.judge`), on a 0-1 scale: the reply format is `Score: <digit>`.

- `logprob`: one greedy pass per label order, prefilled with `Score:` on backends that can
  (hf, vLLM; on servers the prefix is found in the reply); P(digit) is read from the top
  alternatives and renormalised over 0 and 1 (`score_from_logprobs`). The reward is P(good).
- `sample`: one sampled reply with the paper's binary verdict (`parse_score`); a reply without a
  Score line is no verdict (None), never a 0, since a judge failure says nothing about the text.

Label orders. A small model prefers some digit, or whichever option it read first, whatever the
text. The options are listed in digit order, and with `orders=2` a second request swaps which
digit means "good"; averaging P(good) over both cancels a constant preference for a digit or a
position (a model that ignores the text then scores 0.5 for everything: visibly uninformative
rather than confidently wrong). Sample mode asks one order, the natural 1 = good.

An empty response (nothing left once sanitised) needs no judge: it is bad, P(good) = 0.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from eval.judge import SCORE_PREFIX, parse_score, score_from_logprobs
from eval.rubric import MODES, judged_text
from eval.scorers.principles.texts import Templates, fenced, numbered
from generate.backends import ChatRequest, Completion, SamplingParams
from generate.common.errors import UsageError
from generate.journal import derive_seed

THRESHOLD = 0.5  # P(good) at or above it counts as a "good" verdict


def default_orders(mode: str) -> int:
    return 2 if mode == "logprob" else 1


@dataclass(frozen=True)
class Detector:
    """Judges responses under `principles`.

    Args:
        principles: the principles the response is judged against.
        templates: the role prompts (the `detector` template and the label texts).
        mode: "logprob" or "sample".
        orders: label orders asked per response (1 or 2; sample mode: 1).
        prefill: whether the backend honours a prefilled `Score:`.
        seed: base of sample mode's per-response seeds.
        temperature, max_new_tokens: sample mode's decoding.
        top_logprobs: alternatives read at the digit position in logprob mode.
    """

    principles: tuple[str, ...]
    templates: Templates
    mode: str = "logprob"
    orders: int = 2
    prefill: bool = True
    seed: int = 0
    temperature: float = 0.7
    max_new_tokens: int = 32
    top_logprobs: int = 20

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise UsageError(f"unknown verdict mode {self.mode!r}; expected one of: {', '.join(MODES)}")
        if self.orders not in (1, 2) or (self.mode == "sample" and self.orders != 1):
            raise UsageError("label orders must be 1 or 2 in logprob mode, and 1 in sample mode")

    def requests(self, prompt: str, response: str) -> list[ChatRequest]:
        """The calls that judge one response, one per label order; none for an empty response."""
        if not judged_text(response):
            return []
        if self.mode == "sample":
            params = SamplingParams(self.max_new_tokens, self.temperature, 1.0)
            key = hashlib.sha256(f"{prompt}\x00{response}".encode()).hexdigest()[:16]
            return [ChatRequest(self._messages(prompt, response, 1), params, seed=derive_seed(self.seed, key))]
        params = SamplingParams(2 if self.prefill else 12, 0.0, 1.0)
        prefill = SCORE_PREFIX if self.prefill else None
        return [ChatRequest(self._messages(prompt, response, good), params, logprobs=self.top_logprobs,
                            prefill=prefill) for good in (1, 0)[:self.orders]]

    def verdict(self, replies: list[Completion | None]) -> float | None:
        """P(good) (logprob) or 0/1 (sample) from the replies to `requests`, in order.

        None when a reply is missing or failed, or holds no readable digit; 0.0 for no replies
        (the response was empty).
        """
        if not replies:
            return 0.0
        values = []
        for good, reply in zip((1, 0), replies, strict=False):
            if reply is None or reply.error is not None:
                return None
            if self.mode == "sample":
                return None if (v := parse_score(reply.text, 0, 1)) is None else float(v)
            p_one = score_from_logprobs(reply, self.prefill, 0, 1)
            if p_one is None:
                return None
            values.append(p_one if good == 1 else 1.0 - p_one)
        return sum(values) / len(values)

    def _messages(self, prompt: str, response: str, good: int) -> list[dict[str, str]]:
        meaning = {good: self.templates.labels["good"], 1 - good: self.templates.labels["bad"]}
        labels = "\n".join(f"{d}: {meaning[d]}" for d in (0, 1))
        text = self.templates.render("detector", principles=numbered(self.principles), prompt=prompt,
                                     response=fenced(response), labels=labels)
        return [{"role": "user", "content": text}]
