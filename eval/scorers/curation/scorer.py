"""The curation verdict as a scorer: each story judged good (1) or bad (0) by the curation agents
(arXiv 2508.21476, section 3.1), as `CurationScorer.verdicts(prompts, texts)`.

The verdict is the one the curation pipeline (`rewards.curation`, which pairs good and bad answers
to a prompt into preferences for the reward model) gives: the same protocol (`agents.curate`),
prompts (`configs/prompts/curation.yaml`), seeds (from the run seed and the response's identity,
`response_key`) and retrieval (`retrieval.py`: the `k` passages nearest to each writing task,
their first `exemplar_words` words shown). Every story's protocol advances in lockstep with the
others (`drive_curation`), so each phase's calls, across stories and agents, reach the model as
one batch; `complete` replaces the model's own `generate` (the pipeline passes its journal).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from eval.embed import Embedder
from eval.scorers.curation.agents import Protocol, Settings, Step, curate
from eval.scorers.curation.prompts import CurationPrompts, load_curation_prompts
from eval.scorers.curation.retrieval import Example, RetrievalIndex
from generate.backends import ChatRequest, Completion, Model
from generate.common.manifest import sha256_text
from generate.phases import drive

Complete = Callable[[list[ChatRequest], str], list[Completion]]


def response_key(prompt: str, text: str) -> str:
    """A response's identity, from its prompt and text (runs reuse story ids); its seeds derive from it."""
    return sha256_text(f"{sha256_text(prompt)}\n{text}")[:16]


def render_examples(prompts: CurationPrompts, examples: list[Example], words: int) -> str:
    """The retrieved passages as the agents read them (the first `words` words of each); "" for none."""
    items = "\n\n".join(prompts.render("example", n=n, source=e.source, text=" ".join(e.text.split()[:words]))
                        for n, e in enumerate(examples, 1))
    return prompts.render("examples", items=items) if items else ""


def drive_curation(protocols: dict[str, Protocol], complete: Complete) -> tuple[dict[str, dict], dict[str, Counter]]:
    """Drive the protocols in lockstep, each phase's calls across all of them as one
    `complete(requests, phases)` call. Returns each protocol's result and usage (calls, prompt and
    completion tokens) by key."""
    usage = {key: Counter() for key in protocols}

    def answer(steps: dict[str, Step]) -> dict[str, list[Completion]]:
        calls = [(key, call) for key, step in steps.items() for call in step.calls]
        phases = "/".join(sorted({s.phase for s in steps.values()}))
        outs = complete([c.request for _, c in calls], phases)
        replies: dict[str, list[Completion]] = {key: [] for key in steps}
        for (key, _), out in zip(calls, outs, strict=True):
            replies[key].append(out)
            usage[key].update(calls=1, prompt_tokens=out.prompt_tokens, completion_tokens=out.completion_tokens)
        return replies

    return drive(protocols, answer), usage


@dataclass
class CurationScorer:
    """The curation agents on one model.

    Args:
        model: the agents' model.
        settings: how a story is curated (default: the pipeline's defaults, prefilled where the
            backend honours it).
        prompts: the agents' templates (default `configs/prompts/curation.yaml`).
        index, embedder: the Retrieval agent's index and the encoder that queries it; without an
            index (or with `k` 0) the agents read no examples.
        k: passages retrieved per writing task; exemplar_words: words shown of each.
    """

    model: Model
    settings: Settings | None = None
    prompts: CurationPrompts = field(default_factory=load_curation_prompts)
    index: RetrievalIndex | None = None
    embedder: Embedder | None = None
    k: int = 2
    exemplar_words: int = 120

    def __post_init__(self) -> None:
        if self.settings is None:
            self.settings = Settings(prefill=bool(self.model.backend.supports_prefill))

    def examples(self, tasks: list[str]) -> dict[str, str]:
        """The rendered passages of each distinct task (one encoder call for all of them)."""
        distinct = list(dict.fromkeys(tasks))
        if self.index is None or self.embedder is None or self.k == 0:
            return dict.fromkeys(distinct, "")
        found = self.index.nearest(distinct, self.embedder, self.k)
        return {t: render_examples(self.prompts, e, self.exemplar_words) for t, e in zip(distinct, found)}

    def verdicts(self, prompts: list[str], texts: list[str], complete: Complete | None = None) -> list[dict]:
        """One judgment per (writing task, story), in order: `final` (1 good, 0 bad), `initial`,
        `overturned`, each list and verdict with its raw replies, or `{"status": "failed", "agent",
        "phase", "reason", "raw"}` when an agent's output stayed unusable. Identical pairs share
        one judgment."""
        keys = [response_key(p, t) for p, t in zip(prompts, texts, strict=True)]
        passages = self.examples(prompts)
        protocols: dict[str, Protocol] = {}
        for key, prompt, text in zip(keys, prompts, texts):
            if key not in protocols:
                protocols[key] = curate(key, prompt, text, passages[prompt], self.prompts, self.settings)
        results, _ = drive_curation(protocols, complete or self._complete)
        return [dict(results[key]) for key in keys]

    def fingerprint(self) -> dict:
        """What makes two sets of verdicts comparable: the model, settings, templates and sources."""
        s = self.settings
        return {"model": self.model.backend.describe(), "verdict": s.verdict, "without": sorted(s.without),
                "threshold": s.threshold, "max_items": s.max_items, "max_parse_retries": s.max_parse_retries,
                "seed": s.seed, "k": self.k if self.index is not None else 0, "exemplar_words": self.exemplar_words,
                "templates": sha256_text("\n".join(f"{k}\n{v}" for k, v in sorted(self.prompts.texts().items()))),
                "retrieval": self.index.fingerprint if self.index is not None else None}

    def _complete(self, requests: list[ChatRequest], desc: str) -> list[Completion]:
        # The agents re-ask unusable (blank included) replies themselves: the model must not too.
        return self.model.generate(requests, desc=f"curation ({desc})", reask_blank=False)
