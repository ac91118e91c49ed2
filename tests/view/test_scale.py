"""Full scale, measured: 100 prompts x 5 frameworks x 3 agents x 3 versions of ~300 words, with
two feedback rounds (Review: both peers; Teacher: the teacher). The README quotes these numbers."""

import json
import time

import pytest
from playwright.sync_api import expect

from eval.view import write_view
from tests.view.runs import write_synthetic_runs

pytestmark = pytest.mark.browser


def test_full_scale_page_opens_sorts_filters_and_shows_a_prompt_fast(tmp_path, open_view):
    start = time.perf_counter()
    path = write_view(write_synthetic_runs(tmp_path / "runs"), tmp_path / "view.html")
    numbers = {"build_s": time.perf_counter() - start, "size_mb": path.stat().st_size / 1e6}
    start = time.perf_counter()
    o = open_view(path)
    numbers["open_s"] = time.perf_counter() - start
    page = o.page
    numbers["first_render_ms"] = float(page.evaluate("document.documentElement.dataset.renderMs"))
    numbers["first_paint_ms"] = page.evaluate("performance.getEntriesByType('paint')[0].startTime")
    rows = page.locator("#prompt-rows tr")
    expect(rows).to_have_count(100)

    def in_page_ms(action: str) -> float:
        """Milliseconds from a user action until the page has handled it and laid itself out."""
        return page.evaluate(f"""() => {{ const t = performance.now(); {action}; document.body.offsetHeight;
                                       return performance.now() - t; }}""")

    numbers["sort_ms"] = in_page_ms("document.querySelector(\"th[data-col='4:judge_average'] button\").click()")
    numbers["filter_ms"] = in_page_ms("""const f = document.getElementById('aspect-filter'); f.value = 'Aspect 3';
                                         f.dispatchEvent(new Event('change'))""")
    expect(rows).to_have_count(10)
    start = time.perf_counter()
    page.fill("#search", "synthetic-013")  # waits 120 ms for typing to pause
    expect(rows).to_have_count(1)
    numbers["search_s"] = time.perf_counter() - start
    # The app's hashchange handler runs first (it was added first), so this one times it.
    numbers["prompt_page_ms"] = page.evaluate("""() => new Promise((done) => { const t = performance.now();
        addEventListener("hashchange", () => { document.body.offsetHeight; done(performance.now() - t); }, {once: true});
        location.hash = "#prompt/13"; })""")
    expect(page.locator("#prompt .history")).to_have_count(4 * 3)
    assert page.locator("#prompt .story").count() == 1 + 4 * 3
    assert page.locator("#prompt .diff ins").count() > 100
    (tmp_path / "scale.json").write_text(json.dumps(numbers, indent=2))
    print("full scale:", json.dumps({k: round(v, 3) for k, v in numbers.items()}))
    # Generous bounds for a shared CI machine; the README quotes what was measured.
    assert numbers["size_mb"] < 20 and numbers["first_render_ms"] < 5000
    assert max(numbers["sort_ms"], numbers["filter_ms"], numbers["prompt_page_ms"]) < 2000 and numbers["search_s"] < 3
    o.assert_clean()
