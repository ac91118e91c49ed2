"""The curation driver: candidates -> five agents per response, phase-batched and journaled.

Every response's protocol (`agents.curate`) advances in lockstep with the others of its chunk
(`generate.phases.drive`), so each phase's calls, across responses and agents, go to the backend
as one batch. Calls are journaled (`generate.journal.Journal`) with seeds derived from the run
seed and the call's place, so a re-run rebuilds identical requests and replays every finished
call; finished responses (in `judgments.jsonl`) are skipped; a killed run loses only the calls in
flight. A response whose agent output stays unusable goes to `failed.jsonl` with its reason and the
command exits 1; a re-run retries it with fresh seeds (drawn from its number of failures).
`preferences.jsonl` and `manifest.json` are rebuilt from `judgments.jsonl` at the end of every run.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from eval.embed import DEFAULT_EMBEDDER, Embedder
from generate.backends import Completion, Model, SamplingParams, backend_options, load_model
from generate.common.errors import PartialFailure, UsageError
from generate.common.jsonl import append_jsonl, read_jsonl, repair_jsonl
from generate.common.lock import output_lock
from generate.common.manifest import sha256_text, write_manifest
from generate.journal import Journal
from generate.phases import drive
from generate.prompts import load_prompts
from rewards.curation.agents import ABLATABLE, VERDICT_MODES, Settings, Step, curate
from rewards.curation.data import Candidate, agreement, build_pairs, load_candidates
from rewards.curation.prompts import load_curation_prompts
from rewards.curation.retrieval import Example, RetrievalIndex

log = logging.getLogger(__name__)

# Settings that change what a run produces: resuming with other values would mix two runs.
RESULT_KEYS = ("model", "verdict", "without", "k", "exemplar_words", "threshold", "max_items", "max_parse_retries",
               "list_tokens", "verdict_tokens", "temperature", "top_p", "seed")


@dataclass
class CurateConfig:
    candidates: list[str] = field(default_factory=list, metadata={"help": "stories.jsonl files (or {prompt, response, label} JSONL)"})
    out: str = field(default="runs/curation", metadata={"help": "output directory"})
    model: str = field(default="smollm2-135m-instruct", metadata={"help": "the agents' model (any backend spec)"})
    exemplars: str | None = field(default=None, metadata={"help": "JSONL of trusted {prompt, response} pairs"})
    reference_dir: str | None = field(default=None, metadata={"help": "classic corpus (default SCIFI_REFERENCE_DIR)"})
    reference_max_chunks: int | None = field(default=2000, metadata={"help": "embed a seeded sample of the corpus"})
    embedder: str = DEFAULT_EMBEDDER
    k: int = field(default=2, metadata={"help": "retrieved examples per prompt (0: no Retrieval agent)"})
    exemplar_words: int = field(default=120, metadata={"help": "words of each retrieved example shown"})
    without: list[str] = field(default_factory=list, metadata={"help": "ablate agents: positive negative judge reflect"})
    verdict: str = field(default="logprob", metadata={"help": "logprob (digit probabilities) | sample (parsed reply)"})
    threshold: float = field(default=0.5, metadata={"help": "judge: good iff P(good) > threshold"})
    max_items: int = 5
    max_parse_retries: int = 2
    list_tokens: int = field(default=160, metadata={"help": "reply budget of the Positive and Negative agents"})
    verdict_tokens: int = field(default=160, metadata={"help": "reply budget of sample-mode verdicts"})
    temperature: float = 0.7
    top_p: float = 0.9
    seed: int = 0
    limit: int | None = field(default=None, metadata={"help": "first N candidates only"})
    journal: str | None = field(default=None, metadata={"help": "call journal (default OUT/calls.jsonl); ablations "
                                                                  "may share the full run's to replay its calls"})
    templates: str | None = field(default=None, metadata={"help": "curation prompts YAML"})
    chunk_responses: int = field(default=32, metadata={"help": "responses advanced together"})
    batch_size: int = 8
    base_url: str | None = None
    api_key: str | None = None
    concurrency: int = 8
    timeout: float = 120.0
    retries: int = 5

    def __post_init__(self) -> None:
        self.without = sorted(set(self.without))
        if unknown := set(self.without) - set(ABLATABLE):
            raise UsageError(f"unknown --without {sorted(unknown)}; choose from: {', '.join(ABLATABLE)}")
        if self.verdict not in VERDICT_MODES:
            raise UsageError(f"unknown verdict mode {self.verdict!r}; choose one of: {', '.join(VERDICT_MODES)}")
        if self.k < 0 or self.exemplar_words < 1 or self.chunk_responses < 1:
            raise UsageError("need k >= 0, exemplar_words >= 1 and chunk_responses >= 1")


class Curator:
    def __init__(self, cfg: CurateConfig, model: Model | None = None, embedder: Embedder | None = None):
        self.cfg = cfg
        self.out = Path(cfg.out)
        self.prompts = load_curation_prompts(cfg.templates)
        self.writer = load_prompts()
        self._model, self._embedder = model, embedder
        self.failed: dict[str, str] = {}  # response key -> reason, for responses that failed in this run

    @property
    def model(self) -> Model:
        if self._model is None:
            opts = backend_options(self.cfg.model, batch_size=self.cfg.batch_size, base_url=self.cfg.base_url,
                                   api_key=self.cfg.api_key, concurrency=self.cfg.concurrency, timeout=self.cfg.timeout)
            self._model = load_model(self.cfg.model, retries=self.cfg.retries, **opts)
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
        with output_lock(self.out):  # one writer per directory, taken before anything is read
            return self._run()

    def _run(self) -> Path:
        cfg = self.cfg
        candidates = load_candidates(cfg.candidates, cfg.limit)
        self._check_resumable()
        self.out.mkdir(parents=True, exist_ok=True)
        judgments_path, failed_path = self.out / "judgments.jsonl", self.out / "failed.jsonl"
        for path in (judgments_path, failed_path):
            repair_jsonl(path)
        done = {r["key"] for r in read_jsonl(judgments_path)}
        attempts = Counter(r["key"] for r in read_jsonl(failed_path))
        todo = [c for c in candidates if c.key not in done]
        log.info("curation: %d candidates, %d already judged, %d to run", len(candidates), len(done), len(todo))
        index_fp = None
        if todo:
            settings = self.settings()
            examples, index_fp = self._retrieve(todo)
            self._check_index(index_fp)
            journal = Journal(cfg.journal or self.out / "calls.jsonl")
            self._write_manifest(index_fp, None)  # now, so an interrupted run says how it was made
            for start in range(0, len(todo), cfg.chunk_responses):
                chunk = todo[start:start + cfg.chunk_responses]
                records, failures = self._run_chunk(chunk, examples, settings, journal, attempts)
                append_jsonl(judgments_path, records)
                append_jsonl(failed_path, failures)
        keys = {c.key for c in candidates}
        judgments = [j for j in read_jsonl(judgments_path) if j["key"] in keys]
        pairs = build_pairs(judgments, self.writer.writer_messages)
        path = _rewrite_jsonl(self.out / "preferences.jsonl", pairs)
        self._write_manifest(index_fp, _counts(candidates, judgments, pairs, self.failed))
        log.info("curation: %d judged, %d pairs -> %s", len(judgments), len(pairs), path)
        if self.failed:
            raise PartialFailure(f"{len(self.failed)} response(s) failed (reasons in {failed_path}); re-run the same "
                                 "command to retry them")
        return path

    def _retrieve(self, todo: list[Candidate]) -> tuple[dict[str, list[Example]], dict | None]:
        """The k nearest examples of each prompt (by prompt hash), and the index's fingerprint."""
        cfg = self.cfg
        if cfg.k == 0:
            return {}, None
        embedder = self._embedder or Embedder(cfg.embedder)
        index = RetrievalIndex.build(embedder, cfg.exemplars, cfg.reference_dir or os.environ.get("SCIFI_REFERENCE_DIR"),
                                     max_chunks=cfg.reference_max_chunks, seed=cfg.seed)
        prompts = {c.prompt_sha256: c.prompt for c in todo}
        return dict(zip(prompts, index.nearest(list(prompts.values()), embedder, cfg.k))), index.fingerprint

    def _render(self, examples: list[Example]) -> str:
        items = "\n\n".join(self.prompts.render("example", n=n, source=e.source,
                                                text=" ".join(e.text.split()[:self.cfg.exemplar_words]))
                            for n, e in enumerate(examples, 1))
        return self.prompts.render("examples", items=items) if items else ""

    def _run_chunk(self, chunk: list[Candidate], examples: dict[str, list[Example]], settings: Settings,
                   journal: Journal, attempts: Counter) -> tuple[list[dict], list[dict]]:
        t0 = time.perf_counter()
        gens = {c.key: curate(c.key, c.prompt, c.text, self._render(examples.get(c.prompt_sha256, [])), self.prompts,
                              settings, attempts[c.key]) for c in chunk}
        usage = {c.key: Counter() for c in chunk}

        def answer(steps: dict[str, Step]) -> dict[str, list[Completion]]:
            calls = [(key, call) for key, step in steps.items() for call in step.calls]
            phases = "/".join(sorted({s.phase for s in steps.values()}))
            outs = journal.complete(self.model, self.cfg.model, [c.request for _, c in calls], desc=phases)
            replies: dict[str, list[Completion]] = {key: [] for key in steps}
            for (key, _), out in zip(calls, outs, strict=True):
                replies[key].append(out)
                usage[key].update(calls=1, prompt_tokens=out.prompt_tokens, completion_tokens=out.completion_tokens)
            return replies

        results = drive(gens, answer)
        seconds = round((time.perf_counter() - t0) / len(chunk), 3)
        records, failures = [], []
        for c in chunk:
            result = results[c.key]
            meta = {"key": c.key, "story_id": c.story_id, "source": c.source, "prompt_id": c.prompt_id,
                    "prompt_sha256": c.prompt_sha256, "aspect": c.aspect, "framework": c.framework}
            cost = {"usage": dict(usage[c.key]), "seconds": seconds}
            if result.pop("status") == "failed":
                self.failed[c.key] = result["reason"]
                failures.append({**meta, "attempt": attempts[c.key], **result, **cost,
                                 "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
                log.warning("%s: curation failed (attempt %d): %s", c.story_id, attempts[c.key], result["reason"])
                continue
            records.append({**meta, "prompt": c.prompt, "text": c.text, "label": c.label,
                            "examples": [e.id for e in examples.get(c.prompt_sha256, [])], **result, **cost})
        return records, failures

    def _check_resumable(self) -> None:
        manifest = self.out / "manifest.json"
        if not manifest.exists():
            return
        old = json.loads(manifest.read_text()).get("config", {})
        new = asdict(self.cfg)
        diff = [k for k in RESULT_KEYS if k in old and old[k] != new[k]]
        if diff:
            raise UsageError(f"{self.out} holds a curation made with {diff[0]}={old[diff[0]]!r} (now {new[diff[0]]!r}); "
                             "use another --out")
        before = json.loads(manifest.read_text()).get("template_sha256", {})
        now = {k: sha256_text(v) for k, v in self.prompts.texts().items()}
        if changed := sorted(k for k, h in now.items() if before.get(k, h) != h):
            raise UsageError(f"{self.out} holds a curation made with another text for {', '.join(changed)}; "
                             "use another --out")

    def _check_index(self, index: dict | None) -> None:
        """Refuse to resume against other retrieval sources (another corpus, exemplars or encoder)."""
        manifest = self.out / "manifest.json"
        before = json.loads(manifest.read_text()).get("retrieval") if manifest.exists() else None
        if before is not None and before != index:
            raise UsageError(f"{self.out} holds a curation made with other retrieval sources ({before}); "
                             "use another --out")

    def _write_manifest(self, index: dict | None, counts: dict | None) -> None:
        path = self.out / "manifest.json"
        previous = json.loads(path.read_text()).get("retrieval") if path.exists() else None
        write_manifest(self.out, kind="curation", config=asdict(self.cfg), seed=self.cfg.seed,
                       templates={**self.prompts.texts(), "template:single_write": self.writer.templates["single_write"]},
                       extra={"retrieval": index or previous, "counts": counts,
                              "backend": self._model.backend.describe() if self._model else None})


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


def _rewrite_jsonl(path: Path, rows: list[dict]) -> Path:
    """Replace a derived file atomically (it is rebuilt from the judgments every run)."""
    tmp = path.with_suffix(".jsonl.tmp")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    tmp.replace(path)
    return path
