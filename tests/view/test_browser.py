"""The viewer in a real browser, on literal runs: every story reachable, drafts with their
differences, feedback with sender and receiver, sorting and filtering, hostile text inert."""

import json

import pytest
from playwright.sync_api import expect

from eval.view import write_view
from tests.view.runs import HOSTILE, write_literal_runs

pytestmark = pytest.mark.browser


@pytest.fixture
def view(tmp_path, open_view):
    single, review, cmp = write_literal_runs(tmp_path)
    o = open_view(write_view([single, review], tmp_path / "view.html", compare_dir=cmp, title=HOSTILE))
    o.stories = [json.loads(line) for run in (single, review) for line in (run / "stories.jsonl").open()]
    return o


def open_prompt(o, prompt_id):
    o.page.locator("#prompt-rows tr", has_text=prompt_id).first.click()
    o.page.wait_for_selector("#prompt:not([hidden]) h2")


def test_overview_has_summary_plots_comparison_failures_and_rows(view, tmp_path):
    page = view.page
    assert view.rows() == ["mars-01", "robot-01", "lost-01", "voice-01"]
    assert page.locator("#summary tbody tr").all_inner_texts()[0].startswith("single\tsingle\twriter\t3/3\tsample")
    assert page.locator("#prompts th.group").all_inner_texts() == ["single (single)", "review (review)"]
    # The failed prompt is a row (the Review run has it) whose single-agent cells say so.
    lost = page.locator("#prompt-rows tr", has_text="lost-01").locator("td.missing").first
    assert lost.inner_text() == "failed" and lost.get_attribute("title") == "blank completion after 2 re-asks"
    assert page.locator("#failures tbody tr").all_inner_texts()[0].endswith("still failed")
    gain = page.locator("#gains tbody tr").first.locator("td").all_inner_texts()
    assert gain == ["Judge average", "review", "+0.25", "[-0.1, +0.6]", "0.31", "0.62", "1", "0", "no"]
    assert "p (Holm)" in page.locator("#gains thead").inner_text()
    assert HOSTILE in page.locator(".verdict li").inner_text()
    page.locator(".plots-box summary").click()
    assert page.evaluate("[...document.images].every((i) => i.complete && i.naturalWidth === 1)")
    page.screenshot(path=tmp_path / "overview.png", full_page=True)
    view.assert_clean()


def test_sorting_filtering_and_search_change_the_rows(view):
    page = view.page
    judge = page.locator("#prompts th[data-col='0:judge_average'] button")
    judge.click()  # numbers sort high to low first; missing values go last either way
    assert view.rows() == ["voice-01", "robot-01", "mars-01", "lost-01"]
    judge.click()
    assert view.rows() == ["mars-01", "robot-01", "voice-01", "lost-01"]
    page.locator("#prompts th[data-col='id'] button").click()
    assert view.rows() == ["lost-01", "mars-01", "robot-01", "voice-01"]
    page.select_option("#aspect-filter", "Imagery")
    assert view.rows() == ["mars-01", "robot-01"]
    assert page.locator("#row-count").inner_text() == "2 of 4 prompts"
    page.select_option("#aspect-filter", "")
    page.fill("#search", "GREEN lamp")  # story text, any case: only voice-01's Review finals say it
    expect(page.locator("#prompt-rows tr")).to_have_count(2)
    assert view.rows() == ["lost-01", "voice-01"]
    page.fill("#search", "derelict ship")  # prompt text
    expect(page.locator("#prompt-rows tr")).to_have_count(1)
    assert view.rows() == ["lost-01"]
    view.assert_clean()


