"""A rating study: which stories, which aspects, which mode, which raters, each rater's order.

Everything that defines the study is written to its database when it is created, so a server
restarted on the same database serves the same study (the run directories are not read again).
Stories get opaque random ids; what they came from (run, story id, writer model) stays in the
database for the export and never reaches a browser. Each rater's queue is every story of the
study, shuffled by a seed derived from the study's recorded seed and the rater's name, so the
order is reproducible and differs between raters.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import secrets
import sqlite3
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from eval.rating import store
from eval.rubric import judged_text, load_rubric
from eval.view.data import expand_runs
from generate.common.config import load_yaml
from generate.common.errors import UsageError
from generate.common.jsonl import read_jsonl
from generate.common.manifest import sha256_text
from generate.common.paths import CONFIG_DIR

MODES = ("likert", "verdict")
INSTRUCTIONS = CONFIG_DIR / "rating" / "instructions.yaml"
VERDICT = "excellent"  # the one "aspect" of a verdict study: 1 = excellent, 0 = not
# Per-story automatic verdicts (0/1) an evaluation may hold in scores.jsonl, compared with the
# human verdicts on export: the curation framework's verdict (the second paper's Signal-1), the
# principle judge's and the reward model's (eval.signals).
AUTO_VERDICTS = {"curation_good": "Signal-1 (multi-agent framework)",
                 "principle_good": "principle judge (adversarial framework)",
                 "rm_good": "reward model"}
RATER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,39}$")


@dataclass(frozen=True)
class Rater:
    name: str
    token: str


def load_instructions(mode: str) -> dict:
    """The rater-facing text of `mode` (configs/rating/instructions.yaml)."""
    data = load_yaml(INSTRUCTIONS).get(mode)
    if not isinstance(data, dict) or not data.get("intro"):
        raise UsageError(f"{INSTRUCTIONS}: no '{mode}' entry with an intro")
    return data


def rater_seed(study_seed: int, name: str) -> int:
    """A rater's shuffle seed: reproducible from the study seed and the name, different per rater."""
    digest = hashlib.sha256(f"{study_seed}/{name}".encode()).digest()
    return int.from_bytes(digest[:7], "big")  # below 2**63: fits SQLite's INTEGER


def _gather(runs: list[str], eval_dir: str | None, aspects: list[str]) -> tuple[list[dict], list[dict]]:
    """(run specs, stories) of the runs: every final story, with its judge scores and verdicts."""
    pairs = expand_runs(runs)
    stories = []
    for label, path in pairs:
        scores_path = Path(eval_dir) / "scores.jsonl" if eval_dir else path / "eval" / "scores.jsonl"
        scores = {(r.get("story_id"), r.get("model"), r.get("prompt_sha256")): r for r in read_jsonl(scores_path)}
        by_id = {s.get("story_id"): s for s in read_jsonl(path / "stories.jsonl")}  # a rewritten story: the last
        for s in by_id.values():
            sha = s.get("prompt_sha256") or sha256_text(s["prompt"])
            score = scores.get((s.get("story_id"), s.get("model"), sha)) or {}
            stories.append({"run": label, "story_id": s["story_id"], "model": s.get("model"), "prompt_sha256": sha,
                            "prompt": s["prompt"], "text": s.get("text") or "",
                            "judge": {a: score.get(a) for a in aspects},
                            "verdicts": {k: score.get(k) for k in AUTO_VERDICTS if k in score}})
    if not stories:
        raise UsageError("the runs have no stories to rate")
    return [{"label": label, "dir": str(path.resolve())} for label, path in pairs], stories


def create(conn: sqlite3.Connection, runs: list[str], mode: str, seed: int | None, eval_dir: str | None = None,
           sample: int | None = None) -> dict:
    """Write a new study (meta and stories) into an empty database and return its meta."""
    if mode not in MODES:
        raise UsageError(f"--mode must be one of {', '.join(MODES)}, got {mode!r}")
    rubric = load_rubric()
    aspects = list(rubric.aspects) if mode == "likert" else [VERDICT]
    specs, stories = _gather(runs, eval_dir, list(rubric.aspects))
    seed = secrets.randbits(32) if seed is None else seed
    rng = random.Random(seed)
    rng.shuffle(stories)  # positions say nothing about runs
    if sample:
        stories = stories[:sample]
    meta = {"mode": mode, "aspects": aspects, "scale": [rubric.low, rubric.high] if mode == "likert" else [0, 1],
            "seed": seed, "runs": specs, "rubric_sha256": rubric.sha256(), "n_stories": len(stories),
            "instructions_sha256": sha256_text(json.dumps(load_instructions(mode), sort_keys=True)),
            "raters_per_story": "every rater rates every story",
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    with store.transaction(conn):
        store.put_meta(conn, meta)
        conn.executemany(
            "INSERT INTO stories (sid, position, run, story_id, model, prompt_sha256, prompt, text, judge, verdicts) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [("s" + secrets.token_hex(6), i, s["run"], s["story_id"], s["model"], s["prompt_sha256"], s["prompt"],
              s["text"], json.dumps(s["judge"]), json.dumps(s["verdicts"])) for i, s in enumerate(stories)])
    return meta


