"""The viewer's data and page assembly, without a browser: joins, failures, escaping, CLI."""

import base64
import hashlib
import json
import re
import subprocess
import sys

import pytest

from eval.view import load_view_data, render_html, write_view
from eval.view.cli import main
from eval.view.data import expand_runs
from eval.view.page import embed_json
from generate.common.errors import UsageError
from tests.conftest import REPO
from tests.view.runs import HOSTILE, score, story, write_literal_runs, write_run


@pytest.fixture
def literal(tmp_path):
    return write_literal_runs(tmp_path)


def test_stories_scores_prompts_and_failures_are_joined(literal):
    single, review, cmp = literal
    data = load_view_data([str(single), str(review)], compare_dir=str(cmp))
    assert [r["label"] for r in data["runs"]] == ["single", "review"]
    assert [r["framework"] for r in data["runs"]] == ["single", "review"]
    # Prompts are one row each across runs (by text hash), ordered by aspect then id.
    assert [p["id"] for p in data["prompts"]] == ["mars-01", "robot-01", "lost-01", "voice-01"]
    assert len(data["stories"]) == 3 + 6
    by = {(data["runs"][s["run"]]["label"], data["prompts"][s["prompt"]]["id"], s["agent"]): s for s in data["stories"]}
    assert by["single", "voice-01", "single"]["scores"]["judge_average"] == 3.0
    robot = by["single", "robot-01", "single"]
    assert robot["scores"]["kl"] is None
    assert robot["missing"]["kl"] == "no words (only symbols, punctuation or emoji)"
    alpha = by["review", "voice-01", "alpha"]
    assert len(alpha["drafts"]) == 2 and [f["from"] for f in alpha["feedback"][0]] == ["beta", "gamma"]
    assert by["review", "voice-01", "gamma"]["text"] == HOSTILE
    # A failure points at its prompt's row through the run's manifest (ids may repeat across datasets).
    assert {(data["prompts"][f["prompt"]]["id"], f["retried_ok"]) for f in data["failures"]} == {
        ("lost-01", False), ("voice-01", True)}
    assert data["runs"][0]["summary"]["concepts"]["n"] == 3 and data["runs"][0]["judge_mode"] == "sample"
    assert data["runs"][0]["summary"]["kl"]["missing"] == {"no words (only symbols, punctuation or emoji)": 1}
    assert [m["key"] for m in data["metrics"] if m["overview"]] == [
        "judge_average", "surprisal", "kl", "novelty_cos", "volume_gain", "homogenization"]
    assert len(data["plots"]) == 2 and data["plots"][0]["src"].startswith("data:image/png;base64,")
    assert data["comparison"]["gains"]["judge_average"]["review"]["p_value"] == 0.31
    assert len(data["comparison"]["plots"]) == 1


def test_run_arguments(tmp_path, literal):
    single, review, _ = literal
    # A directory of runs stands for its runs, in the benchmark's framework order.
    assert expand_runs([str(tmp_path)]) == [("single", single), ("review", review)]
    assert expand_runs([f"base={single}", f"review={review}"]) == [("base", single), ("review", review)]
    other = tmp_path / "other"
    write_run(other / "single", [story("single", "voice-01", "single", "x")], [])
    # Two runs with one name (two benchmarks' single): qualified by their parent directory.
    assert [label for label, _ in expand_runs([str(single), str(other / "single")])] == [
        f"{tmp_path.name}/single", "other/single"]
    with pytest.raises(UsageError, match="no run in it"):
        expand_runs([str(tmp_path / "nowhere")])
    with pytest.raises(UsageError, match="same name"):
        expand_runs([f"a={single}", f"a={review}"])


def test_one_evaluation_of_two_runs_of_the_same_framework(tmp_path):
    """Base and tuned writer share story ids (framework/prompt/agent): scores match by writer too."""
    runs, scores = [], []
    for model, judge in (("base", 1.0), ("tuned", 4.0)):
        s = story("single", "voice-01", "single", f"story by {model}", model=model)
        runs.append(write_run(tmp_path / model, [s], []))
        scores.append(score(s, judge))
    shared = write_run(tmp_path / "eval_all", [], scores).joinpath("eval")
    data = load_view_data([str(r) for r in runs], eval_dir=str(shared))
    assert [s["scores"]["judge_average"] for s in data["stories"]] == [1.0, 4.0]
    assert [r["summary"]["concepts"]["mean"] for r in data["runs"]] == [1.0, 4.0]


def test_an_unevaluated_run_shows_why_its_scores_are_missing(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "stories.jsonl").write_text(json.dumps(story("single", "voice-01", "single", "x")) + "\n")
    (data_story,) = load_view_data([str(run)])["stories"]
    assert data_story["scores"]["judge_average"] is None and data_story["missing"] == {"*": "not evaluated"}


def test_embedded_data_cannot_close_its_script_element():
    data = {"title": HOSTILE, "text": HOSTILE + "</SCRIPT><!--<script>", "lone": "\ud800", "emoji": "🚀"}
    page = render_html({**data, "metrics": [], "runs": [], "prompts": [], "stories": [], "failures": [],
                        "plots": [], "comparison": None})
    assert page.count("</script>") == 2 and page.lower().count("</script") == 2  # the template's own two
    assert "<!--" not in page and "<img" not in page
    blob = re.search(r'<script type="application/json" id="view-data">(.*?)</script>', page, re.DOTALL).group(1)
    assert json.loads(blob)["text"] == data["text"] and json.loads(blob)["lone"] == "\ud800"
    assert blob == embed_json(json.loads(blob))
    assert f"<title>{HOSTILE}" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_csp_allows_exactly_the_inline_style_and_script(literal, tmp_path):
    page = write_view(literal[:2], tmp_path / "view.html").read_text()
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1)
    script = re.search(r"<script>(.*)</script>", page, re.DOTALL).group(1)
    style = re.search(r"<style>(.*)</style>", page, re.DOTALL).group(1)

    def digest(text):
        return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"

    assert csp == f"default-src 'none'; img-src data:; style-src {digest(style)}; script-src {digest(script)}"


def test_cli(literal, tmp_path):
    single, review, cmp = literal
    out = tmp_path / "out" / "view.html"
    assert main([f"base={single}", str(review), "--compare", str(cmp), "--out", str(out), "--title", "t"]) == 0
    assert '"label":"base"' in out.read_text()
    with pytest.raises(UsageError, match="no comparison.json"):
        main([str(single), "--compare", str(tmp_path), "--out", str(out)])
    proc = subprocess.run([sys.executable, "-m", "eval.view", str(tmp_path / "missing"), "--out", str(out)],
                          check=False, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.startswith("error: ") and "Traceback" not in proc.stderr
