"""Phase-synchronous runner: every prompt's frameworks advance in lockstep, and all model calls
of one phase, across every prompt and agent of a chunk, go to the backend as one batch.

Runs are append-only and resumable: finished prompts are skipped, finished calls are replayed
from the journal, so a crash loses at most the calls that were in flight. Another setting, prompt
text or template, or (when prompts are left) other backend numerics is refused
(`generate.common.resumable`).

No reply reaches a story, a reviewer or a reviser blank: the runner cleans every reply (clean.py)
and re-asks a blank one with new seeds (`Runner.blank_reasks`: the one layer that re-asks them, so
a call is sent at most 1 + 2 times, every time counted). A prompt with a call that failed (a reply
still blank after the re-asks, a call whose retries ran out, a request the backend refused) is
abandoned: nothing of it is written to stories.jsonl and the cause goes to failed.jsonl. A re-run
retries it keeping what succeeded (`generate.journal.FailureLog`): its finished calls are replayed,
a call that failed for a transient cause is asked again with its seed, only a blank one gets a new
seed; a prompt whose request the backend refused failed for good and is not retried. So every
re-run adds the calls it finishes to those kept, and a run under a flaky server converges.
"""

from __future__ import annotations

import logging
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tqdm.auto import tqdm

from generate.backends import ChatRequest, Completion, Model, ModelOptions, SamplingParams, gave_up
from generate.backends.options import batch_size_option
from generate.clean import clean_reply
from generate.common import machine
from generate.common.errors import PartialFailure
from generate.common.ranges import AT_LEAST_1, NON_NEGATIVE, TOP_P, OneOf, checked, in_range
from generate.common.jsonl import append_jsonl
from generate.common.manifest import sha256_text, write_manifest
from generate.common.resumable import Resumable, done_ids, resumable, text_hashes
from generate.datasets import Task, check_dataset, dataset_sha256, load_dataset, spread_over_aspects
from generate.frameworks import (FRAMEWORKS, REVIEW_VARIANTS, Call, Settings, Step, check_agents, get_framework,
                                  planned_calls)
from generate.journal import FailureLog, Journal, call_seed
from generate.phases import drive
from generate.phases_profile import PhaseProfile, recorded_phases
from generate.prompts import PromptSet, load_prompts
from generate.usage import Usage, total_usage

log = logging.getLogger(__name__)

# Settings that change what a run produces: resuming with different values would mix two runs.
RESULT_KEYS = ("framework", "model", "dataset", "agents", "rounds", "review_variant", "max_new_tokens",
               "temperature", "top_p", "seed", "templates", "personas")
# Manifests written before `review_variant` existed name the same choice `review_sees`.
LEGACY_REVIEW_SEES = {"latest": "public_code", "first": "paper"}
NOUN = "a run"


@dataclass
class RunConfig(ModelOptions):
    framework: str = field(default="review", metadata=checked(OneOf(FRAMEWORKS)))
    dataset: str = field(default="default", metadata=checked(
        check_dataset, help="default, scifi100, or a .json/.jsonl path"))
    out: str = field(default="runs/review", metadata={"help": "output directory"})
    limit: int | None = field(default=None, metadata=in_range(
        AT_LEAST_1, help="N prompts only, taken across aspects in turn"))
    agents: int = field(default=3, metadata=in_range(AT_LEAST_1))
    rounds: int = field(default=3, metadata=in_range(AT_LEAST_1))
    review_variant: str = field(default="paper", metadata=checked(
        OneOf(REVIEW_VARIANTS), help="Review: paper (reviewers only read peers' initial drafts), public_code (peers' "
                                     "latest drafts)"))
    max_new_tokens: int = field(default=400, metadata=in_range(AT_LEAST_1))
    temperature: float = field(default=0.9, metadata=in_range(NON_NEGATIVE))
    top_p: float = field(default=0.9, metadata=in_range(TOP_P))
    seed: int = 0
    chunk_prompts: int = field(default=32, metadata=in_range(
        AT_LEAST_1, help="prompts advanced together (batch width)"))
    batch_size: int = batch_size_option(48)
    templates: str | None = field(default=None, metadata={"help": "prompt templates YAML"})
    personas: str | None = field(default=None, metadata={"help": "personas YAML"})

    def __post_init__(self) -> None:
        check_agents(self.framework, self.agents)  # every entry point builds one: all refuse alike


