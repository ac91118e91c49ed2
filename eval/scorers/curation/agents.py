"""The curation agents of one candidate response, written as a generator of phases.

Like the generation frameworks (`generate/frameworks/review.py`), `curate` never calls a model:
it yields a `Step` of chat requests per phase and receives their completions, so the driver (the
scorer, `scorer.py`, or the curation pipeline, `rewards.curation.run`) sends every pending call of
every response to the backend as one batch and tests drive it with scripted replies. Phases:
`debate` (Positive and Negative, each a numbered list), `judge` (a 1/0 verdict weighing both
lists), `reflect` (does the judge's decision stand?). The Retrieval agent's passages
arrive already rendered (`examples`): one vector query per prompt, made by the driver.

Order matters where an agent reads both lists, and a weak model also prefers one digit whatever
it read (SmolLM2 says "1" with p ~ 0.9), so every verdict is asked in each view
(`verdict_views`): both orders of the lists (strengths first, weaknesses first) times both digit
assignments (1 = yes, 0 = yes), and P(yes) is averaged over the views. A verdict is good iff the
judge's mean P(good) > `threshold` (0.5); the reflect agent's decision stands iff its mean
P(stands) >= 0.5.

Verdicts reuse the evaluation judge's reply format and readers (`eval.judge`): in `logprob` mode
one greedy pass prefilled with `Score:` and the expected value of the digits 0/1 right after it,
which is P(1) renormalised over {0, 1}; in `sample` mode a sampled reply whose last `Score: N`
line counts. A reply that cannot be used (no list, no score) is asked again with a new seed up to
`max_parse_retries` times (not in logprob mode: greedy decoding would repeat itself); if it stays
unusable the protocol returns a failure naming the agent and the reason, never an empty list. A
blank reply is unusable, so this is the one layer that re-asks it: the drivers ask the model with
`reask_blank=False`, and a call that stays blank is sent 1 + `max_parse_retries` times, each
attempt a call of its own whose tokens the driver counts (`scorer.drive_curation`).

Ablations (`without`, the paper's Table 4), precisely:
- `positive` / `negative`: that agent is not asked; the judge and the reflect agent read only the
  other list (one order: two views, for the two digit assignments); without both they read the
  story alone.
- `judge`: no judge call; the initial verdict is the debate's tally, good iff the Positive agent
  listed strictly more points than the Negative agent (a missing list counts 0); the reflect
  agent then checks that decision.
- `reflect`: no reflect call; the final verdict is the initial one (never overturned).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Generator
from dataclasses import dataclass, field

from eval.judge import parse_score, score_from_logprobs
from eval.rubric import SCORE_LINE, judged_text
from eval.scorers.curation.prompts import CurationPrompts, evidence, fence
from generate.backends import ChatRequest, Completion, SamplingParams
from generate.common.errors import UsageError
from generate.journal import derive_seed

DEBATERS = ("positive", "negative")
ABLATABLE = ("positive", "negative", "judge", "reflect")
VERDICT_MODES = ("logprob", "sample")
VERDICT_PREFIX = "Score:"
LIST_PREFILL = "1."
# Both orders of the two lists; with one list (or none) there is nothing to reorder.
ORDERS = {"strengths-first": DEBATERS, "weaknesses-first": DEBATERS[::-1]}
_SKIPPABLE = " \t\r\n*_`"
_ITEM = re.compile(r"^\s*(?:\d{1,2}\s*[.):]|[-*\u2022])\s*(.+?)\s*$")


@dataclass(frozen=True)
class Settings:
    """How every response is curated (one value per run, recorded in the manifest)."""

    without: frozenset[str] = frozenset()
    verdict: str = "logprob"
    threshold: float = 0.5  # the judge calls a response good iff P(good) > threshold
    max_items: int = 5
    max_parse_retries: int = 2
    list_params: SamplingParams = field(default_factory=lambda: SamplingParams(160, 0.7, 0.9))
    sample_params: SamplingParams = field(default_factory=lambda: SamplingParams(160, 0.7, 0.9))
    prefill: bool = True  # the backend honours `ChatRequest.prefill`
    top_logprobs: int = 20
    seed: int = 0

    def __post_init__(self) -> None:
        if unknown := set(self.without) - set(ABLATABLE):
            raise UsageError(f"unknown --without {sorted(unknown)}; choose from: {', '.join(ABLATABLE)}")
        if self.verdict not in VERDICT_MODES:
            raise UsageError(f"unknown verdict mode {self.verdict!r}; choose one of: {', '.join(VERDICT_MODES)}")
        if not 0 <= self.threshold < 1 or self.max_items < 1 or self.max_parse_retries < 0:
            raise UsageError("need 0 <= threshold < 1, max_items >= 1 and max_parse_retries >= 0")


@dataclass
class AgentCall:
    agent: str
    view: str  # how a verdict is asked (`verdict_views`), "single" for a list
    request: ChatRequest


@dataclass
class Step:
    phase: str
    calls: list[AgentCall] = field(default_factory=list)


Protocol = Generator[Step, list[Completion], dict]


def parse_items(text: str, limit: int) -> list[str]:
    """The distinct points of a numbered or bulleted list, at most `limit`; [] when there is none.

    A line that does not start a point continues the previous one (models wrap long points); a
    point needs three letters; score claims are removed as from judged stories.
    """
    items: list[str] = []
    for line in text.splitlines():
        match = _ITEM.match(line)
        if match:
            items.append(match.group(1))
        elif items and line.strip():
            items[-1] += " " + line.strip()
    out: list[str] = []
    for item in items:
        item = " ".join(judged_text(item.replace("**", "")).split())
        # A repetition loop ("1. Vivid. 2. Vivid. 3. Vivid.") is one point, not three.
        if sum(ch.isalpha() for ch in item) >= 3 and item.lower() not in {o.lower() for o in out}:
            out.append(item)
    return out[:limit]


def curate(key: str, task: str, story: str, examples: str, prompts: CurationPrompts, s: Settings,
           attempt: Callable[[str, str], int] = lambda agent, view: 0) -> Protocol:
    """Curate one response; returns its judgment, or `{"status": "failed", agent, phase, reason, raw}`.

    Args:
        key: the response's identity (seeds derive from it, the run seed and the call's place).
        task: the writing task; story: the response; examples: the rendered retrieved passages.
        attempt: (agent, view) -> how often that call's output stayed unusable in earlier
            invocations: such a call gets fresh seeds; every other call keeps its seed, so a retried
            response replays what finished and asks only what failed. A failure names the calls to
            reseed (`reseed`: [[agent, view], ...]).
    """
    def seed(agent: str, view: str, reask: int) -> int:
        return derive_seed(s.seed, key, agent, view, reask, attempt(agent, view))

    asking = _Asking({"prompt": task, "examples": examples, "max_items": s.max_items, **fence(story)}, prompts, s,
                     seed)
    try:
        return (yield from _agents(asking))
    except Unusable as failure:
        return failure.record


class Unusable(Exception):
    """An agent's output stayed unusable: the protocol ends with `record` (a failure)."""

    def __init__(self, agent: str, phase: str, reason: str, raw: str, reseed: list[tuple[str, str]] = ()):
        super().__init__(reason)
        self.record = {"status": "failed", "agent": agent, "phase": phase, "reason": f"{agent} agent: {reason}",
                       "raw": raw[:500], "reseed": [list(call) for call in reseed]}


