"""The adversarial principle optimisation with reflection (arXiv 2508.21476, section 3.2 and A.4).

    review-lab principles optimize --labelled DATA.jsonl --model smollm2-135m-instruct \
        --iterations 3 --out runs/principles [--no-reflect] [--verdict logprob|sample]

Iteration 0 measures the starting principles on the held-out split. Each later iteration, with
the principles P and strategy S it starts from:

1. generate: the Generator damages `attacks` good responses of the optimisation split under S;
2. detect: the Detector (P) judges the damaged texts and, with reflection, the labelled rows of
   the optimisation split (all, or a seeded `--checks` sample); 3. diagnose: the Reflector
   diagnoses its mistakes there (at most `--max-diagnoses`, both kinds of mistake in turn);
4. revise: S is rewritten to be subtler from the attacks that were caught, and P from the ones
   that fooled the Detector; 5. reflect: the Reflector rewrites P from its diagnoses;
6. evaluate: the Detector with the new P judges the held-out split.

Each phase is one batch (`protocols.run_phases`). Every call goes through the run's journal
(`calls.jsonl`) with seeds derived from the run seed and the call's place, so a killed run
re-run with the same command replays its finished calls and continues. An iteration with a call
whose retries ran out (a transient failure) is not written: the command exits 1, and its re-run
replays every finished call and asks the failed ones again with the same seeds, so it converges;
a request the backend refused, or an unusable reply, is part of the result (a skipped attack, a
rewrite not used), as asking again would give the same. An iteration is done when
its `iteration-NN.yaml` exists (written atomically: principles, strategy, held-out metrics, the
attacks and every rewrite, used or not); `metrics.jsonl`, `metrics.png` and `principles.yaml`
are rebuilt from those files. `principles.yaml` is the LAST iteration: choosing the best one by
held-out F1 would select on the split that reports the result; any `iteration-NN.yaml` can be
given to the reward instead. A larger `--iterations` on a finished run continues it; any other
option (but the runtime ones, RUNTIME_KEYS), another template, start or labelled file, or other
backend numerics is refused (`generate.common.resumable`).
"""

from __future__ import annotations

import json
import logging
import os
import random
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from eval.plotting import pyplot
from eval.rubric import MODES
from eval.scorers.principles import Detector, State, default_orders, load_state, load_templates
from generate.backends import ChatRequest, Completion, Model, gave_up
from generate.common.errors import PartialFailure, UsageError
from generate.common.files import write_text_atomic
from generate.common.manifest import sha256_bytes, write_manifest
from generate.common.ranges import AT_LEAST_1, FRACTION, NON_NEGATIVE, OneOf, Range, checked, in_range
from generate.common.resumable import Resumable, resumable, text_hashes
from generate.journal import Journal, derive_seed
from rewards.principles.data import ModelOptions, load_labelled, split_examples
from rewards.principles.metrics import binary_metrics
from rewards.principles.protocols import Check, Limits, attack, detect, diagnose, mistakes, revise, run_phases
from rewards.signal_check import group_bootstrap

log = logging.getLogger(__name__)

PLOTTED = ("accuracy", "precision", "recall", "f1", "auc")
# Options that do not change what a run produces; every other one must match to resume a run.
RUNTIME_KEYS = ("out", "iterations", "batch_size", "base_url", "api_key", "concurrency", "timeout", "retries",
                "retry_budget")
NOUN = "an optimisation"


def result_settings(config: dict) -> dict:
    """Every option of a config but the runtime ones: a new option changes results unless listed."""
    return {k: v for k, v in config.items() if k not in RUNTIME_KEYS}