def finished_prompts(path: Path) -> set[str]:
    """Prompts whose stories are all on disk; a partial group (torn write) is dropped first."""
    return done_ids(path, "prompt_id", group_size="n_stories")


def result_settings(config: dict) -> dict:
    """The settings of a run config (as written in manifests) that change what the run produces."""
    out = {k: config[k] for k in RESULT_KEYS if k in config}
    if "review_variant" not in config and config.get("review_sees") in LEGACY_REVIEW_SEES:
        out["review_variant"] = LEGACY_REVIEW_SEES[config["review_sees"]]
    if out.get("framework") != "review":
        out.pop("review_variant", None)  # no other framework has reviewers
    return out


def check_resumable(run: Resumable, cfg: RunConfig, texts: dict[str, dict[str, str]] | None = None) -> None:
    """Refuse to add to `run` stories that would differ from those it holds: other settings, or
    another text behind an id it used (`texts`: manifest field -> {id: SHA-256})."""
    run.check_settings(asdict(cfg), result_settings)
    for field_name, hashes in (texts or {}).items():
        run.check_texts(field_name, hashes)


@dataclass
class Failed:
    """A call of a phase that came to nothing: `kind` blank (after `reasks` re-asks: new seed next
    time), transient (its retries ran out: same seed next time) or refused (final)."""

    index: int
    call: Call
    last: Completion
    kind: str
    reasks: int
    spent: Usage  # every try of it (the call and its re-asks): a blank's is asked anew, never replayed


class PromptsFailed(PartialFailure):
    """Raised by `Runner.run` after everything else was written: some prompts have no stories.

    Nobody can overlook it: a command line exits 1 with one line (`message`: what is left to do
    and whether a re-run helps), and a script that runs several generations catches it, goes on
    and reports every failure at the end (`stories` is the file holding the prompts that did
    finish; `failed`: prompt id -> reason, those failed for good included).
    """

    def __init__(self, stories: Path, failed: dict[str, str], message: str):
        self.stories, self.failed = stories, dict(failed)
        super().__init__(message)


def left_message(retry: dict[str, int], final: dict[str, str], kept: int, failed_path: Path) -> str:
    """The last line of a run with prompts left: how many prompts and calls, and what to do.

    Args:
        retry: prompt id -> calls it has left, for prompts a re-run retries.
        final: prompt id -> reason, for prompts that failed for good.
        kept: calls in the journal, which a re-run replays.
    """
    parts = []
    if retry:
        parts.append(f"{len(retry)} prompt(s) left to retry ({', '.join(retry)}) with {sum(retry.values())} call(s) "
                     f"left; re-run the same command: it replays the {kept} finished call(s) kept in calls.jsonl and "
                     "asks only the rest")
    if final:
        parts.append(f"{len(final)} prompt(s) failed for good, not retried, since the backend refused a request "
                     f"({', '.join(final)}): shorten the prompt or use a model with a longer context")
    return "; ".join(parts) + f" (reasons in {failed_path})"


def run_collecting(runner: Runner, failed: dict[str, dict[str, str]]) -> Path:
    """Run, and on failed prompts record them under the run directory in `failed` and go on
    (scripts that chain several runs report all failures at the end with `raise_failures`)."""
    try:
        return runner.run()
    except PromptsFailed as exc:
        failed[str(runner.out)] = exc.failed
        return exc.stories


def raise_failures(failed: dict[str, dict[str, str]], unscored: dict[str, str] | None = None) -> None:
    """One `PartialFailure` naming every run's failed prompts and every evaluation with stories
    left to score (`unscored`: its directory -> its last line), if any."""
    parts = []
    if failed:
        shown = "; ".join(f"{run}: {', '.join(sorted(ids))}" for run, ids in failed.items())
        parts.append(f"{sum(map(len, failed.values()))} prompt(s) left ({shown}); reasons in each run's failed.jsonl")
    parts += [f"{run}: {why}" for run, why in (unscored or {}).items()]
    if parts:
        raise PartialFailure("; ".join(parts) + "; re-run the same command to retry them: it keeps every finished call")


