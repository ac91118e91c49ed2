"""Evaluation run: judge scores, surprisal and reference metrics for every story, then reports.

Stories are processed in chunks of whole prompt groups (all stories one framework wrote for one
prompt), because homogenization compares the stories of a group. Within a chunk every model
call of a kind is one batch: the judge's pass over stories x aspects x samples, the surprisal
forward passes, the embeddings. Each finished chunk is appended to `scores.jsonl`, so an
interrupted evaluation resumes by skipping the story_ids already there; every finished judge call
is kept in `judge_calls.jsonl` and replayed. A story whose judge score is missing for a transient
cause (a call whose retries ran out) is not written: the command exits 1 saying how many are
left, and its next run scores them again, asking only the failed calls; a score missing for a
deterministic cause (empty story, a request over the context) is final. It refuses to resume
(`generate.common.resumable`) with other settings, another rubric or surprisal template, another
story behind a story_id already scored, or, when stories are left, another judge or surprisal
scorer (numerics included), reference corpus, metrics version or signals.
"""

from __future__ import annotations

import json
import logging
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tqdm.auto import tqdm

from eval.corpus.resolve import reference_dir, reference_dir_option
from eval.embed import DEFAULT_EMBEDDER, Embedder
from eval.judge import Judge, Judgement
from eval.metrics.story import METRICS_VERSION, Chunks, StoryMetrics, draft_similarity, group_similarity
from eval.metrics.surprisal import as_scorer, scorer_numerics, surprisal
from eval.report import write_reports
from eval.rubric import MODES, load_rubric
from eval.signals import Signals, curation_scorer
from eval.stories import load_stories
from eval.text import sanitize
from generate.backends import BackendOptions, Model, RetryStats, check_spec
from generate.backends.options import DEFAULT_MODEL, batch_size_option
from generate.common.errors import PartialFailure, UsageError
from generate.common.jsonl import append_jsonl, read_jsonl
from generate.common.manifest import sha256_text, write_manifest
from generate.common.ranges import AT_LEAST_1, NON_NEGATIVE, POSITIVE, TOP_P, OneOf, check_options, checked, in_range
from generate.common.resumable import Resumable, keep_known, resumable, settings_of, text_hashes
from generate.common.timing import Timer
from generate.journal import Journal
from generate.prompts import WRITER_TEMPLATE, load_prompts

if TYPE_CHECKING:
    from eval.scorers.curation import CurationScorer

log = logging.getLogger(__name__)

# Settings that change the scores: resuming with other values would mix two evaluations.
RESULT_KEYS = ("judge", "judge_mode", "samples", "max_parse_retries", "judge_temperature", "judge_top_p",
               "judge_max_new_tokens", "rubric", "no_judge", "scorer", "no_surprisal", "reference_dir",
               "reference_max_chunks", "embedder", "kl_alpha", "seed", "principles", "reward_model", "curation_verdict")
# What else makes scores comparable, checked before adding to an evaluation (`Evaluator.provenance`).
PROVENANCE_KEYS = ("judge", "scorer", "scorer_numerics", "reference", "metrics_version", "signals")
NOUN = "an evaluation"
ID_FIELDS = ("story_id", "prompt_id", "aspect", "framework", "agent", "model")
# The surprisal scorer of a story when none is given: the model that wrote it (the paper's choice;
# such values do not compare across writers).
WRITER_SCORER = "writer"


