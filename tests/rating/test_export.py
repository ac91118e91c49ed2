"""The export against hand computations: Krippendorff's alpha (the published worked example and a
small study), the consensus CSV as `eval.alignment` reads it, Table 4's numbers, the labels the
principle optimisation and the curation accept, and the agreement rates with automatic verdicts."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from eval.alignment import alignment_table, read_ratings
from eval.rating import store
from eval.rating.agreement import alpha_interval, interval, krippendorff_alpha, nominal, rate_interval
from eval.rating.export import export, table_markdown
from eval.rating.study import add_raters, open_study
from generate.common.errors import UsageError
from rewards.curation.data import load_candidates
from rewards.principles.data import load_labelled
from tests.rating.conftest import ASPECTS, write_study_runs


def test_alpha_matches_krippendorff_s_worked_example():
    # Krippendorff (2011), "Computing Krippendorff's alpha-reliability": 4 observers, 12 units,
    # missing values; published alpha: nominal 0.743, interval 0.849.
    rows = ["1 2 3 3 2 1 4 1 2 . . .", "1 2 3 3 2 2 4 1 2 5 . 3", ". 3 3 3 2 3 4 2 2 5 1 .", "1 2 3 3 2 4 4 1 2 5 1 ."]
    table = [r.split() for r in rows]
    units = [[int(r[i]) for r in table if r[i] != "."] for i in range(12)]
    assert krippendorff_alpha(units, nominal) == pytest.approx(0.743, abs=5e-4)
    assert krippendorff_alpha(units, interval) == pytest.approx(0.849, abs=5e-4)
    assert math.isnan(krippendorff_alpha([[3, 3], [3]], interval))  # nothing to disagree about


def rate(db, raters: dict[str, dict[str, int]], aspects):
    """raters: name -> {prompt id: value}, the same value on every aspect."""
    conn = store.connect(db)
    sid = {r["story_id"].split("/")[1]: r["sid"] for r in conn.execute("SELECT sid, story_id FROM stories")}
    for name, values in raters.items():
        for prompt, value in values.items():
            store.submit(conn, name, sid[prompt], f"{name}-{prompt}-1", {a: value for a in aspects}, len(aspects))
    conn.close()
    return sid


def test_alpha_interval_resamples_stories_and_narrows_with_more_of_them():
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 6, size=200)  # three raters who agree up to a point off now and then
    units = [[int(np.clip(t + rng.choice([-1, 0, 0, 0, 1]), 0, 5)) for _ in range(3)] for t in truth]
    alpha = krippendorff_alpha(units, interval)
    small, large = alpha_interval(units[:20], interval), alpha_interval(units, interval)
    assert large[0] < alpha < large[1] and large[1] - large[0] < small[1] - small[0]
    assert alpha_interval(units, interval) == large  # seeded: the same report twice
    # one pairable story, or no disagreement at all: no interval
    assert all(math.isnan(b) for b in alpha_interval([[1, 2], [3]], interval))
    assert all(math.isnan(b) for b in alpha_interval([[2, 2]] * 10, interval))


def test_rate_interval_is_wilson_s():
    assert rate_interval(9, 12) == pytest.approx((0.4677, 0.9111), abs=2e-4)  # p = 0.75, n = 12, by hand
    assert rate_interval(0, 5)[0] == 0.0 and rate_interval(0, 5)[1] > 0.4  # not the degenerate [0, 0]


def test_likert_export_feeds_alignment_with_the_hand_computed_numbers(tmp_path):
    db = tmp_path / "r.sqlite"
    conn, meta = open_study(db, write_study_runs(tmp_path / "runs"), "likert", seed=3)
    add_raters(conn, meta, ["ann", "bob", "cat"])
    conn.close()
    rate(db, {"ann": {"voice-01": 1, "robot-01": 4, "mars-01": 3}, "bob": {"voice-01": 2, "robot-01": 4, "mars-01": 2},
              "cat": {"voice-01": 3}}, ASPECTS)
    report = export(db, tmp_path / "out")
    # concepts: human consensus h = (2, 4, 2.5), judge s = (1, 5, 3)
    table = alignment_table(read_ratings(tmp_path / "out" / "ratings.csv"))
    c = table["concepts"]
    assert c.n == 3
    assert c.bias == pytest.approx(0.5 / 3)                       # mean of s - h = (-1, 1, 0.5)
    sd = math.sqrt(((-1 - 1 / 6) ** 2 + (1 - 1 / 6) ** 2 + (0.5 - 1 / 6) ** 2) / 2)
    assert (c.loa_low, c.loa_high) == pytest.approx((1 / 6 - 1.96 * sd, 1 / 6 + 1.96 * sd))
    assert c.pearson_r == pytest.approx(4 / math.sqrt(13 / 6 * 8))  # sum hc*sc = 4, sum hc^2 = 13/6, sum sc^2 = 8
    # two-way ANOVA of rows (2,1), (4,5), (2.5,3): MS_R = 4.541667, MS_C = 1/24, MS_E = 13/24
    assert c.icc_a1 == pytest.approx((109 / 24 - 13 / 24) / (109 / 24 + 1 / 3 * 13 / 24 + 2 / 3 * 1 / 24))
    a = report["aspects"]["concepts"]
    assert a["alpha"] == pytest.approx(7 / 13)  # D_o = 8/7, D_e = 104/42
    assert a["human_mean"] == pytest.approx(8.5 / 3) and a["human_std"] == pytest.approx(sd)
    assert a["icc_a1"] == pytest.approx(c.icc_a1) and a["n_stories"] == 3
    # McGraw & Wong's 95% interval of ICC(A,1) on 3 stories is wide; Fisher z needs 4 for r's
    assert c.icc_a1_ci == pytest.approx((-1.164, 0.996), abs=5e-4) and a["icc_a1_ci"] == c.icc_a1_ci
    assert all(math.isnan(b) for b in c.pearson_r_ci)
    assert report["raters"] == {"ann": 3, "bob": 3, "cat": 1}
    # labels: consensus over aspects >= 4 is good: only robot-01; the principle judge said voice 0, robot 1, mars 1
    # Wilson's 95% interval of 2/3 by hand: center (2/3 + z^2/6) / (1 + z^2/3), half-width
    # z sqrt(2/9/3 + z^2/36) / (1 + z^2/3), z = 1.96: [0.2077, 0.9385]
    assert report["verdict_agreement"]["principle_good"] == {"name": "principle judge (adversarial framework)",
                                                             "rate": pytest.approx(2 / 3), "n": 3,
                                                             "rate_ci": pytest.approx((0.2077, 0.9385), abs=2e-4)}
    assert [line.split()[0] for line in report["absent_verdicts"]] == ["curation_good", "rm_good"]
    labelled = load_labelled(tmp_path / "out" / "labelled.jsonl")
    assert sorted(e.label for e in labelled) == [0, 0, 1]
    assert {e.response: e.label for e in labelled}["The robot painted a grey sea."] == 1
    assert {c.label for c in load_candidates([str(tmp_path / "out" / "labelled.jsonl")])} == {0, 1}
    md = (tmp_path / "out" / "table4.md").read_text()
    assert "| Krippendorff's alpha [95% CI] | ICC(A,1) [95% CI] | bias | 95% LoA | Pearson r [95% CI] |" in md
    assert a["alpha_ci"][0] <= a["alpha"] <= a["alpha_ci"][1]
    assert (f"| concepts | 3 | 2.83 ± 1.04 | 0.538 [{a['alpha_ci'][0]:.3f}, {a['alpha_ci'][1]:.3f}] "
            "| 0.842 [-1.164, 0.996] | 0.167 | [-1.873, 2.207] | 0.961 |") in md
    assert ("- agreement with principle judge (adversarial framework) (`principle_good`): 0.667 [0.208, 0.939] "
            "over 3 stories (95% CI: Wilson's)") in md
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["kind"] == "rating-export" and manifest["seed"] == 3 and manifest["study"]["mode"] == "likert"
    assert manifest["ratings_stored"] == 7 * len(ASPECTS) and manifest["config"]["good_at"] == 4.0
    assert "token" not in json.dumps(manifest)  # the raters' links are secrets
    written = json.loads((tmp_path / "out" / "agreement.json").read_text())["aspects"]
    assert written["logic"]["n"] == 3 and written["concepts"]["ci_level"] == 0.95
    assert written["concepts"]["pearson_r_ci"] == [None, None]  # NaN inside an interval is null too
    assert written["concepts"]["icc_a1_ci"] == pytest.approx([-1.164, 0.996], abs=5e-4)


def test_table4_shows_the_intervals_of_icc_and_r_at_their_level():
    aspect = {"n_stories": 30, "alpha": 0.61, "human_mean": 3.2, "human_std": 0.8, "icc_a1": 0.41,
              "icc_a1_ci": (0.12, 0.64), "bias": -0.2, "loa_low": -1.5, "loa_high": 1.1, "pearson_r": 0.5,
              "pearson_r_ci": (0.17, 0.73), "bias_ci": (-0.4, 0.0), "ci_level": 0.9}
    # undefined ICC, and r's interval as agreement.json holds it (null bounds)
    undefined = {**aspect, "icc_a1": math.nan, "icc_a1_ci": (math.nan, math.nan),
                 "pearson_r_ci": [None, None]}
    report = {"mode": "likert", "n_stories": 30, "raters": {"ann": 30},
              "aspects": {"a": aspect, "b": undefined}, "labels": {"good": 1, "bad": 2, "rule": "r"},
              "verdict_agreement": {}, "absent_verdicts": []}
    md = table_markdown(report)
    # alpha's interval is always 95%; the alignment's follow its level
    assert "| Krippendorff's alpha [95% CI] | ICC(A,1) [90% CI] | bias | 95% LoA | Pearson r [90% CI] |" in md
    assert ("| a | 30 | 3.20 ± 0.80 | 0.610 | 0.410 [0.120, 0.640] | -0.200 | [-1.500, 1.100] "
            "| 0.500 [0.170, 0.730] |") in md
    assert "| b | 30 | 3.20 ± 0.80 | 0.610 | n/a | -0.200 | [-1.500, 1.100] | 0.500 |" in md


def test_verdict_export_takes_the_majority_and_nominal_alpha(tmp_path):
    db = tmp_path / "r.sqlite"
    conn, meta = open_study(db, write_study_runs(tmp_path / "runs"), "verdict", seed=3)
    add_raters(conn, meta, ["ann", "bob"])
    conn.close()
    rate(db, {"ann": {"voice-01": 1, "robot-01": 1, "mars-01": 0}, "bob": {"voice-01": 1, "robot-01": 0, "mars-01": 0}},
         ["excellent"])
    report = export(db, tmp_path / "out")
    assert not (tmp_path / "out" / "ratings.csv").exists()
    assert report["aspects"]["excellent"]["alpha"] == pytest.approx(4 / 9)  # D_o = 2/6, D_e = 18/30
    assert report["labels"]["good"] == 1 and report["labels"]["bad"] == 1  # robot-01 is a tie: no label
    # principle judge: voice 0 (human 1), mars 1 (human 0): agrees on neither
    assert report["verdict_agreement"]["principle_good"]["rate"] == 0.0
    assert report["verdict_agreement"]["principle_good"]["n"] == 2


def test_export_of_a_missing_database_is_an_error(tmp_path):
    with pytest.raises(UsageError, match="no rating database"):
        export(tmp_path / "none.sqlite", tmp_path / "out")
    assert not (tmp_path / "none.sqlite").exists()


def test_one_sparsely_judged_aspect_leaves_the_others_aligned(tmp_path):
    # The judge scored ethics on one story only, and the database holds a judge value that is no
    # score (NaN) for logic on another: both are left out and counted, never 0, and every other
    # aspect keeps its statistics, in agreement.json and in the ratings.csv that align reads.
    db = tmp_path / "r.sqlite"
    conn, meta = open_study(db, write_study_runs(tmp_path / "runs"), "likert", seed=3)
    add_raters(conn, meta, ["ann", "bob"])
    with store.transaction(conn):
        for r in conn.execute("SELECT sid, story_id, judge FROM stories").fetchall():
            judge = json.loads(r["judge"])
            if "robot-01" not in r["story_id"]:
                judge["ethics"] = None
            if "voice-01" in r["story_id"]:
                judge["logic"] = math.nan
            conn.execute("UPDATE stories SET judge = ? WHERE sid = ?", (json.dumps(judge), r["sid"]))
    conn.close()
    rate(db, {"ann": {"voice-01": 1, "robot-01": 4, "mars-01": 3}, "bob": {"voice-01": 2, "robot-01": 4, "mars-01": 2}},
         ASPECTS)
    report = export(db, tmp_path / "out")
    assert report["unjudged"] == 3
    aspects = report["aspects"]
    assert aspects["concepts"]["n"] == 3 and aspects["concepts"]["icc_a1"] is not None
    assert aspects["logic"]["n"] == 2 and aspects["characters"]["pearson_r"] is not None
    assert aspects["ethics"]["n"] == 1 and math.isnan(aspects["ethics"]["icc_a1"])
    table = alignment_table(read_ratings(tmp_path / "out" / "ratings.csv"))
    assert {a: t.n for a, t in table.items()} == {"concepts": 3, "logic": 2, "characters": 3, "world_building": 3,
                                                  "ethics": 1}
    assert "| ethics | 3 | 2.67 ± 1.26 | 0.773 [-0.667, 0.906] | n/a | n/a | n/a | n/a |" in (
        tmp_path / "out" / "table4.md").read_text(encoding="utf-8")