def open_study(db: str | Path, runs: list[str], mode: str | None, seed: int | None = None,
               eval_dir: str | None = None, sample: int | None = None) -> tuple[sqlite3.Connection, dict]:
    """The study in `db`: created from `runs` when the database is new, else resumed.

    Raises:
        UsageError: a new study without runs, or a resumed one given other runs or another mode.
    """
    if not runs and not Path(db).is_file():
        raise UsageError(f"{db} holds no study yet: name the runs to rate")
    conn = store.open_db(db)
    meta = store.get_meta(conn)
    if not meta:
        if not runs:
            raise UsageError(f"{db} holds no study yet: name the runs to rate")
        return conn, create(conn, runs, mode or MODES[0], seed, eval_dir, sample)
    if mode and mode != meta["mode"]:
        raise UsageError(f"{db} holds a {meta['mode']} study; --mode {mode} needs a new --db")
    if runs:
        given = sorted(str(path.resolve()) for _, path in expand_runs(runs))
        if given != sorted(r["dir"] for r in meta["runs"]):
            raise UsageError(f"{db} holds a study of other runs ({', '.join(r['dir'] for r in meta['runs'])}); "
                             "use a new --db for these")
    return conn, meta


def add_raters(conn: sqlite3.Connection, meta: dict, names: list[str]) -> list[Rater]:
    """Create the raters not yet in the study (a token and a shuffled queue each); return all raters."""
    for name in names:
        if not RATER_NAME.match(name):
            raise UsageError(f"rater name {name!r}: use 1-40 letters, digits, '.', '_' or '-'")
    sids = [row["sid"] for row in conn.execute("SELECT sid FROM stories ORDER BY position")]
    with store.transaction(conn):
        known = {row["name"] for row in conn.execute("SELECT name FROM raters")}
        for name in dict.fromkeys(names):
            if name in known:
                continue
            seed = rater_seed(meta["seed"], name)
            order = sids[:]
            random.Random(seed).shuffle(order)
            conn.execute("INSERT INTO raters (name, token, seed, created) VALUES (?, ?, ?, ?)",
                         (name, secrets.token_urlsafe(24), seed, datetime.now(timezone.utc).isoformat()))
            conn.executemany("INSERT INTO queue (rater, position, sid) VALUES (?, ?, ?)",
                             [(name, i, sid) for i, sid in enumerate(order)])
    return [Rater(r["name"], r["token"]) for r in conn.execute("SELECT name, token FROM raters ORDER BY created, name")]


def rater_page_data(conn: sqlite3.Connection, meta: dict, rater: str) -> dict:
    """Everything one rater's page needs, and nothing more: no run, framework, model or story id,
    no judge score, no other rater's rating."""
    rubric = load_rubric()
    text = load_instructions(meta["mode"])
    queue = conn.execute("SELECT s.sid, s.prompt, s.text FROM queue q JOIN stories s ON s.sid = q.sid "
                         "WHERE q.rater = ? ORDER BY q.position", (rater,)).fetchall()
    mine: dict[str, dict[str, int]] = {}
    for row in store.current(conn, rater):
        mine.setdefault(row["sid"], {})[row["aspect"]] = row["value"]
    if meta["mode"] == "likert":
        aspects = [{"key": k, "name": a.name, "description": a.description,
                    "anchors": [[s, a.anchors[s]] for s in sorted(a.anchors, reverse=True)]}
                   for k, a in ((k, rubric.aspects[k]) for k in meta["aspects"])]
    else:
        aspects = [{"key": VERDICT, "name": text["question"], "description": "",
                    "anchors": [[int(v), str(label)] for v, label in sorted(text["labels"].items(), reverse=True)]}]
    return {"mode": meta["mode"], "title": text["title"], "intro": " ".join(str(text["intro"]).split()),
            "aspect_note": text.get("aspect", ""), "rater": rater, "aspects": aspects,
            "stories": [{"id": r["sid"], "text": judged_text(r["text"]),
                         "task": r["prompt"] if meta["mode"] == "verdict" else None} for r in queue],
            "ratings": mine}