@dataclass
class EvalConfig(BackendOptions):
    """The evaluation's settings; its judge and surprisal scorers share the model options."""

    stories: list[str] = field(default_factory=list, metadata={"help": "stories.jsonl file(s) of generation runs"})
    out: str | None = field(default=None, metadata={"help": "output directory (default: <first stories dir>/eval)"})
    judge: str = field(default=DEFAULT_MODEL, metadata=checked(check_spec, help="judge model spec"))
    judge_mode: str = field(default="logprob", metadata=checked(
        OneOf(MODES), help="logprob (expected digit), sample (paper: K replies)"))
    samples: int = field(default=3, metadata=in_range(AT_LEAST_1, help="sample mode: replies per story and aspect"))
    max_parse_retries: int = field(default=2, metadata=in_range(
        NON_NEGATIVE, help="sample mode: re-asks of an unparseable reply"))
    judge_temperature: float = field(default=0.7, metadata=in_range(NON_NEGATIVE))
    judge_top_p: float = field(default=1.0, metadata=in_range(TOP_P))
    judge_max_new_tokens: int = field(default=192, metadata=in_range(AT_LEAST_1, help="sample mode: reply budget"))
    rubric: str | None = field(default=None, metadata={"help": "rubric YAML (default: configs/judge/rubric.yaml)"})
    no_judge: bool = field(default=False, metadata={"help": "skip the LLM judge"})
    scorer: str | None = field(default=None, metadata=checked(
        check_spec, help="surprisal model spec (default: each story's writer)"))
    no_surprisal: bool = field(default=False, metadata={"help": "skip surprisal"})
    reference_dir: str | None = reference_dir_option()
    reference_max_chunks: int | None = field(default=None, metadata=in_range(
        AT_LEAST_1, help="embed a seeded sample of reference chunks"))
    embedder: str = field(default=DEFAULT_EMBEDDER, metadata={"help": "sentence encoder for the semantic metrics"})
    kl_alpha: float = field(default=1.0, metadata=in_range(POSITIVE, help="additive smoothing of the unigram KL"))
    principles: str | None = field(default=None, metadata={
        "help": "principles YAML: add the principle judge's verdicts (principle_good, principle_p)"})
    reward_model: str | None = field(default=None, metadata={
        "help": "train/reward_model.py output dir: add the reward model's verdicts (rm_good, rm_score)"})
    curation_verdict: bool = field(default=False, metadata={
        "help": "add Signal-1, the curation agents' verdict on each story (curation_good; several calls a story)"})
    chunk_stories: int = field(default=64, metadata=in_range(AT_LEAST_1, help="stories scored together (batch width)"))
    batch_size: int = batch_size_option(32)
    seed: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.stories, str):
            self.stories = [self.stories]
        check_options(self)  # also where a composite command builds this config itself

    def output_dir(self) -> Path:
        return Path(self.out) if self.out else Path(self.stories[0]).parent / "eval"