@dataclass(frozen=True)
class _Asking:
    """What every agent of one response shares: its message fields, the templates, the settings and
    its seeds (`seed(agent, view, reask)`)."""

    base: dict
    prompts: CurationPrompts
    s: Settings
    seed: Callable[[str, str, int], int]


def _agents(a: _Asking) -> Protocol:
    """Debate, judge (or the tally), reflect: the judgment of one response (raises `Unusable`)."""
    s, prompts = a.s, a.prompts
    debate = yield from _debate(a)
    out: dict = {"status": "ok", **debate}
    lists = {agent: d["items"] for agent, d in debate.items()}
    views = verdict_views(lists)
    notes = {v: evidence(prompts, lists, order) for v, (order, _) in views.items()}
    reply = prompts.render(f"reply_{s.verdict}")
    out["judge"], initial, reasons = yield from _judge(a, lists, views, notes, reply)
    out["initial"] = initial

    # Reflect: does the initial decision stand? Overturned only if more likely not than so.
    if "reflect" in s.without:
        out.update(final=initial, overturned=False)
        return out
    decision = prompts.render("decision_good" if initial else "decision_bad")
    messages = {v: prompts.render("reflect", **a.base, evidence=notes[v], decision=decision, reasoning=reasons[v],
                                  stands=yes, overturn=1 - yes, reply=reply) for v, (_, yes) in views.items()}
    verdict = yield from _verdict("reflect", messages, views, s, a.seed)
    out["reflect"] = verdict
    stands = verdict["p"] >= 0.5
    out.update(final=initial if stands else 1 - initial, overturned=not stands)
    return out


def _debate(a: _Asking) -> Generator[Step, list[Completion], dict[str, dict]]:
    """Strengths and weaknesses, each a numbered list, re-asked while unusable: {agent: {"items",
    "raw"}} in the order the lists were read (raises `Unusable`)."""
    s = a.s
    lists: dict[str, list[str]] = {}
    raw: dict[str, str] = {}
    pending = [agent for agent in DEBATERS if agent not in s.without]
    prefill = LIST_PREFILL if s.prefill else None
    for reask in range(s.max_parse_retries + 1):
        if not pending:
            break
        messages = {agent: [{"role": "user", "content": a.prompts.render(agent, **a.base)}] for agent in pending}
        calls = [AgentCall(agent, "single", ChatRequest(messages[agent], s.list_params,
                                                        seed=a.seed(agent, "single", reask), prefill=prefill))
                 for agent in pending]
        replies = yield Step("debate" + (f" re-ask {reask}" if reask else ""), calls)
        for agent, reply in zip(pending, replies, strict=True):
            if reply.error:
                raise Unusable(agent, "debate", f"request refused: {reply.error}", reply.text)
            raw[agent] = (prefill or "") + reply.text
            if items := parse_items(raw[agent], s.max_items):
                lists[agent] = items
        pending = [agent for agent in pending if agent not in lists]
    if pending:
        raise Unusable(pending[0], "debate", f"no numbered list in {s.max_parse_retries + 1} repl(ies)",
                       raw[pending[0]], [(agent, "single") for agent in pending])
    return {agent: {"items": items, "raw": raw[agent]} for agent, items in lists.items()}


