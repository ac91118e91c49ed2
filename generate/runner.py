"""Phase-synchronous runner: every prompt's frameworks advance in lockstep, and all model calls
of one phase, across every prompt and agent of a chunk, go to the backend as one batch.

Runs are append-only and resumable: finished prompts are skipped, finished calls are replayed
from the journal, so a crash loses at most the calls that were in flight.
"""

from __future__ import annotations

import logging
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tqdm.auto import tqdm

from generate.backends import ChatRequest, Completion, Model, SamplingParams, backend_options, load_model
from generate.common.errors import UsageError
from generate.datasets import Task, load_dataset, spread_over_aspects
from generate.frameworks import Settings, Step, get_framework
from generate.journal import Journal, derive_seed, request_key
from generate.common.jsonl import append_jsonl, read_jsonl, repair_jsonl
from generate.common.manifest import write_manifest
from generate.prompts import PromptSet, load_prompts

log = logging.getLogger(__name__)

# Settings that change what a run produces: resuming with different values would mix two runs.
RESULT_KEYS = ("framework", "model", "dataset", "agents", "rounds", "review_sees", "max_new_tokens",
               "temperature", "top_p", "seed", "templates", "personas")


@dataclass
class RunConfig:
    framework: str = field(default="review", metadata={"help": "single | teacher | debate | discussion | review"})
    model: str = field(default="smollm2-135m-instruct", metadata={"help": "hf:<id|dir>, openai:<model>, vllm:<model> or an alias"})
    dataset: str = field(default="default", metadata={"help": "default, scifi100, or a .json/.jsonl path"})
    out: str = field(default="runs/review", metadata={"help": "output directory"})
    limit: int | None = field(default=None, metadata={"help": "N prompts only, taken across aspects in turn"})
    agents: int = 3
    rounds: int = 3
    review_sees: str = field(default="latest", metadata={"help": "Review: peers' latest or first draft"})
    max_new_tokens: int = 400
    temperature: float = 0.9
    top_p: float = 0.9
    seed: int = 0
    chunk_prompts: int = field(default=32, metadata={"help": "prompts advanced together (batch width)"})
    batch_size: int = field(default=8, metadata={"help": "hf: sequences per forward pass"})
    base_url: str | None = field(default=None, metadata={"help": "openai: server URL (else OPENAI_BASE_URL)"})
    api_key: str | None = field(default=None, metadata={"help": "openai: key (else OPENAI_API_KEY)"})
    concurrency: int = field(default=8, metadata={"help": "openai: requests in flight"})
    timeout: float = field(default=120.0, metadata={"help": "openai: seconds per request"})
    retries: int = 5
    templates: str | None = field(default=None, metadata={"help": "prompt templates YAML"})
    personas: str | None = field(default=None, metadata={"help": "personas YAML"})

    def backend_options(self) -> dict:
        return backend_options(self.model, batch_size=self.batch_size, base_url=self.base_url, api_key=self.api_key,
                               concurrency=self.concurrency, timeout=self.timeout)


@dataclass
class Usage:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add(self, c: Completion) -> None:
        self.calls += 1
        self.prompt_tokens += c.prompt_tokens
        self.completion_tokens += c.completion_tokens


def finished_prompts(path: Path) -> set[str]:
    """Prompts whose stories are all on disk; a partial group (torn write) is dropped first."""
    repair_jsonl(path)
    rows = list(read_jsonl(path))
    counts = Counter(r["prompt_id"] for r in rows)
    complete = {pid for pid, n in counts.items() if any(r["prompt_id"] == pid and r["n_stories"] == n for r in rows)}
    if len(complete) != len(counts):
        kept = [r for r in rows if r["prompt_id"] in complete]
        log.warning("%s: dropping %d stories of prompts interrupted mid-write", path, len(rows) - len(kept))
        path.write_text("")
        append_jsonl(path, kept)
    return complete


def check_resumable(out: Path, cfg: RunConfig) -> None:
    manifest = out / "manifest.json"
    if not manifest.exists():
        return
    import json

    old = json.loads(manifest.read_text()).get("config", {})
    diff = [k for k in RESULT_KEYS if k in old and old[k] != getattr(cfg, k)]
    if diff:
        k = diff[0]
        raise UsageError(f"{out} holds a run made with {k}={old[k]!r} (now {getattr(cfg, k)!r}); "
                         "use another --out to start a new run")


