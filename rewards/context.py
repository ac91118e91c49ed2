"""`RewardContext`: everything the reward functions of one trainer share, in one explicit object.

A training step calls several rewards on the same completions: the embedding rewards need the
same chunk embeddings, the judge reward and the quality gate need the same judge call, the
reference rewards the same corpus. The context owns those resources and their caches instead of
module-level state: the encoder (by name), the reference-side metrics (`eval.metrics.story.
StoryMetrics`, the evaluation's own code), the judges and their in-flight calls, the surprisal
scorers, the per-step embedding cache and the timer the reward-time callback reads. Tests build a
context with a stand-in encoder; two trainers in one process never share hidden state.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from eval.embed import Embedder
from eval.judge import Judge, Judgement
from eval.metrics.story import Chunks, StoryMetrics, encode_chunks
from eval.metrics.surprisal import Scorer, as_scorer
from eval.metrics.volume_gain import too_few_chunks
from generate.backends import BackendUnavailable, backend_options, load_backend, load_model
from generate.common.errors import UsageError
from generate.common.timing import Timer

log = logging.getLogger(__name__)

KEEP = 4  # batches kept: a step's rewards share one; an evaluation alternates a few


class RewardContext:
    """Shared resources of a set of rewards.

    Args:
        encoder: builds a sentence encoder from its name (default: `eval.embed.Embedder`).
        timer: where reward intervals are recorded (default: a new `Timer`).
    """

    def __init__(self, *, encoder: Callable[[str], Embedder] = Embedder, timer: Timer | None = None):
        self._make_encoder = encoder
        self.timer = timer or Timer()
        self._lock = threading.Lock()
        self._encoders: dict[str, Embedder] = {}
        self._metrics: dict[tuple, StoryMetrics] = {}
        self._chunks: OrderedDict[tuple, list[Chunks]] = OrderedDict()
        self._judges: dict[tuple, Judge] = {}
        self._inflight: OrderedDict[tuple, tuple[asyncio.AbstractEventLoop, asyncio.Future]] = OrderedDict()
        self._scorers: dict[tuple, Scorer] = {}
        self._resources: dict[tuple, Any] = {}

    # --- encoder and reference -------------------------------------------------------------------

    def encoder(self, name: str) -> Embedder:
        with self._lock:
            if name not in self._encoders:
                self._encoders[name] = self._make_encoder(name)
            return self._encoders[name]

    def story_metrics(self, reference_dir: str | None, embedder: str, max_chunks: int | None = None,
                      kl_alpha: float = 1.0, seed: int = 0, *, volume: bool = False) -> StoryMetrics:
        """The reference metrics for a corpus, loaded and factored once per context.

        Args:
            volume: for the `volume_gain` reward, which needs more reference chunks than embedding
                dimensions: below that the evaluation reports the gain missing (`too_few_chunks`),
                so the reward would be None for every completion, and GRPO would fill each with its
                group's mean: a reward that trains nothing while it seems to run.

        Raises:
            UsageError: there is no corpus: a reference reward cannot run without it; or `volume`
                and the reference sample has no more chunks than the encoder has dimensions.
        """
        key = (reference_dir, embedder, max_chunks, kl_alpha, seed)
        if key not in self._metrics:
            metrics = StoryMetrics.load(reference_dir, self.encoder(embedder), kl_alpha=kl_alpha,
                                        max_chunks=max_chunks, seed=seed)
            if metrics.reference is None:
                raise UsageError("reference rewards (kl, novelty_cos, volume_gain) need the reference corpus: run "
                                 "`review-lab corpus fetch`, or set SCIFI_REFERENCE_DIR or the reward's reference_dir")
            self._metrics[key] = metrics
        metrics = self._metrics[key]
        embeddings = metrics.reference.embeddings
        if volume and embeddings is not None and too_few_chunks(*embeddings.shape):
            n, dim = embeddings.shape
            raise UsageError(f"volume_gain reward: the reference sample has {n} chunks, not more than the {dim} "
                             f"embedding dimensions of {embedder}, so every gain would be missing; raise max_chunks "
                             f"(--reference-max-chunks) above {dim}, or use a larger corpus")
        return metrics

    def chunks(self, texts: Sequence[str], embedder: str, chunk_size: int) -> list[Chunks]:
        """Chunk embeddings of a batch, computed once per (encoder, chunk size, batch): every
        embedding reward of a step shares one encoder call."""
        key = (embedder, chunk_size, tuple(texts))
        with self._lock:
            if key in self._chunks:
                self._chunks.move_to_end(key)
                return self._chunks[key]
        with self.timer.timed("embed"):
            out = encode_chunks(self.encoder(embedder), texts, chunk_size)
        with self._lock:
            self._chunks[key] = out
            while len(self._chunks) > KEEP:
                self._chunks.popitem(last=False)
        return out

    # --- judge --------------------------------------------------------------------------------------

    def judge(self, model: str, mode: str, samples: int, rubric: str | None, batch_size: int,
              base_url: str | None, concurrency: int, retries: int) -> Judge:
        """One judge per configuration (loading a local judge model takes seconds)."""
        key = (model, mode, samples, rubric, batch_size, base_url, concurrency, retries)
        with self._lock:
            if key not in self._judges:
                options = backend_options(model, batch_size=batch_size, base_url=base_url, concurrency=concurrency)
                log.info("loading judge %s (%s mode)", model, mode)
                self._judges[key] = Judge(load_model(model, retries=retries, **options), rubric, mode=mode,
                                          samples=samples)
            return self._judges[key]

    async def judgements(self, judge: Judge, stories: list[str], timeout: float) -> list[Judgement | None]:
        """The judge's verdicts on a batch; concurrent callers with the same judge and stories (the
        judge reward and the quality gate) share one in-flight call. A call that fails or times
        out gives None for every story (a judge failure, never a low score).

        Raises:
            UsageError: the judge's server refused the request for a cause only the user can fix
                (a wrong key or model name, a spent quota: `generate.backends.openai_backend`):
                every later step would fail the same way, and training on a reward that is None
                every step trains nothing, so the run stops in one line instead.
        """
        key = (id(judge), timeout, tuple(stories))
        loop = asyncio.get_running_loop()
        entry = self._inflight.get(key)
        if entry is None or entry[0] is not loop:
            entry = (loop, asyncio.ensure_future(self._judge_call(judge, stories, timeout)))
            self._inflight[key] = entry
            while len(self._inflight) > KEEP:
                self._inflight.popitem(last=False)
        return list(await asyncio.shield(entry[1]))

    async def _judge_call(self, judge: Judge, stories: list[str], timeout: float) -> list[Judgement | None]:
        with self.timer.timed("judge"):
            try:
                return await asyncio.wait_for(judge.ascore(stories, desc=None), timeout)
            except asyncio.TimeoutError:
                log.warning("judge: no answer within %.0fs for %d stories; their judge reward is None", timeout,
                            len(stories))
            except UsageError as exc:
                if not isinstance(exc, BackendUnavailable):  # a server down for now is a judge failure
                    raise
                log.warning("judge: %s; judge reward is None for this batch", exc)
            except Exception as exc:  # noqa: BLE001 - a judge failure must never stop training
                log.warning("judge: call failed (%s: %s); judge reward is None for this batch",
                            type(exc).__name__, exc)
            return [None] * len(stories)

    # --- surprisal scorer ---------------------------------------------------------------------------

    def scorer(self, model: str, batch_size: int) -> Scorer:
        """One teacher-forcing scoring backend per model."""
        key = (model, batch_size)
        with self._lock:
            if key not in self._scorers:
                self._scorers[key] = as_scorer(load_backend(model, batch_size=batch_size))
            return self._scorers[key]

    def resource(self, key: tuple, factory: Callable[[], Any]) -> Any:
        """A shared resource of another kind (a reward model, a principles judge), built once per
        context and key."""
        with self._lock:
            if key not in self._resources:
                self._resources[key] = factory()
            return self._resources[key]

    def describe(self) -> dict[str, Any]:
        """What the manifest records about the loaded shared resources."""
        return {"encoders": sorted(self._encoders),
                "references": [m.fingerprint() for m in self._metrics.values()],
                "judges": [j.fingerprint() for j in self._judges.values()]}