class Evaluator:
    """Scores stories into `<out>/scores.jsonl` and writes the summary, tables and plots.

    Args:
        cfg: the evaluation settings.
        models: already-built models by spec, used instead of loading them (tests, benchmarks
            that evaluate several runs with one loaded judge).
        embedder: encoder to use instead of `Embedder(cfg.embedder)`.
    """

    def __init__(self, cfg: EvalConfig, models: dict[str, Model] | None = None,
                 embedder: Embedder | None = None):
        self.cfg = cfg
        self.out = cfg.output_dir()
        self.rubric = load_rubric(cfg.rubric)
        self.signals = (Signals(load_prompts(), principles=cfg.principles, judge=cfg.judge,
                                reward_model=cfg.reward_model,
                                curation=self._curation_scorer if cfg.curation_verdict else None)
                        if cfg.principles or cfg.reward_model or cfg.curation_verdict else None)
        self.catalog = self.rubric.catalog().extended(self.signals.specs if self.signals else ())
        self.prompts = load_prompts()
        self.embedder = embedder or Embedder(cfg.embedder)
        self._models: dict[str, Model] = dict(models or {})  # spec -> model, shared by judge and scorer
        self._judge: Judge | None = None
        self._metrics: StoryMetrics | None = None
        self._scorer_errors: dict[str, str] = {}
        self.pending: dict[str, str] = {}  # story_id -> why its judge scores are not final yet
        self.timer = Timer()  # seconds of this invocation in judge, surprisal, metrics, signals
    def run(self) -> Path:
        stories = load_stories(self.cfg.stories)
        with resumable(self.out, NOUN) as run:  # one writer per directory, taken before anything is read
            return self._run(run, stories)

    def _run(self, run: Resumable, stories: list[dict]) -> Path:
        scores = self.out / "scores.jsonl"
        done = self._check_resumable(run, stories)
        groups = prompt_groups(stories)
        todo = [g for g in groups if any(s["story_id"] not in done for s in g)]
        log.info("%d stories in %d prompt groups, %d already scored, %d to score", len(stories), len(groups),
                 sum(s["story_id"] in done for s in stories), sum(s["story_id"] not in done for s in stories))
        if todo:  # scores already on disk mix with nothing: the judge is loaded only to add to them
            self._check_provenance(run, self.provenance(stories))
        carried: dict[str, float] = (run.recorded.get("seconds") or {}) if done else {}
        if run.needs_manifest(todo):
            self._write_manifest(stories, _add_seconds(carried, self.timer.seconds()), run.recorded)
        before = {spec: m.stats.copy() for spec, m in self._models.items()}
        for chunk in tqdm(group_chunks(todo, self.cfg.chunk_stories), desc="eval chunks", unit="chunk",
                          disable=len(todo) <= 1):
            append_jsonl(scores, self._score_chunk(chunk, done))
            # Where the time went, kept after every chunk and added to what the earlier invocations
            # of a resumed evaluation recorded: an interruption loses the chunk in flight, not the
            # whole evaluation's account (the benchmark's table reads it).
            run.record({"seconds": _add_seconds(carried, self.timer.seconds())})
        if todo:  # what the faults of this invocation cost, per model and cause
            run.record({"reliability": {
                spec: m.stats.since(before.get(spec, RetryStats())).to_json() for spec, m in self._models.items()}})
        write_reports(self.out, list(read_jsonl(scores)), self.catalog, (self.rubric.low, self.rubric.high))
        if self.pending:
            self._left()
        return self.out

    def _left(self) -> None:
        """Raise the last line of an evaluation with stories left to score (transient failures)."""
        kept = len(self.judge.journal) if self.judge.journal is not None else 0
        first = next(iter(self.pending.values()))
        raise PartialFailure(f"{len(self.pending)} stor(ies) left to score, whose judge calls failed for a transient "
                             f"cause ({first}); re-run the same command: it replays the {kept} judge call(s) kept in "
                             f"{self.out / 'judge_calls.jsonl'} and asks only the rest")

    def _check_resumable(self, run: Resumable, stories: list[dict]) -> set[str]:
        """Refuse other settings, another rubric or template text, or another text behind a story
        already scored; returns the story_ids already scored."""
        run.check_settings(asdict(self.cfg), settings_of(RESULT_KEYS))
        run.check_texts("template_sha256", text_hashes(self._templates()))
        done = run.done("scores.jsonl", "story_id")
        run.check_texts("story_sha256", {s["story_id"]: story_sha256(s) for s in stories if s["story_id"] in done})
        return done

    @staticmethod
    def _check_provenance(run: Resumable, now: dict) -> None:
        """Refuse to add scores made with another judge or scorer (their numerics included), reference
        corpus, metrics version or signals: the settings can be equal while the files, code or machine
        behind them changed. An evaluation recorded before the metrics had a version has version 1."""
        before = dict(run.recorded.get("provenance") or {})
        if before:
            before.setdefault("metrics_version", 1)
        for key in PROVENANCE_KEYS:
            if key in before and key in now:
                run.check_provenance(key, before[key], now[key])

    # --- resources --------------------------------------------------------------------------------

    def model(self, spec: str) -> Model:
        if spec not in self._models:
            self._models[spec] = self.cfg.load(spec)
        return self._models[spec]

    @property
    def judge(self) -> Judge:
        if self._judge is None:
            c = self.cfg
            self._judge = Judge(self.model(c.judge), self.rubric, mode=c.judge_mode, samples=c.samples,
                                max_parse_retries=c.max_parse_retries, temperature=c.judge_temperature,
                                top_p=c.judge_top_p, max_new_tokens=c.judge_max_new_tokens, seed=c.seed,
                                journal=Journal(self.out / "judge_calls.jsonl"))
        return self._judge

    @property
    def metrics(self) -> StoryMetrics:
        """The rule-based metrics' reference side (the same `StoryMetrics` the rewards use)."""
        if self._metrics is None:
            with self.timer.timed("reference"):  # the corpus's embeddings: computed once, then cached
                self._metrics = self._load_metrics()
        return self._metrics

    def _curation_scorer(self) -> CurationScorer:
        """Signal-1 on the judge's model, retrieving from this evaluation's corpus sample."""
        c = self.cfg
        return curation_scorer(self.model(c.judge), self.embedder, reference_dir(c.reference_dir),
                               max_chunks=c.reference_max_chunks, seed=c.seed)

    def _load_metrics(self) -> StoryMetrics:
        return StoryMetrics.load(self.cfg.reference_dir, self.embedder, kl_alpha=self.cfg.kl_alpha,
                                 max_chunks=self.cfg.reference_max_chunks, seed=self.cfg.seed)

    def provenance(self, stories: list[dict]) -> dict:
        """What makes these scores comparable with another evaluation's: judge, scorer, reference."""
        return {"judge": None if self.cfg.no_judge else self.judge.fingerprint(),
                "scorer": None if self.cfg.no_surprisal else (self.cfg.scorer or WRITER_SCORER),
                "scorer_numerics": None if self.cfg.no_surprisal else scorer_numerics(
                    self.model, self.cfg.scorer, {self._scorer_spec(s) for s in stories}),
                "reference": self.metrics.fingerprint(), "metrics_version": METRICS_VERSION,
                "signals": self.signals.fingerprint() if self.signals else None,
                "catalog": self.catalog.to_json()}

    # --- scoring ----------------------------------------------------------------------------------

    def _score_chunk(self, groups: list[list[dict]], done: set[str]) -> list[dict]:
        stories = [s for g in groups for s in g]
        cleaned = [sanitize(s["text"]) for s in stories]
        texts = [text for text, _ in cleaned]
        timed = self.timer.timed
        with timed("judge"):
            judged = self._judge_all(texts)
        with timed("surprisal"):
            surprisals = self._surprisal(stories, texts)
        with timed("metrics"):
            finals = self.metrics.encode(texts)
            measured = self.metrics.measure(texts, finals)
            has_drafts = [bool(s.get("drafts")) for s in stories]
            first = self.metrics.encode([s["drafts"][0] if d else "" for s, d in zip(stories, has_drafts)])
            homog = self._homogenization(stories, finals)
        with timed("signals"):
            signals = self.signals.measure([s["prompt"] for s in stories], texts) if self.signals else None
        records = []
        for i, s in enumerate(stories):
            if s["story_id"] in done:
                continue
            j = judged[i]
            if j is not None and j.retry:  # not final: the next run scores it again
                self.pending[s["story_id"]] = next(j.reasons[a] for a in sorted(j.retry) if a in j.reasons)
                continue
            m = measured[i]
            for aspect in self.catalog.aspects:
                m.set(aspect, j.scores.get(aspect) if j else None,
                      (j.reasons.get(aspect) if j else None) or "not judged (--no-judge)")
            m.set("surprisal", *surprisals[i])
            m.set("homogenization", *homog[i])
            m.set("draft_to_final_similarity", *draft_similarity(first[i] if has_drafts[i] else None, finals[i]))
            if signals is not None:
                m.values.update(signals[i].values)
                m.missing.update(signals[i].missing)
            rec = {k: s.get(k) for k in ID_FIELDS}
            rec["prompt_sha256"] = sha256_text(s["prompt"])
            rec.update({k: m.values.get(k) for k in (*self.catalog.keys, "draft_to_final_similarity")})
            rec.update(missing=m.missing, judge=j.diagnostics() if j else None,
                       surprisal_scorer=None if self.cfg.no_surprisal else self._scorer_spec(s))
            if cleaned[i][1]:
                rec["notes"] = cleaned[i][1]
            if j is not None and j.replies:  # sample mode: the judge's own words, for the viewer
                rec["judge_replies"] = j.replies
            records.append(rec)
        return records

    def _judge_all(self, texts: list[str]) -> list[Judgement | None]:
        if self.cfg.no_judge:
            return [None] * len(texts)
        return self.judge.score(texts, desc=f"judge ({self.cfg.judge_mode})")

    def _scorer_spec(self, story: dict) -> str:
        return self.cfg.scorer or story.get("model") or ""

    def _surprisal(self, stories: list[dict], texts: list[str]) -> list[tuple[float | None, str]]:
        out: list[tuple[float | None, str]] = [(None, "not computed (--no-surprisal)")] * len(stories)
        if self.cfg.no_surprisal:
            return out
        by_spec: dict[str, list[int]] = defaultdict(list)
        for i, s in enumerate(stories):
            by_spec[self._scorer_spec(s)].append(i)
        for spec, idx in by_spec.items():
            try:
                scorer = as_scorer(self.model(spec))
            except UsageError as exc:
                if self.cfg.scorer:
                    raise
                if spec not in self._scorer_errors:
                    log.warning("surprisal unavailable for writer model %r: %s", spec, exc)
                self._scorer_errors[spec] = f"no scorer: {exc}"
                for i in idx:
                    out[i] = (None, self._scorer_errors[spec])
                continue
            values = surprisal(scorer, [stories[i]["prompt"] for i in idx], [texts[i] for i in idx],
                               prompt_set=self.prompts)
            for i, v in zip(idx, values):
                out[i] = (v.values["surprisal"], v.missing.get("surprisal"))
        return out

    def _homogenization(self, stories: list[dict], chunks: list[Chunks]) -> list[tuple[float | None, str | None]]:
        """Mean pairwise cosine of a prompt group's final stories, the same value on each story."""
        members: dict[tuple[str, str], list[int]] = defaultdict(list)
        for i, s in enumerate(stories):
            members[(s["framework"], s["prompt_id"])].append(i)
        out: list[tuple[float | None, str | None]] = [(None, None)] * len(stories)
        for idx in members.values():
            value = group_similarity([chunks[i].story_vector for i in idx])
            for i in idx:
                out[i] = value
        return out

    # --- provenance -------------------------------------------------------------------------------

    def _templates(self) -> dict[str, str]:
        """The texts the scores depend on by name: the rubric's and the surprisal context's."""
        return {**self.rubric.texts(), f"template:{WRITER_TEMPLATE}": self.prompts.templates[WRITER_TEMPLATE]}

    def _write_manifest(self, stories: list[dict], seconds: dict[str, float], recorded: dict) -> None:
        """Earlier invocations' story hashes, inputs and the provenance this one cannot tell (`keep_known`)
        are kept: a resumed evaluation still refuses a changed text or judge behind any score it holds."""
        hashes = {**(recorded.get("story_sha256") or {}), **{s["story_id"]: story_sha256(s) for s in stories}}
        extra = {
            "inputs": {**(recorded.get("inputs") or {}), **{p: _file_sha256(p) for p in self.cfg.stories}},
            "n_stories": len(hashes),
            "story_sha256": hashes,
            "judge_backend": None if self.cfg.no_judge else self.judge.model.backend.describe(),
            "surprisal_context": "PromptSet.writer_messages (template single_write)",
            "provenance": keep_known(recorded.get("provenance"), self.provenance(stories)),
            "seconds": seconds,
        }
        write_manifest(self.out, kind="evaluation", config=asdict(self.cfg), seed=self.cfg.seed,
                       templates=self._templates(), extra=extra)


