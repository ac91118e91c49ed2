"""`review-lab view --human`: a rating study's exported consensus beside the judge's scores."""

from __future__ import annotations

import pytest

from eval.rating import store
from eval.rating.export import export
from eval.rating.study import add_raters, open_study
from eval.view import load_view_data, write_view
from eval.view.cli import main as view_main
from generate.common.cli import run_cli
from generate.common.errors import UsageError
from tests.rating.conftest import ASPECTS, write_study_runs
from tests.view.runs import score, story, write_run


@pytest.fixture
def exported(tmp_path):
    """Runs and the ratings.csv of a finished study: ann 1 and bob 2 on voice-01, both 4 elsewhere."""
    runs = write_study_runs(tmp_path / "runs")
    db = tmp_path / "r.sqlite"
    conn, meta = open_study(db, runs, "likert", seed=1)
    add_raters(conn, meta, ["ann", "bob"])
    for r in conn.execute("SELECT sid, story_id FROM stories").fetchall():
        for name, value in (("ann", 1), ("bob", 2)) if "voice-01" in r["story_id"] else (("ann", 4), ("bob", 4)):
            store.submit(conn, name, r["sid"], f"{name}-{r['sid']}", dict.fromkeys(ASPECTS, value), 5)
    conn.close()
    export(db, tmp_path / "out")
    return [r.split("=", 1)[1] for r in runs], tmp_path / "out" / "ratings.csv"


def test_each_story_carries_its_human_consensus(exported):
    runs, csv_path = exported
    data = load_view_data(runs, human=str(csv_path))
    human = {s["text"][:10]: s["human"] for s in data["stories"]}
    assert human["The keeper"]["concepts"] == {"mean": 1.5, "n": 2}
    assert human["The robot "]["ethics"] == {"mean": 4.0, "n": 2}
    assert load_view_data(runs)["stories"][0]["human"] is None
    with pytest.raises(UsageError, match="no such file"):
        load_view_data(runs, human=str(csv_path.parent / "missing.csv"))


@pytest.mark.browser
def test_the_prompt_page_shows_human_beside_judge(exported, open_view, tmp_path):
    runs, csv_path = exported
    o = open_view(write_view(runs, tmp_path / "view.html", human=csv_path))
    o.page.locator("#prompt-rows tr", has_text="voice-01").first.click()
    cell = o.page.locator(".story td[data-metric=concepts]").first
    assert cell.inner_text() == "1.00 · human 1.50"
    assert cell.locator(".human").get_attribute("title") == "mean of 2 raters"
    o.assert_clean()


@pytest.mark.parametrize(("row", "message"), [
    ("voice,concepts,nan,3,2", "human score 'nan' is not a finite number"),
    ("voice,concepts,,3,2", "human score '' is not a number"),
    ("voice,concepts,3,3,2.0", "n_raters '2.0' is not a whole number"),
    ("voice,concepts,3,3,2\nvoice,concepts,4,3,2", "story 'voice' rated twice for aspect 'concepts'"),
], ids=["nan", "empty", "n-raters", "twice"])
def test_a_bad_human_csv_is_a_one_line_error(exported, tmp_path, capsys, row, message):
    runs, _ = exported
    bad = tmp_path / "bad.csv"
    bad.write_text(f"story_id,aspect,human,judge,n_raters\n{row}\n", encoding="utf-8")
    with pytest.raises(SystemExit) as exit_info:
        run_cli(view_main, [*runs, "--human", str(bad), "--out", str(tmp_path / "v.html")])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: --human {bad}:") and message in err


def test_two_runs_with_the_same_story_ids_each_get_their_own_consensus(tmp_path):
    # Two runs of one framework and writer (say two decoding settings) share story ids, model and
    # prompts: each story shows its own run's consensus, never the other run's.
    rows = []
    for label, human in (("hot", 1.0), ("cold", 4.0)):
        s = story("review", "voice-01", "agent-a", f"A {label} story.", model="w")
        write_run(tmp_path / label, [s], [score(s, 3.0)], plot=False)
        rows.append(f"s-{label},concepts,{human},3,2,{label},{s['story_id']},w,{s['prompt_sha256']}\n")
    csv_path = tmp_path / "ratings.csv"
    csv_path.write_text("story_id,aspect,human,judge,n_raters,run,source_story_id,model,prompt_sha256\n"
                        + "".join(rows), encoding="utf-8")
    data = load_view_data([f"hot={tmp_path / 'hot'}", f"cold={tmp_path / 'cold'}"], human=str(csv_path))
    assert {s["text"]: s["human"]["concepts"]["mean"] for s in data["stories"]} == {"A hot story.": 1.0,
                                                                                   "A cold story.": 4.0}
    # viewed under other names, the shared story id cannot say which run it is: no consensus shown
    data = load_view_data([f"a={tmp_path / 'hot'}", f"b={tmp_path / 'cold'}"], human=str(csv_path))
    assert [s["human"] for s in data["stories"]] == [None, None]
