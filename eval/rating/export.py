"""A study's ratings out of the database: the consensus, the labels, agreement and Table 4.

`export(db, out)` writes into `out`:

- `ratings.csv` (likert): one row per story and aspect with the human consensus (mean of the
  raters' current ratings) and the judge's score: the CSV `review-lab align` reads (columns
  story_id, aspect, human, judge, then n_raters, human_std and the story's source: run,
  source_story_id, model, prompt_sha256). Stories the judge did not score are left out, counted.
- `labelled.jsonl`: {id, prompt, response, label, ...} per story with a human label, which
  `review-lab principles optimize --labelled` and the curation ablations (`--candidates`) read.
  Verdict studies: the raters' majority (a tie gives no label). Likert studies: 1 when the
  consensus averaged over aspects is at least `good_at`.
- `manifest.json`: how the export was made: the study's design (its meta) and the ratings it held.
- `history.csv`: every submission ever stored (the last per rater, story and aspect counts).
- `agreement.json` and `table4.md`: per aspect Krippendorff's alpha among raters, the human mean ±
  std over stories (sample std), and against the judge ICC(A,1), Bland-Altman bias and limits and
  Pearson r (`eval.alignment` on `ratings.csv`, the one implementation), with their confidence
  intervals (table4.md shows those of alpha, ICC and r); the agreement rate of the human labels
  with each automatic verdict the runs' scores.jsonl hold, with its interval, and which are absent.
"""

from __future__ import annotations

import csv
import json
import math
import sqlite3
import statistics
from dataclasses import asdict
from pathlib import Path

from eval.alignment import CI_LEVEL, alignment_table, read_ratings
from eval.compare.pairs import number
from eval.rating import store
from eval.rating import agreement
from eval.rating.agreement import alpha_interval, interval, krippendorff_alpha, nominal, verdict_agreement
from eval.rating.study import AUTO_VERDICTS
from generate.common.errors import UsageError
from generate.common.files import make_dir
from generate.common.manifest import write_manifest

CSV_COLUMNS = ("story_id", "aspect", "human", "judge", "n_raters", "human_std", "run", "source_story_id", "model",
               "prompt_sha256")


def _stories(conn: sqlite3.Connection) -> dict[str, dict]:
    rows = conn.execute("SELECT sid, run, story_id, model, prompt_sha256, prompt, text, judge, verdicts "
                        "FROM stories ORDER BY position").fetchall()
    return {r["sid"]: {**dict(r), "judge": json.loads(r["judge"]), "verdicts": json.loads(r["verdicts"])} for r in rows}


def _by_story(conn: sqlite3.Connection) -> dict[str, dict[str, dict[str, int]]]:
    """aspect -> story -> rater -> current value."""
    out: dict[str, dict[str, dict[str, int]]] = {}
    for row in store.current(conn):
        out.setdefault(row["aspect"], {}).setdefault(row["sid"], {})[row["rater"]] = row["value"]
    return out


def _labels(meta: dict, by_story: dict, good_at: float) -> dict[str, int]:
    """story -> human label (1 good / excellent, 0 not), for the stories that have one."""
    if meta["mode"] == "verdict":
        labels = {}
        for sid, votes in by_story.get(meta["aspects"][0], {}).items():
            yes = sum(votes.values())
            if 2 * yes != len(votes):  # a tie is no label
                labels[sid] = int(2 * yes > len(votes))
        return labels
    means: dict[str, list[float]] = {}
    for aspect in meta["aspects"]:
        for sid, votes in by_story.get(aspect, {}).items():
            means.setdefault(sid, []).append(statistics.fmean(votes.values()))
    return {sid: int(statistics.fmean(v) >= good_at) for sid, v in means.items() if len(v) == len(meta["aspects"])}


def _write_csv(path: Path, meta: dict, stories: dict, by_story: dict) -> int:
    """ratings.csv; returns how many (story, aspect) consensus values had no judge score."""
    unjudged = 0
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(CSV_COLUMNS)
        for aspect in meta["aspects"]:
            for sid, votes in by_story.get(aspect, {}).items():
                s, judge = stories[sid], stories[sid]["judge"].get(aspect)
                if not number(judge):  # missing (null), or anything but a finite score: left out, never 0
                    unjudged += 1
                    continue
                values = list(votes.values())
                std = statistics.stdev(values) if len(values) > 1 else ""
                writer.writerow([sid, aspect, statistics.fmean(values), judge, len(values), std, s["run"],
                                 s["story_id"], s["model"], s["prompt_sha256"]])
    return unjudged


def _aspect_table(meta: dict, by_story: dict, csv_path: Path | None) -> dict[str, dict]:
    distance = interval if meta["mode"] == "likert" else nominal
    aligned = {}
    if csv_path is not None:
        try:
            aligned = alignment_table(read_ratings(csv_path))
        except UsageError as exc:  # no judged story at all: the rest of the table still stands
            aligned, note = {}, str(exc)
        else:
            note = None
    out = {}
    for aspect in meta["aspects"]:
        votes = by_story.get(aspect, {})
        consensus = [statistics.fmean(v.values()) for v in votes.values()]
        units = [list(v.values()) for v in votes.values()]
        row = {"alpha": krippendorff_alpha(units, distance), "alpha_ci": alpha_interval(units, distance),
               "human_mean": statistics.fmean(consensus) if consensus else math.nan,
               "human_std": statistics.stdev(consensus) if len(consensus) > 1 else math.nan,
               "n_stories": len(consensus)}
        if aspect in aligned:
            row.update(asdict(aligned[aspect]))
        elif csv_path is not None:
            row["alignment"] = note or "no judged story"
        out[aspect] = row
    return out


