"""`review-lab principles weak-labels`: a weakly labelled set for the principle judge, built
from what we have instead of human labels.

    review-lab principles weak-labels --reference-dir ../shared/data/scifi-reference/texts \
        --works 20 --per-work 2 --out runs/principles/weak.jsonl [--model smollm2-135m-instruct]

- good (label 1): passages of the classic reference corpus: whole sentences, about `--words`
  words, from the works' bodies (Gutenberg boilerplate stripped as the corpus loader does, the
  first chunk of front matter skipped, lines that are not prose filtered out);
- bad (label 0): each passage once more, damaged in one way, in turn: by the Generator under the
  starting strategy (only with `--model`), with its sentences shuffled, with a repetition loop
  (the text breaks off and repeats its last words to the original length, as small models do),
  or with stock phrases inserted (the list in `configs/prompts/principles.yaml`). A Generator
  reply that comes back blank or unchanged, or a request the backend refused, falls back to a
  rule-based damage (recorded in the row's `note`); a call whose retries ran out writes nothing
  and exits 1, and a re-run replays the finished calls (a transient outage never changes the set).

Split by work: whole works are held out (`--heldout-fraction`), so neither a held-out passage
nor its damaged copy ever reaches the optimisation. Every row records its `work`, `split`,
`kind` and `source` passage. Everything is a function of `--seed`: the works, the passages, the
kind of damage and its randomness (each passage has its own seeded generator, so one passage's
damage does not depend on the others). Generator calls are journaled beside the output
(`<out stem>.calls.jsonl`); the manifest is `<out stem>.manifest.json`.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import tempfile
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from eval.corpus.manifest import work_files
from eval.corpus.resolve import reference_dir, reference_dir_option
from eval.scorers.principles.texts import Templates, load_state, load_templates
from eval.text import chunk_words, strip_gutenberg
from generate.backends import Model, check_spec, gave_up
from generate.common.errors import PartialFailure, UsageError
from generate.common.files import make_dir, write_text_atomic
from generate.common.manifest import write_manifest
from generate.common.ranges import AT_LEAST_1, FRACTION, checked, in_range
from generate.journal import Journal, derive_seed
from rewards.principles.data import ModelOptions
from rewards.principles.protocols import Attempt, Example, damage, run_phases

log = logging.getLogger(__name__)

_SENTENCE = re.compile(r"[^.!?]+[.!?]+[\"'”’)]*")
_NOT_PROSE = re.compile(r"gutenberg|chapter\b|contents\b|https?:|www\.|\[illustration|transcriber", re.IGNORECASE)


@dataclass
class WeakLabelConfig(ModelOptions):
    model: str | None = field(default=None, metadata=checked(
        check_spec, help="Generator for model degradations (not given: rules only)"))
    reference_dir: str | None = reference_dir_option()
    out: str = "runs/principles/weak.jsonl"
    works: int | None = field(default=None, metadata=in_range(
        AT_LEAST_1, help="a seeded sample of this many works (all)"))
    per_work: int = field(default=2, metadata=in_range(AT_LEAST_1))
    words: int = field(default=120, metadata=in_range(AT_LEAST_1, help="passage length in words (whole sentences)"))
    heldout_fraction: float = field(default=0.3, metadata=in_range(FRACTION))
    seed: int = 0
    principles: str | None = field(default=None, metadata={"help": "the Generator's strategy comes from here"})
    templates: str | None = None


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.findall(text) if s.strip()]


def passages(body: str, words: int) -> list[str]:
    """One passage of whole sentences (at least `words` words) per `2 * words`-word chunk of a work's
    body, skipping the first chunk (title pages, contents) and anything that does not read as prose."""
    out = []
    for chunk in chunk_words(body, 2 * words)[1:]:
        taken: list[str] = []
        for sentence in sentences(chunk)[1:]:  # the chunk's first sentence is usually cut
            taken.append(sentence)
            if sum(len(s.split()) for s in taken) >= words:
                break
        text = " ".join(taken)
        if len(taken) >= 3 and len(text.split()) >= words and _prose(text):
            out.append(text)
    return out


def _prose(text: str) -> bool:
    chars = [c for c in text if not c.isspace()]
    tokens = text.split()
    shouting = sum(1 for w in tokens if len(w) > 1 and w.isupper())
    return (sum(c.isalpha() for c in chars) >= 0.8 * len(chars) and shouting <= 0.05 * len(tokens)
            and not _NOT_PROSE.search(text))


def shuffled(text: str, rng: random.Random, cliches: tuple[str, ...] = ()) -> str:
    """The same sentences in another order."""
    parts = sentences(text)
    order = list(range(len(parts)))
    for _ in range(20):
        rng.shuffle(order)
        if order != sorted(order):
            break
    return " ".join(parts[i] for i in order)


def repetition(text: str, rng: random.Random, cliches: tuple[str, ...] = ()) -> str:
    """Cut at 30-60% of the words, then loop the last 5-9 words up to the original length."""
    words = text.split()
    cut = rng.randint(len(words) * 3 // 10, len(words) * 6 // 10)
    loop = words[max(0, cut - rng.randint(5, 9)):cut]
    out = words[:cut]
    while len(out) < len(words):
        out.extend(loop)
    return " ".join(out[:len(words)])


def cliche(text: str, rng: random.Random, cliches: tuple[str, ...] = ()) -> str:
    """Three stock phrases inserted between sentences (never before the first)."""
    parts = sentences(text)
    for phrase in rng.sample(list(cliches), min(3, len(cliches))):
        parts.insert(rng.randint(1, len(parts)), phrase)
    return " ".join(parts)


CORRUPTIONS = {"shuffled": shuffled, "repetition": repetition, "cliche": cliche}


def corrupt(kind: str, text: str, seed: int, passage_id: str, cliches: tuple[str, ...]) -> str:
    """A rule-based damage, deterministic in (seed, passage, kind)."""
    return CORRUPTIONS[kind](text, random.Random(derive_seed(seed, passage_id, kind)), cliches)


def build(cfg: WeakLabelConfig, model: Model | None = None) -> Path:
    """Write the weakly labelled JSONL; returns its path. `model` overrides loading `cfg.model`."""
    if cfg.principles:  # the Generator's strategy: read now, and refused where no Generator would read it
        if model is None and not cfg.model:
            raise UsageError("--principles gives the Generator its strategy: it needs --model (without one the "
                             "labels come from the rules alone)")
        load_state(cfg.principles)
    directory = Path(reference_dir(cfg.reference_dir) or "")
    files = work_files(directory) if str(directory) not in ("", ".") and directory.is_dir() else []
    if len(files) < 2:
        raise UsageError(f"weak labels need a --reference-dir with at least 2 .txt works (got {directory or 'none'})")
    if cfg.per_work < 1 or cfg.words < 20 or not 0 < cfg.heldout_fraction < 1:
        raise UsageError("need --per-work >= 1, --words >= 20 and 0 < --heldout-fraction < 1")
    templates = load_templates(cfg.templates)
    if not templates.cliches:
        raise UsageError("the templates file lists no weak_labels.cliches")
    if cfg.works:
        files = sorted(random.Random(derive_seed(cfg.seed, "works")).sample(files, min(cfg.works, len(files))))
    order = [f.name for f in files]
    random.Random(derive_seed(cfg.seed, "split")).shuffle(order)
    held = set(order[:min(len(order) - 1, max(1, round(cfg.heldout_fraction * len(order))))])

    goods = []
    for f in files:
        found = passages(strip_gutenberg(_read(f)), cfg.words)
        picks = sorted(random.Random(derive_seed(cfg.seed, f.name)).sample(range(len(found)), min(cfg.per_work, len(found))))
        split = "heldout" if f.name in held else "optimisation"
        goods += [Example(f"{f.name}#{j}", templates.weak_prompt, found[j], 1, f.name, split) for j in picks]
    if not goods:
        raise UsageError(f"no prose passages of {cfg.words} words found in {directory}")

    out = Path(cfg.out)
    make_dir(out.parent)
    use_model = model is not None or bool(cfg.model)
    kinds = (["generator"] if use_model else []) + list(CORRUPTIONS)
    offset = random.Random(derive_seed(cfg.seed, "kinds")).randrange(len(kinds))
    kind = {g.id: kinds[(offset + i) % len(kinds)] for i, g in enumerate(goods)}
    damaged = _generated([g for g in goods if kind[g.id] == "generator"], cfg, templates, model) if use_model else {}

    rows = []
    for i, g in enumerate(goods):
        k, note = kind[g.id], None
        made = damaged.get(g.id) if k == "generator" else None
        bad = made.text if made is not None and made.skipped is None else None
        if k == "generator" and not bad:  # blank, unchanged or refused: asking again gives the same
            k, note = list(CORRUPTIONS)[i % len(CORRUPTIONS)], f"generator reply {made.skipped if made else 'missing'}"
        bad = bad or corrupt(k, g.response, cfg.seed, g.id, templates.cliches)
        common = {"prompt": g.prompt, "work": g.group, "split": g.split}
        rows.append({"id": g.id, **common, "response": g.response, "label": 1, "kind": "reference", "source": None})
        rows.append({"id": f"{g.id}/{k}", **common, "response": bad, "label": 0, "kind": k, "source": g.id,
                     **({"note": note} if note else {})})
    write_text_atomic(out, "".join(_json(r) + "\n" for r in rows))
    _manifest(out, cfg, templates, rows)
    log.info("%s: %d rows (%s)", out, len(rows), dict(Counter((r["split"], r["kind"]) for r in rows)))
    return out


def _generated(goods: list[Example], cfg: WeakLabelConfig, templates: Templates,
               model: Model | None) -> dict[str, Attempt]:
    """The Generator's damaged copy of each passage (journaled); `skipped` says why one is unusable.

    Raises:
        PartialFailure: a call whose retries ran out (transient): asking again may well succeed, so
            nothing is written (a rule-based stand-in would make the set depend on the outage);
            a re-run replays the finished calls and asks only the failed ones, with the same seeds.
    """
    if not goods:
        return {}
    strategy = load_state(cfg.principles).strategy
    journal = Journal(Path(cfg.out).with_suffix(".calls.jsonl"))
    model = model or cfg.load_model()
    params = cfg.params()
    protocols = {g.id: damage(g, strategy, templates, params, derive_seed(cfg.seed, "degrade", g.id)) for g in goods}
    transient: list[str] = []

    def complete(requests, phase):
        outs = journal.complete(model, cfg.model or model.name, requests, desc="weak labels: generator")
        transient.extend(o.error for o in outs if gave_up(o))
        return outs

    done = run_phases(protocols, ("generate",), complete)
    if transient:
        raise PartialFailure(f"{len(transient)} generator call(s) failed for a transient cause ({transient[0]}); "
                             f"nothing written; re-run the same command: it replays the {len(journal)} finished "
                             "call(s) and asks only the rest")
    return done


def _read(work: Path) -> str:
    """A work's text; one it cannot read (a dangling link, no permission, a directory named
    `*.txt`) is one line naming it, as the novelty metrics' loader says it."""
    try:
        return work.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise UsageError(f"cannot read {work}: {exc.strerror or exc}") from None


def _json(row: dict) -> str:
    return json.dumps(row, ensure_ascii=False)



def _manifest(out: Path, cfg: WeakLabelConfig, templates: Templates, rows: list[dict]) -> None:
    """`<stem>.manifest.json` beside the data (a data file's directory may hold other runs)."""
    counts = Counter(f"{r['split']}/{r['kind']}" for r in rows)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        path = write_manifest(tmp, kind="weak-labels", config=asdict(cfg), seed=cfg.seed, templates=templates.texts(),
                              extra={"rows": len(rows), "counts": dict(sorted(counts.items())),
                                     "works": sorted({r["work"] for r in rows})})
        os.replace(path, out.with_suffix(".manifest.json"))
