"""Run directories written literally (layout logic, hostile text) or synthetically at full scale,
in the formats `review-lab generate`, `review-lab eval` and `review-lab compare` write."""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path

from eval.metrics.catalog import Catalog
from eval.report import summarize_frameworks
from generate.common.manifest import sha256_text

ASPECTS = {"concepts": "Concepts", "logic": "Logic", "characters": "Characters", "world_building": "World-Building",
           "ethics": "Ethics"}
CATALOG = Catalog.from_aspects(ASPECTS)
HOSTILE = ('<script>alert(1)</script> <img src=x onerror=alert(1)> </textarea> </script> '
           '<!-- <b>not bold</b> --> <a href="http://example.com/">link</a> &amp;')
# 1x1 transparent PNG: a plot must show from a data: URI, with no request.
PNG = base64.b64decode("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=")

PROMPTS = {
    "voice-01": ("Strong Voice", "A lighthouse keeper on a tidally locked moon narrates the night."),
    "mars-01": ("Imagery", "Describe rain on Mars. " + HOSTILE),
    "robot-01": ("Imagery", "A robot learns to paint the sea."),
    "lost-01": ("Strong Voice", "A letter found in a derelict ship."),
}


def _jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


def story(framework: str, prompt_id: str, agent: str, text: str, drafts=(), feedback=(), model: str = "writer") -> dict:
    aspect, prompt = PROMPTS.get(prompt_id, ("Synthetic", f"Prompt {prompt_id}"))
    return {"story_id": f"{framework}/{prompt_id}/{agent}", "prompt_id": prompt_id, "aspect": aspect, "prompt": prompt,
            "prompt_sha256": sha256_text(prompt), "framework": framework, "agent": agent, "model": model, "text": text,
            "drafts": list(drafts), "feedback": [list(r) for r in feedback],
            "usage": {"calls": 1 + 3 * len(drafts), "prompt_tokens": 100, "completion_tokens": 40}, "seconds": 1.5}


def score(s: dict, judge: float | None, missing: dict | None = None, kl: float | None = 3.1) -> dict:
    missing = dict(missing or {})
    if kl is None:
        missing.setdefault("kl", "no words (only symbols, punctuation or emoji)")
    row = {k: s[k] for k in ("story_id", "prompt_id", "aspect", "framework", "agent", "model", "prompt_sha256")}
    row.update({a: judge for a in ASPECTS}, surprisal=1.9, kl=kl, novelty_cos=0.5, volume_gain=0.2,
               homogenization=None if s["framework"] == "single" else 0.4, draft_to_final_similarity=None,
               missing=missing, judge={"n_samples": {a: 1 for a in ASPECTS}, "requests": 5, "parse_failures": 0,
                                       "backend_failures": 0})
    if judge is None:
        row["missing"].update({a: "empty story: not judged" for a in ASPECTS})
    else:  # sample mode keeps the judge's replies; a story's own text may be quoted in them
        row["judge_replies"] = {next(iter(ASPECTS)): [f"It quotes {s['text'][:40]}\nScore: {int(judge)}"]}
    if s["framework"] == "single":
        row["missing"]["homogenization"] = "one story per prompt"
    row["missing"]["draft_to_final_similarity"] = "not computed in this fixture"
    return row


def write_run(path: Path, stories: list[dict], scores: list[dict], failed: list[dict] = (), plot: bool = True) -> Path:
    """stories.jsonl, manifest.json, failed.jsonl and eval/{scores.jsonl, summary.json, judge_scores.png}."""
    _jsonl(path / "stories.jsonl", stories)
    prompts = {f["prompt_id"]: sha256_text(PROMPTS[f["prompt_id"]][1]) for f in failed}  # as the runner records
    prompts.update({s["prompt_id"]: s["prompt_sha256"] for s in stories})
    (path / "manifest.json").write_text(json.dumps({"config": {"model": "writer"}, "prompts": prompts}))
    if failed:
        _jsonl(path / "failed.jsonl", list(failed))
    _jsonl(path / "eval" / "scores.jsonl", scores)
    summary = {"metrics": CATALOG.to_json(), "frameworks": summarize_frameworks(scores, CATALOG)}
    (path / "eval" / "summary.json").write_text(json.dumps(summary))
    (path / "eval" / "manifest.json").write_text(json.dumps({"provenance": {"judge": {"mode": "sample"}}}))
    if plot:
        (path / "eval" / "judge_scores.png").write_bytes(PNG)
    return path


def review_stories(prompt_id: str, hostile: bool = False) -> list[dict]:
    """Three Review agents, three versions each, two rounds of feedback from both peers."""
    agents = ["alpha", "beta", "gamma"]
    out = []
    for agent in agents:
        peers = [a for a in agents if a != agent]
        feedback = [[{"from": p, "text": f"{p} to {agent}, round {r}: " + (HOSTILE if hostile and p == "gamma" else
                                                                            "tighten the ending.")} for p in peers]
                    for r in (1, 2)]
        drafts = [f"The {agent} keeper lit the lamp.", f"The old {agent} keeper lit the lamp at dusk."]
        final = HOSTILE if hostile and agent == "gamma" else f"The old {agent} keeper lit the green lamp at dusk."
        out.append(story("review", prompt_id, agent, final, drafts, feedback))
    return out