def _add_seconds(carried: dict[str, float], now: dict[str, float]) -> dict[str, float]:
    return {k: round(carried.get(k, 0.0) + now.get(k, 0.0), 2) for k in sorted({*carried, *now})}


def prompt_groups(stories: list[dict]) -> list[list[dict]]:
    """The stories of each (framework, prompt), in order: scored in the same chunk, so the
    per-prompt metrics (homogenization) see all of a prompt's stories."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for s in stories:
        groups.setdefault((s["framework"], s["prompt_id"]), []).append(s)
    return list(groups.values())


def group_chunks(groups: list[list[dict]], size: int) -> list[list[list[dict]]]:
    """Whole groups packed in order into chunks of at most `size` stories (one larger group alone).
    A chunk is scored in one pass, and which stories share a pass moves a bf16 score by float
    noise (up to ~0.2 of an expected judge score), so the device check re-forms them."""
    chunks, current, n = [], [], 0
    for g in groups:
        if current and n + len(g) > size:
            chunks.append(current)
            current, n = [], 0
        current.append(g)
        n += len(g)
    if current:
        chunks.append(current)
    return chunks


def story_sha256(story: dict) -> str:
    """What the scores of a story are computed from (its text, first draft, prompt and writer),
    hashed: a resumed evaluation refuses a story_id already scored whose story changed."""
    drafts = story.get("drafts") or [""]
    return sha256_text(json.dumps([story["prompt"], story["text"], drafts[0], story.get("model")]))


def _file_sha256(path: str) -> str:
    return sha256_text(Path(path).read_text(encoding="utf-8"))