@dataclass
class OptimizeConfig(ModelOptions):
    labelled: str | None = field(default=None, metadata={"help": "JSONL of {prompt, response, label}"})
    out: str = "runs/principles"
    iterations: int = field(default=3, metadata=in_range(NON_NEGATIVE))
    reflect: bool = field(default=True, metadata={"help": "--no-reflect: the paper's ablation"})
    verdict: str = field(default="logprob", metadata=checked(OneOf(MODES), help="logprob (P(good)), sample (0/1)"))
    orders: int | None = field(default=None, metadata=in_range(
        AT_LEAST_1, help="label orders per verdict (logprob: 2)"))
    heldout_fraction: float | None = field(default=None, metadata=in_range(
        FRACTION, help="when rows carry no split (0.3)"))
    seed: int = 0
    principles: str | None = field(default=None, metadata={"help": "start (default configs/judge/principles.yaml)"})
    templates: str | None = field(default=None, metadata={"help": "prompts (configs/prompts/principles.yaml)"})
    attacks: int = field(default=8, metadata=in_range(AT_LEAST_1, help="damaged responses per iteration"))
    max_principles: int = field(default=8, metadata=in_range(Range(2)))
    max_words: int = field(default=30, metadata=in_range(AT_LEAST_1, help="words per principle"))
    strategy_words: int = field(default=80, metadata=in_range(AT_LEAST_1))
    max_examples: int = field(default=3, metadata=in_range(AT_LEAST_1, help="damaged texts shown per rewrite"))
    checks: int | None = field(default=None, metadata=in_range(
        AT_LEAST_1, help="labelled rows checked per iteration (all)"))
    max_diagnoses: int = field(default=8, metadata=in_range(AT_LEAST_1, help="mistakes diagnosed per iteration"))