def _history(conn: sqlite3.Connection, path: Path, stories: dict) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(("id", "time", "rater", "story_id", "source_story_id", "aspect", "value", "submission"))
        for r in conn.execute("SELECT id, created, rater, sid, aspect, value, submission FROM ratings ORDER BY id"):
            writer.writerow((r["id"], r["created"], r["rater"], r["sid"], stories[r["sid"]]["story_id"], r["aspect"],
                             r["value"], r["submission"]))


def export(db: str | Path, out: str | Path, good_at: float = 4.0) -> dict:
    """Write the study's exports into `out` and return the agreement report (agreement.json)."""
    if not Path(db).is_file():
        raise UsageError(f"no rating database at {db}")
    conn = store.open_db(db)
    try:
        meta = store.get_meta(conn)
        if not meta:
            raise UsageError(f"{db} holds no study")
        stories, by_story = _stories(conn), _by_story(conn)
        out = Path(out)
        make_dir(out)
        csv_path = out / "ratings.csv" if meta["mode"] == "likert" else None
        unjudged = _write_csv(csv_path, meta, stories, by_story) if csv_path else 0
        labels = _labels(meta, by_story, good_at)
        _write_labelled(out / "labelled.jsonl", stories, labels)
        _history(conn, out / "history.csv", stories)
        rates, absent = verdict_agreement(labels, {sid: s["verdicts"] for sid, s in stories.items()}, AUTO_VERDICTS)
        raters = {r["name"]: 0 for r in conn.execute("SELECT name FROM raters ORDER BY created, name")}
        for sid_votes in by_story.get(meta["aspects"][0], {}).values():
            for rater in sid_votes:
                raters[rater] += 1
        report = {"mode": meta["mode"], "n_stories": len(stories), "raters": raters, "unjudged": unjudged,
                  "labels": {"good": sum(labels.values()), "bad": len(labels) - sum(labels.values()),
                             "rule": "majority verdict, ties left out" if meta["mode"] == "verdict"
                             else f"consensus averaged over aspects >= {good_at}"},
                  "aspects": _aspect_table(meta, by_story, csv_path),
                  "verdict_agreement": rates, "absent_verdicts": absent}
        submissions = conn.execute("SELECT COUNT(*) FROM ratings").fetchone()[0]
    finally:
        conn.close()
    (out / "agreement.json").write_text(json.dumps(_finite(report), indent=2) + "\n", encoding="utf-8")
    (out / "table4.md").write_text(table_markdown(report), encoding="utf-8")
    # The study as it stood (its design, and how many ratings it held): an export made later, with
    # more ratings in, is told apart from this one.
    write_manifest(out, kind="rating-export", config={"db": str(db), "out": str(out), "good_at": good_at},
                   seed=meta.get("seed"), extra={"study": meta, "ratings_stored": submissions})
    return report


def _write_labelled(path: Path, stories: dict, labels: dict[str, int]) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for sid, label in labels.items():
            s = stories[sid]
            fh.write(json.dumps({"id": sid, "prompt": s["prompt"], "response": s["text"], "label": label,
                                 "story_id": s["story_id"], "run": s["run"], "model": s["model"],
                                 "prompt_sha256": s["prompt_sha256"], "group": s["prompt_sha256"]}) + "\n")


def _finite(value):
    """NaN (undefined statistics) as JSON null, also inside intervals (tuples, written as lists)."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    return [_finite(v) for v in value] if isinstance(value, list | tuple) else value


def table_markdown(report: dict) -> str:
    """Table 4 of LLM Review per aspect, then the agreement rates with automatic verdicts."""
    f = lambda x, d=3: "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{d}f}"  # noqa: E731

    def with_ci(a: dict, key: str) -> str:
        """`0.842 [0.123, 0.987]`: the estimate and its interval, or the estimate alone without one."""
        text, ci = f(a.get(key)), a.get(f"{key}_ci")
        if text == "n/a" or not ci or "n/a" in (bounds := [f(b) for b in ci]):
            return text
        return f"{text} [{bounds[0]}, {bounds[1]}]"

    level = next((a["ci_level"] for a in report["aspects"].values() if "ci_level" in a), CI_LEVEL)
    ci, own = f"[{level * 100:g}% CI]", f"[{agreement.CI_LEVEL * 100:g}% CI]"  # alignment's level; alpha's and rates'
    lines = [f"# Human ratings ({report['mode']}): {report['n_stories']} stories, {len(report['raters'])} raters", "",
             f"| aspect | stories | human mean ± std | Krippendorff's alpha {own} "
             f"| ICC(A,1) {ci} | bias | 95% LoA | Pearson r {ci} |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for aspect, a in report["aspects"].items():
        loa = f"[{f(a['loa_low'])}, {f(a['loa_high'])}]" if f(a.get("loa_low")) != "n/a" else "n/a"
        lines.append(f"| {aspect} | {a['n_stories']} | {f(a['human_mean'], 2)} ± {f(a['human_std'], 2)} | "
                     f"{with_ci(a, 'alpha')} | {with_ci(a, 'icc_a1')} | {f(a.get('bias'))} | {loa} | "
                     f"{with_ci(a, 'pearson_r')} |")
    lines += ["", f"Human labels: {report['labels']['good']} good, {report['labels']['bad']} not "
                  f"({report['labels']['rule']})."]
    for key, r in report["verdict_agreement"].items():
        lines.append(f"- agreement with {r['name']} (`{key}`): {with_ci(r, 'rate')} over {r['n']} stories "
                     f"({own[1:-1]}: Wilson's)")
    lines += [f"- absent: {line}" for line in report["absent_verdicts"]]
    return "\n".join(lines) + "\n"
