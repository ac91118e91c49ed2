"""The run viewer: one self-contained HTML page to read runs (stories, drafts, feedback, scores).

    review-lab view runs/benchmark --out runs/benchmark/view.html
    review-lab view base=runs/story/base tuned=runs/story/tuned --compare runs/story/compare --out view.html

`data` gathers the runs into one JSON-ready dict, `page` inlines it with the CSS and JS of
`static/` into one file; the browser builds the overview at once and each prompt's page (side by
side finals, draft diffs, feedback with senders, scores) when it is opened.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from eval.view.data import load_view_data
from eval.view.page import render_html
from generate.common.files import make_dir

log = logging.getLogger(__name__)

__all__ = ["load_view_data", "render_html", "write_view"]


def write_view(runs: Sequence[str | Path], out: str | Path, eval_dir: str | Path | None = None,
               compare_dir: str | Path | None = None, title: str | None = None,
               human: str | Path | None = None) -> Path:
    """Write the viewer page for `runs` (`DIR` or `NAME=DIR`) to `out` and return its path."""
    data = load_view_data([str(r) for r in runs], eval_dir and str(eval_dir), compare_dir and str(compare_dir), title,
                          human and str(human))
    out = Path(out)
    make_dir(out.parent)
    out.write_text(render_html(data), encoding="utf-8")
    log.info("viewer: %s (%d stories, %.1f MB)", out, len(data["stories"]), out.stat().st_size / 1e6)
    return out