def test_prompt_page_shows_drafts_differences_and_who_said_what(view, tmp_path):
    page = view.page
    open_prompt(view, "voice-01")
    assert page.locator("#prompt h2").inner_text() == "voice-01 · Strong Voice"
    assert page.locator(".run-col").evaluate_all("cols => cols.map(c => c.dataset.run)") == ["single", "review"]
    assert page.locator(".run-col[data-run=review] .story h4").all_inner_texts() == ["alpha", "beta", "gamma"]
    alpha = page.locator(".run-history[data-run=review] .history[data-agent=alpha]")
    v2, v3 = alpha.locator(".version[data-version='2'] .diff"), alpha.locator(".version[data-version='3'] .diff")
    assert v2.locator("ins").all_inner_texts() == ["old ", "lamp at dusk."]
    assert v2.locator("del").all_inner_texts() == ["lamp."]
    assert v3.locator("ins").all_inner_texts() == ["green "] and v3.locator("del").count() == 0
    assert v3.inner_text() == "The old alpha keeper lit the green lamp at dusk."
    # Feedback: numbered as the writer saw it, with the real sender and the receiver.
    items = alpha.locator(".feedback[data-round='1'] .feedback-item")
    assert items.evaluate_all("xs => xs.map(x => [x.dataset.seenAs, x.dataset.from, x.dataset.to])") == [
        ["Reviewer 1", "beta", "alpha"], ["Reviewer 2", "gamma", "alpha"]]
    assert items.first.locator(".text").inner_text() == "beta to alpha, round 1: tighten the ending."
    edges = page.locator(".run-history[data-run=review] .graph").nth(1).locator("path.edge")
    assert sorted(edges.evaluate_all("es => es.map(e => e.dataset.from + '>' + e.dataset.to)")) == [
        "alpha>beta", "alpha>gamma", "beta>alpha", "beta>gamma", "gamma>alpha", "gamma>beta"]
    # Per story: scores, missing values with their reason, and what the judge record holds.
    single = page.locator(".run-col[data-run=single] .story")
    assert single.locator("td[data-metric=judge_average]").inner_text() == "3.00"
    assert single.locator("td[data-metric=homogenization]").inner_text() == "missing: one story per prompt"
    replies = single.locator("details.replies")
    assert replies.count() == 1 and replies.locator("summary").inner_text().startswith("judge replies, Concepts (1)")
    replies.locator("summary").click()
    assert replies.locator("pre.reply").inner_text().endswith("Score: 3")
    page.screenshot(path=tmp_path / "prompt.png", full_page=True)
    page.go_back()
    assert page.locator("#overview").is_visible() and not page.locator("#prompt").is_visible()
    view.assert_clean()


def test_every_story_is_in_the_data_and_on_its_prompt_page(view):
    page = view.page
    embedded = page.evaluate("JSON.parse(document.getElementById('view-data').textContent).stories.map(s => s.text)")
    assert sorted(embedded) == sorted(s["text"] for s in view.stories)
    shown = []
    for prompt_id in view.rows():
        open_prompt(view, prompt_id)
        shown += page.locator("#prompt .story .final").evaluate_all("xs => xs.map(x => x.textContent)")
        page.locator("#prompt nav a", has_text="all prompts").click()
    assert sorted(shown) == sorted(s["text"] for s in view.stories)
    view.assert_clean()


def test_hostile_text_is_shown_as_text_and_runs_nothing(view):
    page = view.page
    assert page.title() == HOSTILE
    open_prompt(view, "voice-01")
    gamma = page.locator(".run-col[data-run=review] .story[data-agent=gamma] .final")
    assert gamma.evaluate("x => x.textContent") == HOSTILE and gamma.evaluate("x => x.children.length") == 0
    quoted = page.locator(".run-col[data-run=review] .story[data-agent=gamma] pre.reply")
    assert quoted.evaluate("x => x.children.length") == 0  # a reply quoting the story is text too
    fed = page.locator(".history[data-agent=alpha] .feedback-item[data-from=gamma] .text").first
    assert fed.evaluate("x => x.textContent").endswith(HOSTILE)
    page.locator("#prompt nav a", has_text="all prompts").click()
    open_prompt(view, "mars-01")
    assert page.locator("blockquote.prompt").evaluate("x => x.textContent").endswith(HOSTILE)
    # Nothing the stories hold became an element: two scripts (data, code), no links out, no images.
    assert page.evaluate("document.scripts.length") == 2
    assert page.locator("#prompt img, #prompt script, #prompt textarea, a[href^='http']").count() == 0
    view.assert_clean()


def test_control_the_same_text_parsed_as_markup_is_caught(tmp_path, open_view):
    """What the viewer must never do, done on purpose: the checks above would have seen it."""
    path = tmp_path / "unsafe.html"
    path.write_text(f'<html data-render-ms="0"><body>{HOSTILE}</body></html>')
    o = open_view(path)
    o.page.wait_for_timeout(200)  # the broken image's error handler
    assert o.dialogs == ["1", "1"] and any(r.endswith("/x") for r in o.requests)
    with pytest.raises(AssertionError):
        o.assert_clean()