class Runner:
    def __init__(self, cfg: RunConfig, model: Model | None = None):
        self.cfg = cfg
        self.framework = get_framework(cfg.framework)
        self.settings = Settings(cfg.agents, cfg.rounds, cfg.review_sees)
        self.prompts: PromptSet = load_prompts(cfg.templates, cfg.personas)
        self.params = SamplingParams(cfg.max_new_tokens, cfg.temperature, cfg.top_p)
        tasks = load_dataset(cfg.dataset)
        # Datasets list prompts aspect by aspect: a small subset should span aspects, not exhaust one.
        self.tasks = spread_over_aspects(tasks, cfg.limit) if cfg.limit else tasks
        self.out = Path(cfg.out)
        self._model = model

    @property
    def model(self) -> Model:
        if self._model is None:
            self._model = load_model(self.cfg.model, retries=self.cfg.retries, **self.cfg.backend_options())
        return self._model

    def run(self) -> Path:
        check_resumable(self.out, self.cfg)
        self.out.mkdir(parents=True, exist_ok=True)
        stories = self.out / "stories.jsonl"
        done = finished_prompts(stories)
        todo = [t for t in self.tasks if t.id not in done]
        log.info("%s: %d prompts, %d already done, %d to run", self.cfg.framework, len(self.tasks),
                 len(self.tasks) - len(todo), len(todo))
        write_manifest(self.out, kind="generation", config=asdict(self.cfg), seed=self.cfg.seed,
                       templates=self.prompts.texts(),
                       extra={"backend": self.model.backend.describe() if todo else None,
                              "n_prompts": len(self.tasks)})
        journal = Journal(self.out / "calls.jsonl")
        size = max(1, self.cfg.chunk_prompts)
        for start in tqdm(range(0, len(todo), size), desc=f"{self.cfg.framework} prompts", unit="chunk",
                          disable=len(todo) <= size):
            chunk = todo[start:start + size]
            append_jsonl(stories, self._run_chunk(chunk, journal))
        return stories

    def _run_chunk(self, chunk: list[Task], journal: Journal) -> list[dict]:
        t0 = time.perf_counter()
        gens = {t.id: self.framework(t, self.prompts, self.settings) for t in chunk}
        steps: dict[str, Step] = {tid: next(g) for tid, g in gens.items()}
        step_no = dict.fromkeys(gens, 0)
        usage: dict[str, dict[str, Usage]] = {tid: defaultdict(Usage) for tid in gens}
        finals: dict[str, list] = {}
        while steps:
            phase = Counter(s.phase for s in steps.values()).most_common(1)[0][0]
            owners, requests = [], []
            for tid, step in steps.items():
                for ci, call in enumerate(step.calls):
                    seed = derive_seed(self.cfg.seed, tid, step_no[tid], ci)
                    requests.append(ChatRequest(call.messages, self.params, seed=seed))
                    owners.append(tid)
            completions = self._complete(requests, journal, phase)
            replies: dict[str, list[str]] = defaultdict(list)
            for tid, comp in zip(owners, completions):
                call = steps[tid].calls[len(replies[tid])]
                usage[tid][call.agent].add(comp)
                replies[tid].append(comp.text)
            for tid in list(steps):
                step_no[tid] += 1
                try:
                    steps[tid] = gens[tid].send(replies[tid])
                except StopIteration as stop:
                    finals[tid] = stop.value
                    del steps[tid]
        seconds = (time.perf_counter() - t0) / len(chunk)
        return [rec for t in chunk for rec in self._records(t, finals[t.id], usage[t.id], seconds)]

    def _complete(self, requests: list[ChatRequest], journal: Journal, phase: str) -> list[Completion]:
        keys = [request_key(self.cfg.model, r) for r in requests]
        results: list[Completion | None] = [journal.get(k) for k in keys]
        missing = [i for i, r in enumerate(results) if r is None]
        if missing:
            def save(idx: list[int], outs: list[Completion]) -> None:
                journal.add([keys[missing[i]] for i in idx], outs)

            outs = self.model.generate([requests[i] for i in missing], desc=phase, on_done=save)
            for i, out in zip(missing, outs):
                results[i] = out
        return results  # type: ignore[return-value]

    def _records(self, task: Task, agents: list, usage: dict[str, Usage], seconds: float) -> list[dict]:
        total = Usage()
        for u in usage.values():
            total.calls += u.calls
            total.prompt_tokens += u.prompt_tokens
            total.completion_tokens += u.completion_tokens
        records = []
        for agent in agents:
            if not agent.story:
                log.warning("%s/%s: the final story is empty after retries", task.id, agent.name)
            records.append({
                "story_id": f"{self.cfg.framework}/{task.id}/{agent.name}",
                "prompt_id": task.id, "aspect": task.aspect, "prompt": task.prompt,
                "framework": self.cfg.framework, "agent": agent.name, "model": self.cfg.model,
                "text": agent.story, "drafts": agent.drafts[:-1], "feedback": agent.feedback,
                "usage": asdict(usage.get(agent.name, Usage())), "prompt_usage": asdict(total),
                "seconds": round(seconds, 3), "n_stories": len(agents), "seed": self.cfg.seed,
                "max_new_tokens": self.cfg.max_new_tokens, "temperature": self.cfg.temperature,
                "top_p": self.cfg.top_p,
            })
        return records