class Optimiser:
    """One optimisation run in `cfg.out`; `model` overrides loading `cfg.model` (tests)."""

    def __init__(self, cfg: OptimizeConfig, model: Model | None = None):
        if not cfg.labelled:
            raise UsageError("--labelled DATA.jsonl is required")
        if cfg.iterations < 0 or cfg.attacks < 1 or cfg.max_principles < 2:
            raise UsageError("need --iterations >= 0, --attacks >= 1 and --max-principles >= 2")
        self.cfg = cfg
        self.templates = load_templates(cfg.templates)
        self.start = load_state(cfg.principles)
        self.opt, self.held = split_examples(load_labelled(cfg.labelled), cfg.heldout_fraction, cfg.seed)
        self.orders = cfg.orders or default_orders(cfg.verdict)
        Detector(self.start.principles, self.templates, cfg.verdict, self.orders)  # validates mode and orders
        self.limits = Limits(cfg.max_principles, cfg.max_words, cfg.strategy_words, cfg.max_examples, cfg.max_diagnoses)
        self.out = Path(cfg.out)
        self._model = model
        self.journal: Journal | None = None
        self.asked: Counter = Counter()  # requests per phase in the iteration under way
        self.gave_up: list[str] = []  # errors of calls whose retries ran out, this invocation

    @property
    def model(self) -> Model:
        if self._model is None:
            self._model = self.cfg.load_model()
        return self._model

    def texts(self) -> dict[str, dict[str, str]]:
        """The texts behind the run's names, by manifest field: templates, start, labelled data."""
        return {"template_sha256": text_hashes({**self.templates.texts(), "start": self.start.to_yaml()}),
                "data_sha256": {"labelled": sha256_bytes(Path(self.cfg.labelled).read_bytes())}}

    def run(self) -> Path:
        """Run (or resume) every iteration; returns the path of the resulting `principles.yaml`."""
        with resumable(self.out, NOUN) as run:  # one writer per directory, taken before anything is read
            return self._run(run)

    def _run(self, run: Resumable) -> Path:
        texts = self._check_resumable(run)
        todo = [it for it in range(self.cfg.iterations + 1) if not self._path(it).is_file()]
        # bf16 or float32 by the CPU: another machine would continue from other logits
        backend = run.check_backend(self.model.backend) if todo else None
        if run.needs_manifest(todo):
            write_manifest(self.out, kind="principle-optimisation", config=asdict(self.cfg), seed=self.cfg.seed,
                           templates={**self.templates.texts(), "start": self.start.to_yaml()},
                           extra={"data_sha256": texts["data_sha256"],
                                  "splits": {"optimisation": len(self.opt), "heldout": len(self.held)},
                                  "backend": backend})
        self.journal = Journal(self.out / "calls.jsonl")
        state = self.start
        for it in range(self.cfg.iterations + 1):
            if it not in todo:
                state = load_state(self._path(it))
                continue
            started, self.asked = time.perf_counter(), Counter()
            state, record = self.evaluate(state) if it == 0 else self.iteration(it, state)
            self._check_transient(it)
            record = {"iteration": it, **record, "requests": dict(self.asked),
                      "seconds": round(time.perf_counter() - started, 1)}
            write_text_atomic(self._path(it), state.to_yaml(**record))
            log.info("iteration %d: held-out %s", it, _summary(record["heldout"]))
            self.publish()
            run.record({"last_iteration": it})
        return self.publish()

    def _check_resumable(self, run: Resumable) -> dict[str, dict[str, str]]:
        """Refuse other settings or texts; returns the texts' hashes."""
        run.check_settings(asdict(self.cfg), result_settings)
        texts = self.texts()
        for field_name, hashes in texts.items():
            run.check_texts(field_name, hashes)
        legacy = run.recorded.get("result_settings") or {}  # manifests before `data_sha256` hashed it there
        if "labelled_sha256" in legacy:
            run.check_provenance("labelled data", legacy["labelled_sha256"], texts["data_sha256"]["labelled"])
        return texts

    def _path(self, it: int) -> Path:
        return self.out / f"iteration-{it:02d}.yaml"

    # --- one iteration ---------------------------------------------------------------------------

    def detector(self, principles: tuple[str, ...]) -> Detector:
        return Detector(principles, self.templates, self.cfg.verdict, self.orders,
                        bool(self.model.backend.supports_prefill), self.cfg.seed)

    def complete(self, it: int):
        def ask(requests: list[ChatRequest], phase: str) -> list[Completion]:
            self.asked[phase] += len(requests)
            outs = self.journal.complete(self.model, self.cfg.model, requests, desc=f"iteration {it}: {phase}")
            self.gave_up += [o.error for o in outs if gave_up(o)]
            return outs
        return ask

    def _check_transient(self, it: int) -> None:
        """Refuse to write an iteration built on a call whose retries ran out (see the module doc)."""
        if self.gave_up:
            raise PartialFailure(f"iteration {it}: {len(self.gave_up)} call(s) failed for a transient cause "
                                 f"({self.gave_up[0]}); re-run the same command: it replays the {len(self.journal)} "
                                 "finished call(s) kept in calls.jsonl and asks only the rest")

    def seed(self, *parts: object) -> int:
        return derive_seed(self.cfg.seed, *parts)

    def iteration(self, it: int, state: State) -> tuple[State, dict]:
        det, params, cfg = self.detector(state.principles), self.cfg.params(), self.cfg
        pool = [e for e in self.opt if e.label == 1] or self.opt
        sources = random.Random(self.seed(it, "attacks")).sample(pool, min(cfg.attacks, len(pool)))
        protocols = {("attack", e.id): attack(e, state.strategy, det, self.templates, params,
                                              self.seed(it, "generate", e.id)) for e in sources}
        checked = []
        if cfg.reflect:
            checked = self.opt if cfg.checks is None else random.Random(self.seed(it, "checks")).sample(
                self.opt, min(cfg.checks, len(self.opt)))
            protocols.update({("check", e.id): detect(e, det) for e in checked})
        done = run_phases(protocols, ("generate", "detect"), self.complete(it))
        attempts = [done[("attack", e.id)] for e in sources]
        checks = [Check(e, done[("check", e.id)]) for e in checked]
        wrong = mistakes(checks, cfg.max_diagnoses, random.Random(self.seed(it, "mistakes")))
        found = run_phases({c.example.id: diagnose(c.example, c.p_good, state.principles, self.templates, params,
                                                   self.seed(it, "diagnose", c.example.id)) for c in wrong},
                           ("diagnose",), self.complete(it))
        for c in wrong:
            c.diagnosis = found[c.example.id]
        seeds = {role: self.seed(it, role) for role in ("generator", "feedback", "reflector")}
        diagnoses = [c.diagnosis for c in wrong if c.diagnosis]
        rewrites = revise(state, attempts, diagnoses, self.templates, self.limits, params, seeds, det.prefill)
        revision = run_phases({"revise": rewrites}, ("revise", "reflect"), self.complete(it))["revise"]
        new_state, record = self.evaluate(revision.state, it)
        record["adversarial"] = {"caught": sum(a.caught for a in attempts), "fooled": sum(a.fooled for a in attempts),
                                 "skipped": sum(a.skipped is not None for a in attempts),
                                 "attempts": [{"source": a.source, "p_good": a.p_good, "skipped": a.skipped,
                                               "text": a.text[:1500]} for a in attempts]}
        if cfg.reflect:
            record["reflection"] = {
                "checked": len(checks), "errors": sum(c.wrong for c in checks), "diagnosed": len(diagnoses),
                "diagnoses": [{"example": c.example.id, "label": c.label, "p_good": c.p_good, "text": c.diagnosis}
                              for c in wrong],
                # the principles this iteration started from, on the rows of the split they are optimised on
                "optimisation_split_before": binary_metrics([c.label for c in checks], [c.p_good for c in checks])}
        record["updates"] = revision.updates
        return new_state, record

    def evaluate(self, state: State, it: int = 0) -> tuple[State, dict]:
        det = self.detector(state.principles)
        scores = run_phases({e.id: detect(e, det, "evaluate") for e in self.held}, ("evaluate",), self.complete(it))
        p_good = [scores[e.id] for e in self.held]
        return state, {"heldout": heldout_metrics(self.held, p_good, self.cfg.seed),
                       "heldout_p_good": {e.id: p for e, p in zip(self.held, p_good)}}

    # --- outputs ---------------------------------------------------------------------------------

    def publish(self) -> Path:
        """Rebuild metrics.jsonl, metrics.png and principles.yaml from the iteration files."""
        records = []
        for it in range(self.cfg.iterations + 1):
            path = self._path(it)
            if not path.is_file():
                break
            records.append((path, _load_record(path)))
        rows = [_row(rec, self.cfg) for _, rec in records]
        write_text_atomic(self.out / "metrics.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
        _plot(rows, self.out / "metrics.png", "with reflection" if self.cfg.reflect else "no reflection (ablation)")
        last_path, last = records[-1]
        state = load_state(last_path)
        target = self.out / "principles.yaml"
        write_text_atomic(target, state.to_yaml(iteration=last["iteration"], selected="last iteration",
                                            detector={"model": self.cfg.model, "verdict": self.cfg.verdict,
                                                      "orders": self.orders},
                                            heldout=last["heldout"]))
        return target


def heldout_metrics(held: list, p_good: list[float | None], seed: int) -> dict:
    """`binary_metrics` on the held-out rows, with 95% intervals of AUC and F1 by bootstrap over
    their groups (a work's passage and its damaged twin are resampled together;
    `rewards.signal_check`, which GRPO's gate reads)."""
    groups: dict[str, list[tuple[int, float | None]]] = {}
    for e, p in zip(held, p_good, strict=True):
        groups.setdefault(e.group or e.id, []).append((e.label, p))
    rows = list(groups.values())

    def stat(key: str):
        return lambda sample: binary_metrics([y for g in sample for y, _ in g], [p for g in sample for _, p in g])[key]

    return {**binary_metrics([e.label for e in held], p_good), "groups": len(rows),
            "auc_ci95": group_bootstrap(rows, stat("auc"), seed=seed),
            "f1_ci95": group_bootstrap(rows, stat("f1"), seed=seed)}


def _load_record(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def _row(record: dict, cfg: OptimizeConfig) -> dict:
    held = record["heldout"]
    adv = record.get("adversarial", {})
    return {"iteration": record["iteration"], "reflect": cfg.reflect, "verdict": cfg.verdict,
            **{k: held[k] for k in ("n", "missing", "accuracy", "precision", "recall", "f1", "auc", "tp", "fp", "tn",
                                    "fn")},
            **{k: held.get(k) for k in ("groups", "auc_ci95", "f1_ci95")},
            "mean_p_good": held["mean_p_good"], "caught": adv.get("caught"), "fooled": adv.get("fooled"),
            "errors": record.get("reflection", {}).get("errors"),
            "rewrites_used": [u["role"] for u in record.get("updates", []) if u["used"]],
            "rewrites_unusable": [u["role"] for u in record.get("updates", []) if not u["used"]],
            "principles": len(record["principles"]), "seconds": record["seconds"]}


def _plot(rows: list[dict], path: Path, label: str) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    its = [r["iteration"] for r in rows]
    for key in PLOTTED:
        ax.plot(its, [r[key] if r[key] is not None else float("nan") for r in rows], marker="o", label=key)
    ax.axhline(0.5, color="grey", lw=0.8, ls="--")
    ax.set(xlabel="iteration", ylabel="held-out value", ylim=(0, 1.02), xticks=its,
           title=f"Detector on the held-out split, {label}")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    tmp = path.with_name(path.name + ".tmp.png")
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    os.replace(tmp, path)



def _summary(metrics: dict) -> str:
    return ", ".join(f"{k} {metrics[k]:.3f}" if metrics[k] is not None else f"{k} n/a" for k in PLOTTED)