def _judge(a: _Asking, lists: dict[str, list[str]], views: dict, notes: dict[str, str],
           reply: str) -> Generator[Step, list[Completion], tuple[dict, int, dict[str, str]]]:
    """The initial verdict: the judge's, every view averaged (good iff mean P(good) > threshold), or
    the debate's tally when the judge is ablated. Returns (its record, the verdict, what the reflect
    agent reads of the reasons in each view)."""
    s, prompts = a.s, a.prompts
    if "judge" in s.without:
        counts = {agent: len(lists.get(agent, [])) for agent in DEBATERS}
        record = {"rule": "tally", "strengths": counts["positive"], "weaknesses": counts["negative"]}
        reasons = dict.fromkeys(views, prompts.render("reasoning_tally", strengths=counts["positive"],
                                                      weaknesses=counts["negative"]))
        return record, int(counts["positive"] > counts["negative"]), reasons
    messages = {v: prompts.render("judge", **a.base, evidence=notes[v], good=yes, bad=1 - yes, reply=reply)
                for v, (_, yes) in views.items()}
    verdict = yield from _verdict("judge", messages, views, s, a.seed)
    reasons = {v: _reasoning(prompts, s, verdict["views"][v]["raw"]) for v in views}
    return verdict, int(verdict["p"] > s.threshold), reasons


def verdict_views(lists: dict[str, list[str]]) -> dict[str, tuple[tuple[str, ...], int]]:
    """Every way a verdict is asked: view name -> (order of the lists, the digit that means yes).

    Both orders of the two lists (one order with fewer lists) times both digit assignments, so a
    model's liking for the list it read last or for the digit 1 cancels in the average.
    """
    orders = ORDERS if len(lists) == 2 else {"single": DEBATERS}
    return {f"{name}/yes={yes}": (order, yes) for name, order in orders.items() for yes in (1, 0)}


def verdict_probability(reply: Completion, prefilled: bool) -> float | None:
    """P(digit 1) over {0, 1} at the verdict's digit (`eval.judge.score_from_logprobs`, which
    steps over a whitespace position whose stray digit alternatives are improbable)."""
    return score_from_logprobs(reply, prefilled, 0, 1)


def _verdict(agent: str, messages: dict[str, str], views: dict, s: Settings,
             seed) -> Generator[Step, list[Completion], dict]:
    """Ask `agent` for a verdict in every view: {"p": mean P(yes), "views": {view: {"p", "raw"}}}
    (raises `Unusable`)."""
    logprob = s.verdict == "logprob"
    # Prefilled: " " and the digit at most; otherwise room for "Score", ":", " 1" (as eval.judge).
    params = SamplingParams(2 if s.prefill else 12, 0.0, 1.0) if logprob else s.sample_params
    values: dict[str, float] = {}
    raw: dict[str, str] = {}
    pending = list(messages)
    for reask in range(1 if logprob else s.max_parse_retries + 1):
        calls = [AgentCall(agent, v, ChatRequest(
            [{"role": "user", "content": messages[v]}], params, seed=seed(agent, v, reask),
            logprobs=s.top_logprobs if logprob else None,
            prefill=VERDICT_PREFIX if logprob and s.prefill else None)) for v in pending]
        replies = yield Step(agent + (f" re-ask {reask}" if reask else ""), calls)
        for view, reply in zip(pending, replies, strict=True):
            if reply.error:
                raise Unusable(agent, agent, f"request refused: {reply.error}", reply.text)
            raw[view] = reply.text
            one = verdict_probability(reply, s.prefill) if logprob else parse_score(reply.text, 0, 1)
            if one is not None:
                values[view] = float(one) if views[view][1] == 1 else 1.0 - float(one)
        pending = [v for v in pending if v not in values]
        if not pending:
            break
    if pending:
        why = (f"no digit 0/1 among the top alternatives after {VERDICT_PREFIX!r}" if logprob
               else f"no 'Score: 0|1' line in {s.max_parse_retries + 1} repl(ies)")
        raise Unusable(agent, agent, why, raw[pending[0]], [(agent, v) for v in pending])
    return {"p": sum(values.values()) / len(values), "views": {v: {"p": values[v], "raw": raw[v]} for v in messages}}


def _reasoning(prompts: CurationPrompts, s: Settings, judge_reply: str) -> str:
    """What the reflect agent reads of the judge's reasons: in sample mode the judge's reply with
    its score line removed (a copied "Score: 1" would otherwise hand reflect its answer)."""
    text = " ".join(SCORE_LINE.sub("", judge_reply).split()) if s.verdict == "sample" else ""
    return prompts.render("reasoning_text", text=text) if text else prompts.render("reasoning_none")
