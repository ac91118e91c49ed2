"""The principle judge as a scorer: each text's P(good) (or 0/1) under a principles file.

One scorer serves the evaluation's signal (`eval.signals`) and the `principle_judge` GRPO reward
(`rewards.principle_judge`), so a story's value in an evaluation is what a training step with
that signal would have been given for it. It judges with the Detector's own requests and verdict
reading (`detector.py`), as the principle optimisation measured it; set `mode` and `orders` to
what the optimisation used (its `principles.yaml` records them under `detector`).

Every text of a call goes to the model as ONE batched call under a `timeout`: a call that fails
or times out gives None for every text (a judge failure is no evidence about a story), a single
request the backend refuses (e.g. longer than its context) gives None for its text, and an empty
text gets 0 without a call. The model API is async (`Model.agenerate`): `ascore` for callers
inside an event loop (the trainer's async rewards), `score` for everyone else.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from eval.scorers.principles.detector import Detector, default_orders
from eval.scorers.principles.texts import load_state, load_templates
from generate.backends import BackendUnavailable, Model, backend_options, load_model
from generate.common.errors import UsageError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PrincipleScorer:
    """A Detector and the model that answers its requests."""

    detector: Detector
    model: Model

    @classmethod
    def load(cls, principles: str | None = None, model: str = "smollm2-135m-instruct", mode: str = "logprob",
             orders: int | None = None, templates: str | None = None, batch_size: int = 16,
             base_url: str | None = None, concurrency: int = 16, retries: int = 2, seed: int = 0) -> PrincipleScorer:
        """Load the judge model and build the Detector for a principles file (default: the
        unoptimised starting set) and the prompts YAML `templates` (default: the bundled one).

        Raises:
            UsageError: an unreadable principles or prompts file, or a bad mode / orders.
        """
        state = load_state(principles, need_strategy=False)
        options = backend_options(model, batch_size=batch_size, base_url=base_url, concurrency=concurrency)
        log.info("loading principle judge %s (%s mode, %d principles from %s)", model, mode, len(state.principles),
                 principles or "the starting set")
        judge_model = load_model(model, retries=retries, **options)
        detector = Detector(state.principles, load_templates(templates), mode, orders or default_orders(mode),
                            bool(judge_model.backend.supports_prefill), seed)
        return cls(detector, judge_model)

    async def ascore(self, tasks: list[str], texts: list[str], timeout: float = 120.0) -> list[float | None]:
        """P(good) (logprob mode) or 0/1 (sample mode) of each text as the answer to its task."""
        asks = [self.detector.requests(task, text) for task, text in zip(tasks, texts, strict=True)]
        flat = [r for rs in asks for r in rs]
        try:
            outs = await asyncio.wait_for(self.model.agenerate(flat), timeout) if flat else []
        except TimeoutError:
            log.warning("principle judge: no answer within %.0fs for %d texts; their value is None", timeout,
                        len(asks))
            return [0.0 if not rs else None for rs in asks]
        except UsageError as exc:  # a wrong key or model name fails every later call too: stop, in one line
            if not isinstance(exc, BackendUnavailable):
                raise
            log.warning("principle judge: %s; value is None for this batch", exc)
            return [0.0 if not rs else None for rs in asks]
        except Exception as exc:  # noqa: BLE001 - a judge failure must never stop training or an evaluation
            log.warning("principle judge: call failed (%s: %s); value is None for this batch", type(exc).__name__, exc)
            return [0.0 if not rs else None for rs in asks]
        values, start = [], 0
        for rs in asks:
            values.append(self.detector.verdict(outs[start:start + len(rs)]))
            start += len(rs)
        return values

    def score(self, tasks: list[str], texts: list[str], timeout: float = 120.0) -> list[float | None]:
        """`ascore` from synchronous code (its own event loop)."""
        return asyncio.run(self.ascore(tasks, texts, timeout))
