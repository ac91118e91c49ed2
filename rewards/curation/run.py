"""The curation driver: candidates -> five agents per response, phase-batched and journaled.

Every response's protocol (`agents.curate`) advances in lockstep with the others of its chunk
(`generate.phases.drive`), so each phase's calls, across responses and agents, go to the backend
as one batch. Calls are journaled (`generate.journal.Journal`) with seeds derived from the run
seed and the call's place, so a re-run rebuilds identical requests and replays every finished
call; finished responses (in `judgments.jsonl`) are skipped; a killed run loses only the calls in
flight. A response whose agent output stays unusable goes to `failed.jsonl` with its reason and the
command exits 1; a re-run retries it keeping what succeeded (`generate.journal.FailureLog`): after
an unusable output (deterministic) only the calls whose output stayed unusable get fresh seeds,
drawn from their number of such failures; after a call whose retries ran out (transient) every
seed stays. Either way every finished call is replayed and only the failed ones are asked again.
A response whose request the backend refused (over the context), or whose greedy logprob verdict
had no digit, failed for good and is not retried.
`preferences.jsonl` and the manifest's `counts` are rebuilt from `judgments.jsonl` at the end of
every run. Resuming follows `generate.common.resumable`: other settings, curation prompts, backend
numerics or retrieval sources are refused; the manifest's `progress` follows every chunk.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from eval.corpus.resolve import reference_dir, reference_dir_option
from eval.embed import DEFAULT_EMBEDDER, Embedder
from eval.scorers.curation.agents import ABLATABLE, VERDICT_MODES, Settings, curate
from eval.scorers.curation.prompts import load_curation_prompts
from eval.scorers.curation.retrieval import Example, RetrievalIndex
from eval.scorers.curation.scorer import drive_curation, render_examples
from generate.backends import Completion, Model, ModelOptions, SamplingParams, gave_up
from generate.backends.options import batch_size_option
from generate.common.errors import PartialFailure, UsageError
from generate.common.inputs import check_file
from generate.common.jsonl import append_jsonl, read_jsonl, rewrite_jsonl
from generate.common.manifest import write_manifest
from generate.common.ranges import AT_LEAST_1, NON_NEGATIVE, TOP_P, OneOf, Range, check_options, checked, in_range
from generate.common.resumable import Resumable, resumable, settings_of, text_hashes
from generate.journal import FailureLog, Journal
from generate.prompts import load_prompts
from rewards.curation.data import Candidate, agreement, build_pairs, load_candidates

log = logging.getLogger(__name__)

# Settings that change what a run produces: resuming with other values would mix two runs.
RESULT_KEYS = ("model", "verdict", "without", "k", "exemplar_words", "threshold", "max_items", "max_parse_retries",
               "list_tokens", "verdict_tokens", "temperature", "top_p", "seed")
NOUN = "a curation"


@dataclass
class CurateConfig(ModelOptions):
    """The curation's settings; `model` plays every agent."""

    candidates: list[str] = field(default_factory=list, metadata={
        "help": "stories.jsonl files (or {prompt, response, label} JSONL)"})
    out: str = field(default="runs/curation", metadata={"help": "output directory"})
    exemplars: str | None = field(default=None, metadata=checked(
        check_file, help="JSONL of trusted {prompt, response} pairs"))
    reference_dir: str | None = reference_dir_option()
    reference_max_chunks: int | None = field(default=2000, metadata=in_range(
        AT_LEAST_1, help="embed a seeded sample of the corpus"))
    embedder: str = DEFAULT_EMBEDDER
    k: int = field(default=2, metadata=in_range(
        NON_NEGATIVE, help="retrieved examples per prompt (0: no Retrieval agent)"))
    exemplar_words: int = field(default=120, metadata=in_range(
        AT_LEAST_1, help="words of each retrieved example shown"))
    without: list[str] = field(default_factory=list, metadata=checked(OneOf(ABLATABLE), help="ablate agents"))
    verdict: str = field(default="logprob", metadata=checked(
        OneOf(VERDICT_MODES), help="logprob (digit probabilities), sample (parsed reply)"))
    threshold: float = field(default=0.5, metadata=in_range(
        Range(0, 1, open_high=True), help="judge: good iff P(good) > threshold"))
    max_items: int = field(default=5, metadata=in_range(AT_LEAST_1))
    max_parse_retries: int = field(default=2, metadata=in_range(NON_NEGATIVE))
    list_tokens: int = field(default=160, metadata=in_range(
        AT_LEAST_1, help="reply budget of the Positive and Negative agents"))
    verdict_tokens: int = field(default=160, metadata=in_range(AT_LEAST_1, help="reply budget of sample-mode verdicts"))
    temperature: float = field(default=0.7, metadata=in_range(NON_NEGATIVE))
    top_p: float = field(default=0.9, metadata=in_range(TOP_P))
    seed: int = 0
    limit: int | None = field(default=None, metadata=in_range(AT_LEAST_1, help="first N candidates only"))
    journal: str | None = field(default=None, metadata={"help": "call journal (default OUT/calls.jsonl); ablations "
                                                                  "may share the full run's to replay its calls"})
    templates: str | None = field(default=None, metadata={"help": "curation prompts YAML"})
    chunk_responses: int = field(default=32, metadata=in_range(AT_LEAST_1, help="responses advanced together"))
    batch_size: int = batch_size_option(8)

    def __post_init__(self) -> None:
        self.without = sorted(set(self.without))
        check_options(self)
        if self.exemplars and self.k == 0:
            raise UsageError("--exemplars are the Retrieval agent's examples, and --k 0 leaves that agent out")


