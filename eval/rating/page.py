"""One rater's page: the template with its CSS, JS and data inlined, and the policy that serves it.

The viewer's rules hold (`eval.view.page`): the data is JSON in a `<script type="application/json">`
with every `<` escaped, the script builds the page with `textContent` only, and the Content
Security Policy (sent as a header) admits the page's own script and style by hash and lets it
talk to its own server only, so a story's text can neither run code nor reach anywhere else.
"""

from __future__ import annotations

import html

from eval.view.page import asset, csp_hash, embed_json, fill, page_script


def _asset(name: str) -> str:
    return asset("eval.rating", name)


def _script() -> str:
    return page_script("eval.rating", "rate.js")


def content_security_policy() -> str:
    """The page's policy: its own inline style and script by hash, requests to its own origin only."""
    return (f"default-src 'none'; style-src {csp_hash(_asset('rate.css'))}; script-src {csp_hash(_script())}; "
            "connect-src 'self'; img-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


def render_page(data: dict) -> str:
    """The page for one rater (`eval.rating.study.rater_page_data`)."""
    parts = {"TITLE": html.escape(data.get("title") or "Rating"), "CSS": _asset("rate.css"),
             "JS": _script(), "DATA": embed_json(data)}
    return fill(_asset("rate.html"), parts)