def write_literal_runs(root: Path) -> tuple[Path, Path, Path]:
    """A single-agent run (3 prompts, one more failed) and a Review run (2 prompts, one with hostile
    text), each evaluated, and a comparison of the two."""
    single = [story("single", "voice-01", "single", "The keeper spoke to the dark."),
              story("single", "mars-01", "single", "Rain fell red on the dome."),
              story("single", "robot-01", "single", "The robot painted a grey sea.")]
    judge = {"voice-01": 3.0, "mars-01": 1.0, "robot-01": 2.0}
    failed = [{"prompt_id": "lost-01", "attempt": 0, "agent": "single", "role": "write", "to": None,
               "phase": "compose", "reasks": 2, "reason": "blank completion after 2 re-asks", "time": "t"},
              {"prompt_id": "voice-01", "attempt": 0, "agent": "single", "role": "write", "to": None,
               "phase": "compose", "reasks": 2, "reason": "blank completion after 2 re-asks", "time": "t"}]
    a = write_run(root / "single", single,
                  [score(s, judge[s["prompt_id"]], kl=None if s["prompt_id"] == "robot-01" else 3.1) for s in single],
                  failed)
    review = review_stories("voice-01", hostile=True) + review_stories("lost-01")
    b = write_run(root / "review", review, [score(s, 2.5) for s in review])
    cmp = root / "cmp"
    cmp.mkdir()
    gain = {"gain": 0.25, "ci_low": -0.1, "ci_high": 0.6, "p_value": 0.31, "n_pairs": 1, "p_adjusted": 0.62,
            "missing": [], "significant": False, "gain_per_extra_base_tokens": 0.01}
    cost = {"n_prompts": 1, "calls": 21.0, "prompt_tokens": 9000, "completion_tokens": 3000, "total_tokens": 12000,
            "seconds": 90.0, "x_base": {"calls": 21.0, "total_tokens": 40.0, "seconds": 20.0}}
    (cmp / "comparison.json").write_text(json.dumps({
        "config": {"base": "base", "runs": {"base": str(a), "review": str(b)}, "metrics": ["judge_average"],
                   "alpha": 0.05, "n_boot": 100, "seed": 0, "correction": "holm"},
        "correction": {"label": "Holm", "promise": "family-wise error <= alpha"},
        "metrics": {"judge_average": {"label": "Judge average", "group": "judge", "higher_is_better": True}},
        "prompts": {"n_common": 1, "dropped": {"base": [], "review": []}},
        "gains": {"judge_average": {"review": gain}}, "cost": {"base": None, "review": cost},
        "verdict": ["**Judge average** (higher is better): `review` +0.25, not significant " + HOSTILE]}))
    (cmp / "gains.png").write_bytes(PNG)
    return a, b, cmp


def write_synthetic_runs(root: Path, prompts: int = 100, agents: int = 3, words: int = 300) -> list[Path]:
    """Full scale: `prompts` x 5 frameworks x `agents` agents x 3 versions of ~`words` words, with two
    rounds of feedback from every peer (Review, Teacher) and every metric scored."""
    rng = random.Random(0)
    vocab = [f"w{i}" for i in range(3000)] + ["the", "ship", "star", "crew", "moon", "engine", "dark"]
    runs = []
    for framework in ("single", "teacher", "debate", "discussion", "review"):
        n_agents = 1 if framework == "single" else agents
        stories, scores = [], []
        for p in range(prompts):
            pid = f"synthetic-{p:03d}"
            for k in range(1 if framework == "single" else n_agents):
                agent = f"agent{k}"
                versions = [" ".join(rng.choices(vocab, k=words))]
                for _ in range(2 if framework != "single" else 0):  # a revision rewrites about a tenth
                    tokens = versions[-1].split()
                    for i in rng.sample(range(len(tokens)), len(tokens) // 10):
                        tokens[i] = rng.choice(vocab)
                    versions.append(" ".join(tokens))
                peers = [f"agent{j}" for j in range(n_agents) if j != k] if framework == "review" else ["teacher"]
                feedback = [[{"from": q, "text": " ".join(rng.choices(vocab, k=120))} for q in peers] for _ in range(2)] \
                    if framework in ("review", "teacher") else []
                s = story(framework, pid, agent, versions[-1], versions[:-1], feedback)
                s["aspect"] = f"Aspect {p % 10}"
                stories.append(s)
                scores.append(score(s, round(rng.uniform(1, 4), 3)))
        runs.append(write_run(root / framework, stories, scores, plot=False))
    return runs
