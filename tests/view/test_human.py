"""`review-lab view --human`: a rating study's exported consensus beside the judge's scores."""

from __future__ import annotations

import pytest

from eval.rating import store
from eval.rating.export import export
from eval.rating.study import add_raters, open_study
from eval.view import load_view_data, write_view
from generate.common.errors import UsageError
from tests.rating.conftest import ASPECTS, write_study_runs


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
