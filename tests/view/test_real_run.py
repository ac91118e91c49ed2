"""The viewer on a real tiny run: the embedded SmolLM2 writes 8-token stories alone and inside
Review (3 agents, 2 rounds), evaluated without judge, reference corpus or surprisal scorer to keep
it short (those values are missing, each with its reason). The page holds every story, each
agent's versions and the feedback each received from whom. (`make benchmark` writing view.html
is the same `write_view` call, made by `review-lab benchmark`.)"""

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from eval.run import EvalConfig, Evaluator
from eval.view import write_view
from generate.runner import RunConfig, Runner

pytestmark = [pytest.mark.slow, pytest.mark.browser]


def _run_and_evaluate(model, out):
    for framework in ("single", "review"):
        run = out / framework
        stories = Runner(RunConfig(framework=framework, limit=1, rounds=2, max_new_tokens=8, out=str(run)),
                         model=model).run()
        Evaluator(EvalConfig(stories=[str(stories)], out=str(run / "eval"), seed=0, no_judge=True,
                             no_surprisal=True),
                  models={"smollm2-135m-instruct": model}).run()
    return write_view([out / "single", out / "review"], out / "view.html")


@pytest.fixture(scope="module")
def view_file(tmp_path_factory, default_model):
    # In a thread of its own: the browser fixture's event loop may already run in this one, and
    # the model backends start their own with asyncio.run.
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(_run_and_evaluate, default_model, tmp_path_factory.mktemp("real")).result()


def test_real_run_view_shows_every_story_and_its_feedback(view_file, open_view, tmp_path):
    stories = [json.loads(line) for fw in ("single", "review") for line in (view_file.parent / fw / "stories.jsonl").open()]
    assert len(stories) == 4
    o = open_view(view_file)
    page = o.page
    assert o.rows() == [stories[0]["prompt_id"]]
    page.locator("#prompt-rows tr").first.click()
    page.wait_for_selector("#prompt:not([hidden]) .story")
    for s in stories:
        run = page.locator(f".run-col[data-run={s['framework']}] .story[data-agent={s['agent']}]")
        assert run.locator(".final").evaluate("x => x.textContent") == s["text"]
        assert run.locator("td[data-metric=concepts]").inner_text() == "missing: not judged (--no-judge)"
        if s["framework"] != "review":
            continue
        history = page.locator(f".run-history[data-run=review] .history[data-agent={s['agent']}]")
        assert history.locator(".version").count() == len(s["drafts"]) + 1 == 2
        for r, round_items in enumerate(s["feedback"], 1):
            items = history.locator(f".feedback[data-round='{r}'] .feedback-item")
            assert items.evaluate_all("xs => xs.map(x => [x.dataset.from, x.dataset.to, x.dataset.seenAs])") == [
                [f["from"], s["agent"], f"Reviewer {i}"] for i, f in enumerate(round_items, 1)]
            assert items.locator(".text").evaluate_all("xs => xs.map(x => x.textContent)") == [
                f["text"] for f in round_items]
    page.screenshot(path=tmp_path / "real_prompt.png", full_page=True)
    o.assert_clean()
