"""One self-contained HTML file: the template with the CSS, the JS and the data inlined.

Story text is data, never markup. The data travels as JSON inside `<script type="application/json">`
with every `<` written as `\\u003c`, so no story can close that element or open another; the
script reads it with `JSON.parse` and builds the page with `textContent` only. A Content Security
Policy allows exactly the page's own style and script (by hash) and `data:` images, so even a
mistake that let markup through could neither run code nor reach the network.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
from importlib import resources
from typing import Any

PLACEHOLDER = re.compile(r"@@(\w+)@@")


def asset(package: str, name: str) -> str:
    """A file of `package`'s `static/` folder."""
    return resources.files(package).joinpath("static", name).read_text(encoding="utf-8")


def _asset(name: str) -> str:
    return asset("eval.view", name)


def page_script(package: str, name: str) -> str:
    """A page's one inline script: the shared DOM builder (`dom.js`), then the page's own code."""
    return _asset("dom.js") + "\n" + asset(package, name)


def fill(template: str, parts: dict[str, str]) -> str:
    """`@@NAME@@` placeholders replaced in one pass over the template only, so a placeholder-like
    string inside the data stays as it is."""
    return PLACEHOLDER.sub(lambda m: parts[m.group(1)], template)


def csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def embed_json(data: Any) -> str:
    """JSON that is inert inside a <script> element: ASCII only (lone surrogates survive as
    escapes) and no `<`, so neither `</script>` nor `<!--` can occur."""
    return json.dumps(data, ensure_ascii=True, allow_nan=False, separators=(",", ":")).replace("<", "\\u003c")


def render_html(data: dict[str, Any]) -> str:
    """The page for `data` (as `eval.view.data.load_view_data` builds it)."""
    css, js = _asset("view.css"), page_script("eval.view", "view.js")
    parts = {
        "TITLE": html.escape(data.get("title") or "Run viewer"),
        "CSP": f"default-src 'none'; img-src data:; style-src {csp_hash(css)}; script-src {csp_hash(js)}",
        "CSS": css, "JS": js, "DATA": embed_json(data),
    }
    return fill(_asset("view.html"), parts)