class Curator:
    def __init__(self, cfg: CurateConfig, model: Model | None = None, embedder: Embedder | None = None):
        self.cfg = cfg
        self.out = Path(cfg.out)
        self.prompts = load_curation_prompts(cfg.templates)
        self.writer = load_prompts()
        self._model, self._embedder = model, embedder
        self.failed: dict[str, str] = {}  # response key -> reason, for responses that failed in this run
        self.final: dict[str, str] = {}  # ... of those, the ones that failed for good (a refused request)

    @property
    def model(self) -> Model:
        if self._model is None:
            self._model = self.cfg.load_model()
        return self._model

    def settings(self) -> Settings:
        c = self.cfg
        return Settings(frozenset(c.without), c.verdict, c.threshold, c.max_items, c.max_parse_retries,
                        SamplingParams(c.list_tokens, c.temperature, c.top_p),
                        SamplingParams(c.verdict_tokens, c.temperature, c.top_p),
                        prefill=bool(self.model.backend.supports_prefill), seed=c.seed)

    def run(self) -> Path:
        """Curate every unfinished candidate, then rebuild the preferences; returns their path.

        Raises:
            PartialFailure: after everything else was written, when responses failed.
        """
        with resumable(self.out, NOUN) as run:  # one writer per directory, taken before anything is read
            return self._run(run)

    def _run(self, run: Resumable) -> Path:
        cfg = self.cfg
        candidates = load_candidates(cfg.candidates, cfg.limit)
        # Candidates are keyed by their text's hash: another text is another key, never a change.
        run.check_settings(asdict(cfg), settings_of(RESULT_KEYS))
        run.check_texts("template_sha256", text_hashes(self.prompts.texts()))
        failed_path = self.out / "failed.jsonl"
        done = run.done("judgments.jsonl", "key")
        failures = FailureLog(failed_path, key="key")
        final = {k: why for k, why in failures.final().items() if k not in done}
        todo = [c for c in candidates if c.key not in done and c.key not in final]
        log.info("curation: %d candidates, %d already judged, %d failed for good, %d to run", len(candidates),
                 len(done), len(final), len(todo))
        if todo:
            self._curate(run, todo, failures)
        elif run.needs_manifest(todo):
            self._write_manifest(None, None)
        keys = {c.key for c in candidates}
        judgments = [j for j in read_jsonl(self.out / "judgments.jsonl") if j["key"] in keys]
        pairs = build_pairs(judgments, self.writer.writer_messages)
        path = self.out / "preferences.jsonl"
        rewrite_jsonl(path, pairs)  # derived: rebuilt from the judgments every run
        run.record({"counts": _counts(candidates, judgments, pairs, {**self.failed, **self.final})})
        log.info("curation: %d judged, %d pairs -> %s", len(judgments), len(pairs), path)
        retry = {k: why for k, why in self.failed.items() if k not in self.final}
        final.update(self.final)
        gone = (f"{len(final)} response(s) failed for good and are in no pair (a refused request, or a greedy "
                "verdict with no digit: asking again gives the same reply)") if final else ""
        if retry:
            left = [f"{len(retry)} response(s) left to retry; re-run the same command: it replays the finished calls "
                    "and asks only the rest", *([gone] if gone else [])]
            raise PartialFailure(f"{'; '.join(left)} (reasons in {failed_path})")
        if gone:  # nothing a re-run could change: the pairs stand, the loss is stated (as eval's final misses)
            log.warning("curation: %s (reasons in %s)", gone, failed_path)
        return path

    def _curate(self, run: Resumable, todo: list[Candidate], failures: FailureLog) -> None:
        """Refuse other numerics or retrieval sources, then curate `todo` chunk by chunk; after each,
        the manifest's `progress` holds this invocation's judged and failed responses so far."""
        settings = self.settings()
        backend = run.check_backend(self.model.backend)
        examples, index_fp = self._retrieve(todo)
        if "retrieval" in run.recorded:  # another corpus, exemplars or encoder
            run.check_provenance("retrieval sources", run.recorded["retrieval"], index_fp)
        journal = Journal(self.cfg.journal or self.out / "calls.jsonl")
        self._write_manifest(index_fp, backend)  # now, so an interrupted run says how it was made
        judged = 0
        for start in range(0, len(todo), self.cfg.chunk_responses):
            chunk = todo[start:start + self.cfg.chunk_responses]
            records, failed = self._run_chunk(chunk, examples, settings, journal, failures)
            append_jsonl(self.out / "judgments.jsonl", records)
            append_jsonl(self.out / "failed.jsonl", failed)
            judged += len(records)
            run.record({"progress": {"judged": judged, "failed": len(self.failed), "to_run": len(todo)}})

    def _retrieve(self, todo: list[Candidate]) -> tuple[dict[str, list[Example]], dict | None]:
        """The k nearest examples of each prompt (by prompt hash), and the index's fingerprint."""
        cfg = self.cfg
        if cfg.k == 0:
            return {}, None
        embedder = self._embedder or Embedder(cfg.embedder)
        index = RetrievalIndex.build(embedder, cfg.exemplars, reference_dir(cfg.reference_dir),
                                     max_chunks=cfg.reference_max_chunks, seed=cfg.seed)
        prompts = {c.prompt_sha256: c.prompt for c in todo}
        return dict(zip(prompts, index.nearest(list(prompts.values()), embedder, cfg.k))), index.fingerprint

    def _run_chunk(self, chunk: list[Candidate], examples: dict[str, list[Example]], settings: Settings,
                   journal: Journal, log_: FailureLog) -> tuple[list[dict], list[dict]]:
        t0 = time.perf_counter()
        words = self.cfg.exemplar_words
        gens = {c.key: curate(c.key, c.prompt, c.text,
                              render_examples(self.prompts, examples.get(c.prompt_sha256, []), words),
                              self.prompts, settings, _attempts(log_, c.key))
                for c in chunk}
        gave: set[str] = set()  # errors of calls whose retries ran out: transient

        def complete(requests, phases) -> list[Completion]:
            # The agents re-ask unusable (blank included) replies themselves: the model must not too.
            outs = journal.complete(self.model, self.cfg.model, requests, desc=phases, reask_blank=False)
            gave.update(o.error for o in outs if gave_up(o))
            return outs

        results, usage = drive_curation(gens, complete)
        seconds = round((time.perf_counter() - t0) / len(chunk), 3)
        records, failures = [], []
        for c in chunk:
            result = results[c.key]
            meta = {"key": c.key, "story_id": c.story_id, "source": c.source, "prompt_id": c.prompt_id,
                    "prompt_sha256": c.prompt_sha256, "aspect": c.aspect, "framework": c.framework}
            cost = {"usage": dict(usage[c.key]), "seconds": seconds}
            if result.pop("status") == "failed":
                reseed = result.pop("reseed")
                cause = _cause(result["reason"], gave, greedy=self.cfg.verdict == "logprob"
                               and result["phase"] in ("judge", "reflect"))
                final = cause in ("refused", "greedy")
                (self.final if final else self.failed)[c.key] = result["reason"]
                failures.append({**meta, "attempt": log_.attempt(c.key), **result, **cost,
                                 "cause": "transient" if cause == "transient" else "deterministic",
                                 "final": final, "reseed": reseed if cause == "unusable" else [],
                                 "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
                log.warning("%s: curation failed (%s): %s", c.story_id, cause, result["reason"])
                continue
            records.append({**meta, "prompt": c.prompt, "text": c.text, "label": c.label,
                            "examples": [e.id for e in examples.get(c.prompt_sha256, [])], **result, **cost})
        return records, failures

    def _write_manifest(self, index: dict | None, backend: dict | None) -> None:
        """How the curation is made; its counts are added at the end of every invocation."""
        templates = {**self.prompts.texts(), "template:single_write": self.writer.templates["single_write"]}
        write_manifest(self.out, kind="curation", config=asdict(self.cfg), seed=self.cfg.seed, templates=templates,
                       extra={"retrieval": index, "counts": None,
                              "backend": backend})

def _attempts(log_: FailureLog, key: str) -> Callable[[str, str], int]:
    """A call's seed is new only after its own output stayed unusable (deterministic); journals
    whose failures named the whole response (`["response"]`) reseed every call of it."""
    return lambda agent, view: log_.call_attempt(key, "response") + log_.call_attempt(key, agent, view)


def _cause(reason: str, gave: set[str], greedy: bool) -> str:
    """Why a response failed: `transient` (a call's retries ran out: same seeds next time),
    `refused` (the backend refused a request: final), `greedy` (a logprob verdict, read greedily,
    had no digit: any seed gives the same reply, so final) or `unusable` (new seeds next time)."""
    if any(f"request refused: {error}" in reason for error in gave):
        return "transient"
    if "request refused: " in reason:
        return "refused"
    return "greedy" if greedy else "unusable"


def _counts(candidates: list[Candidate], judgments: list[dict], pairs: list[dict], failed: dict) -> dict:
    """Counts, verdicts and cost per response, for the manifest and the README's tables."""
    n = len(judgments)
    calls = sum(j["usage"].get("calls", 0) for j in judgments)
    return {
        "candidates": len(candidates), "judged": n, "failed": len(failed),
        "good": sum(j["final"] for j in judgments), "bad": n - sum(j["final"] for j in judgments),
        "initial_good": sum(j["initial"] for j in judgments), "overturned": sum(j["overturned"] for j in judgments),
        "pairs": len(pairs), "prompts_with_pairs": len({p["prompt_sha256"] for p in pairs}),
        "calls_per_response": round(calls / n, 2) if n else None,
        "seconds_per_response": round(sum(j["seconds"] for j in judgments) / n, 2) if n else None,
        "agreement_with_labels": agreement(judgments),
    }