class Runner:
    blank_reasks = 2  # re-asks of a reply blank once cleaned (a raw blank one included), sampled calls only

    def __init__(self, cfg: RunConfig, model: Model | None = None):
        self.cfg = cfg
        self.framework = get_framework(cfg.framework)
        self.settings = Settings(cfg.agents, cfg.rounds, cfg.review_variant)
        self.prompts: PromptSet = load_prompts(cfg.templates, cfg.personas)
        self.params = SamplingParams(cfg.max_new_tokens, cfg.temperature, cfg.top_p)
        tasks = load_dataset(cfg.dataset)
        # Datasets list prompts aspect by aspect: a small subset should span aspects, not exhaust one.
        self.tasks = spread_over_aspects(tasks, cfg.limit) if cfg.limit is not None else tasks
        self.dataset_sha256 = dataset_sha256(cfg.dataset)
        self.prompt_sha256 = {t.id: sha256_text(t.prompt) for t in self.tasks}
        # A dry run renders every template the protocol uses: a templates file lacking one is refused now, not mid-run.
        planned_calls(self.framework, self.tasks[0], self.prompts, self.settings)
        self.out = Path(cfg.out)
        self.failed_path = self.out / "failed.jsonl"
        self.failed: dict[str, str] = {}  # prompt id -> reason, for prompts that failed in this invocation
        self._model = model

    @property
    def model(self) -> Model:
        if self._model is None:
            self._model = self.cfg.load_model()
        return self._model

    def run(self) -> Path:
        """Generate every unfinished prompt; returns the stories file.

        Raises:
            PromptsFailed: after the run, when prompts failed (a reply still blank after the
                re-asks, a request the backend refused); they are in `self.failed` and
                failed.jsonl, not in the stories.
            OutputLocked: another live process is writing to the same output directory.
        """
        with resumable(self.out, NOUN) as run:  # one writer per directory, taken before anything is read
            return self._run(run)

    def texts(self) -> dict[str, dict[str, str]]:
        """The texts behind the run's ids, by manifest field: each prompt's and each template's."""
        return {"prompts": self.prompt_sha256, "template_sha256": text_hashes(self.prompts.texts())}

    def _run(self, run: Resumable) -> Path:
        check_resumable(run, self.cfg, self.texts())
        stories = self.out / "stories.jsonl"
        done = run.done(stories.name, "prompt_id", group_size="n_stories")
        failures = FailureLog(self.failed_path)
        final = {pid: why for pid, why in failures.final().items() if pid in self.prompt_sha256 and pid not in done}
        todo = [t for t in self.tasks if t.id not in done and t.id not in final]
        log.info("%s: %d prompts, %d already done, %d failed for good, %d to run", self.cfg.framework,
                 len(self.tasks), len(done & set(self.prompt_sha256)), len(final), len(todo))
        # bf16 or float32 by the CPU: the same command on another machine samples from other logits
        backend = run.check_backend(self.model.backend) if todo else None
        # Phase costs of the earlier invocations (the journal replays their calls), kept and added to.
        carried = recorded_phases(self.out) if (self.out / "calls.jsonl").is_file() else {}
        if run.needs_manifest(todo):
            write_manifest(self.out, kind="generation", config=asdict(self.cfg), seed=self.cfg.seed,
                           templates=self.prompts.texts(),
                           extra={"backend": backend,
                                  "n_prompts": len(self.tasks), "dataset_sha256": self.dataset_sha256,
                                  "prompts": self.prompt_sha256, **({"phases": carried} if carried else {})})
        journal = Journal(self.out / "calls.jsonl")
        self.profile = PhaseProfile(self.model.backend.counters, lambda: journal.replayed, carried)
        self.failed, self.final, self.left = {}, final, {}
        before = self.model.stats.copy() if todo else None
        size = max(1, self.cfg.chunk_prompts)
        for start in tqdm(range(0, len(todo), size), desc=f"{self.cfg.framework} prompts", unit="chunk",
                          disable=len(todo) <= size):
            chunk = todo[start:start + size]
            append_jsonl(stories, self._run_chunk(chunk, journal, failures))
            run.record({"phases": self.profile.to_json()})
        if before is not None:  # what the faults of this invocation cost, by cause
            run.record({"reliability": self.model.stats.since(before).to_json(), "peak_rss_gb": machine.peak_rss_gb()})
        if self.failed or self.final:
            log.warning("%d prompt(s) failed (reasons in %s): %s", len(self.failed) + len(final), self.failed_path,
                        "; ".join(f"{pid}: {why}" for pid, why in {**final, **self.failed}.items()))
            retry = {pid: self.left[pid] for pid in self.failed if pid not in self.final}
            raise PromptsFailed(stories, {**self.failed, **self.final},
                                left_message(retry, self.final, len(journal), self.failed_path))
        return stories

    def _run_chunk(self, chunk: list[Task], journal: Journal, failures: FailureLog) -> list[dict]:
        t0, replayed = time.perf_counter(), journal.replayed["seconds"]
        tasks = {t.id: t for t in chunk}
        gens = {tid: self.framework(t, self.prompts, self.settings) for tid, t in tasks.items()}
        step_no = dict.fromkeys(gens, 0)
        usage: dict[str, dict[str, Usage]] = {tid: defaultdict(Usage) for tid in gens}
        cut: dict[str, dict[str, bool]] = {tid: {} for tid in gens}  # agent -> its latest story hit the cap
        answered: Counter[str] = Counter()  # calls with a usable reply, per prompt

        def answer(steps: dict[str, Step]) -> dict[str, list[str]]:
            phase = Counter(s.phase for s in steps.values()).most_common(1)[0][0]
            calls = [(tid, ci, call) for tid, step in steps.items() for ci, call in enumerate(step.calls)]
            replies, failed = self._ask(calls, step_no, failures, journal, phase, usage, cut)
            answered.update(tid for tid, _, _ in calls if tid not in failed)
            for tid in failed:  # a prompt with a failed call is abandoned: drive drops it
                self._fail(tid, step_no[tid], steps[tid].phase, failed[tid], total_usage(usage[tid]), failures)
                done = sum(bool(text) for text in replies[tid])
                planned = planned_calls(self.framework, tasks[tid], self.prompts, self.settings)
                self.left[tid] = max(planned - answered[tid] - done, len(failed[tid]))
            for tid in steps:
                step_no[tid] += 1
            return {tid: replies[tid] for tid in steps if tid not in failed}

        finals = drive(gens, answer)
        # This invocation's wall time plus what the calls it replayed from the journal took when they
        # were made: a chunk resumed after an interruption accounts for the work done before it.
        seconds = (time.perf_counter() - t0 + journal.replayed["seconds"] - replayed) / len(chunk)
        return [rec for t in chunk if t.id in finals
                for rec in self._records(t, finals[t.id], usage[t.id], cut[t.id], seconds, failures.lost(t.id))]

    @property
    def reasks(self) -> int:
        """Re-asks of a blank reply; none under greedy decoding, which would only repeat itself."""
        return self.blank_reasks if self.params.temperature > 0 else 0

    def _ask(self, calls: list[tuple[str, int, Call]], step_no: dict[str, int], failures: FailureLog,
             journal: Journal, phase: str, usage: dict[str, dict[str, Usage]], cut: dict[str, dict[str, bool]],
             ) -> tuple[dict[str, list[str]], dict[str, list[Failed]]]:
        """Run one phase's calls, re-asking replies that are blank once cleaned; every attempt's
        tokens go to `usage`, and whether an agent's latest story hit the token cap to `cut`.

        Returns the clean replies per prompt, in call order, and for each prompt with failed calls
        (blank after the re-asks, retries run out, refused) what each of them came to."""
        texts: list[str] = [""] * len(calls)
        last: list[Completion] = [Completion(text="")] * len(calls)
        asked = [0] * len(calls)
        spent = [Usage() for _ in calls]
        todo = list(range(len(calls)))
        with self.profile.phase(phase) as received:
            for reask in range(self.reasks + 1):
                requests = [self._request(calls[i], step_no, failures, reask) for i in todo]
                outs = self._complete(requests, journal, phase if not reask else f"{phase} re-ask {reask}")
                received += outs
                for i, out in zip(todo, outs):
                    tid, _, call = calls[i]
                    usage[tid][call.agent].add(out)
                    spent[i].add(out)
                    texts[i], last[i], asked[i] = clean_reply(call.role, out.text), out, asked[i] + 1
                # A failed request is not re-asked: refused, it would be refused again; out of
                # retries, it is asked again (same seed) by the next run.
                todo = [i for i in todo if not texts[i] and last[i].error is None]
                if not todo:
                    break
                if reask < self.reasks:
                    log.warning("%s: %d repl%s blank after cleaning; asking again with new seeds", phase, len(todo),
                                "y" if len(todo) == 1 else "ies")
        replies: dict[str, list[str]] = defaultdict(list)
        failed: dict[str, list[Failed]] = defaultdict(list)
        for i, (tid, ci, call) in enumerate(calls):
            replies[tid].append(texts[i])
            if not texts[i]:
                kind = "transient" if gave_up(last[i]) else "refused" if last[i].error else "blank"
                failed[tid].append(Failed(ci, call, last[i], kind, asked[i] - 1, spent[i]))
            elif call.role == "write":  # the reply is the agent's latest story
                cut[tid][call.agent] = last[i].finish_reason == "length"
        return replies, dict(failed)

    def _request(self, call: tuple[str, int, Call], step_no: dict[str, int], failures: FailureLog,
                 reask: int) -> ChatRequest:
        """A call's request; its seed is new only where this call failed deterministically before."""
        tid, ci, c = call
        step = step_no[tid]
        return ChatRequest(c.messages, self.params, seed=call_seed(
            self.cfg.seed, tid, step, ci, attempt=failures.call_attempt(tid, step, ci), reask=reask))

    def _fail(self, tid: str, step: int, phase: str, failed: list[Failed], spent: Usage, failures: FailureLog) -> None:
        """Record a prompt's failed attempt: its cause, whether it is final, which calls get new seeds."""
        first = next((f for f in failed if f.kind == "refused"), failed[0])
        call, last = first.call, first.last
        who = f"{call.agent}'s {call.role}" + (f" of {call.to}" if call.to else "")
        if last.error:
            reason = f"{who} in phase {phase} failed: {last.error}"
        else:
            reason = f"{who} in phase {phase} was blank after cleaning and {first.reasks} re-asks"
        final = first.kind == "refused"
        attempt = failures.attempt(tid)
        failures.add({"prompt_id": tid, "attempt": attempt, "agent": call.agent, "role": call.role, "to": call.to,
                      "phase": phase, "reasks": first.reasks, "reason": reason, "raw": last.text[:500],
                      "cause": "transient" if all(f.kind == "transient" for f in failed) else "deterministic",
                      "final": final, "reseed": [[step, f.index] for f in failed if f.kind == "blank"],
                      "calls": [{"step": step, "call": f.index, "agent": f.call.agent, "role": f.call.role,
                                 "failure": f.kind, "error": f.last.error} for f in failed],
                      "prompt_usage": asdict(spent),
                      "lost_usage": asdict(Usage.total(f.spent for f in failed if f.kind == "blank")),
                      "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
        (self.final if final else self.failed)[tid] = reason
        log.warning("%s: prompt failed%s (attempt %d): %s", tid, " for good" if final else "", attempt, reason)

    def _complete(self, requests: list[ChatRequest], journal: Journal, phase: str) -> list[Completion]:
        # `_ask` re-asks blank replies: the model must not re-ask them too (and lose their tokens).
        return journal.complete(self.model, self.cfg.model, requests, desc=phase, reask_blank=False)

    def _records(self, task: Task, agents: list, usage: dict[str, Usage], cut: dict[str, bool],
                 seconds: float, lost: Usage) -> list[dict]:
        total = Usage.total([total_usage(usage), lost])  # with what earlier attempts spent on blanks
        records = []
        for agent in agents:
            records.append({
                "story_id": f"{self.cfg.framework}/{task.id}/{agent.name}",
                "prompt_id": task.id, "aspect": task.aspect, "prompt": task.prompt,
                "prompt_sha256": self.prompt_sha256[task.id],
                "framework": self.cfg.framework, "agent": agent.name, "model": self.cfg.model,
                "text": agent.story, "truncated": cut[agent.name], "drafts": agent.drafts[:-1],
                "feedback": agent.feedback,
                "usage": asdict(usage.get(agent.name, Usage())), "prompt_usage": asdict(total),
                "seconds": round(seconds, 3), "n_stories": len(agents), "seed": self.cfg.seed,
                "max_new_tokens": self.cfg.max_new_tokens, "temperature": self.cfg.temperature,
                "top_p": self.cfg.top_p,
            })
        return records
