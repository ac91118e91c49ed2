"""Turn a raw writer reply into the clean story: no format markers, no preambles, no role claims.

Small models wrap stories in chatter ("Here's my revised story:", "Title: ...", "As the
Ecological Writer, I ...", "End of Story", "(Word count: 298)"). The metrics must see only the
story, so this runs on every draft before it is stored or shown to anyone.
"""

from __future__ import annotations

import re

_MARKERS = re.compile(r"<<<\s*STORY|STORY\s*>>>|\*{0,2}end of (?:the )?story\*{0,2}\.?", re.I)
_LEAD = re.compile(
    r"""^\s*(?:
        (?:sure|certainly|okay|ok|of course|absolutely)\b[^\n]*
      | here(?:'s|\s+is|\s+are)\b[^\n]*
      | (?:\#+\s*)?\**\s*(?:title|story|revised story|final story|updated story)\s*\**\s*:[^\n]*
      | \#+\s+[^\n]*
      | \*\*[^\n*]{1,80}\*\*\s*
      | as\s+(?:the|a|an)\s+[\w\s-]{0,40}?(?:writer|author|agent)\b[^\n]*:
      | (?:the\s+)?(?:humanistic|futuristic|ecological)\s+writer\s*:
    )\s*$""",
    re.I | re.X,
)
_TRAIL = re.compile(
    r"""^\s*(?:
        \(?\s*word\s*count[^\n]*
      | (?:note|notes|author's note)\s*:[^\n]*
      | the\s+end\.?
      | [-*_=]{3,}
      | (?:i\s+hope|let\s+me\s+know|feel\s+free)\b[^\n]*
    )\s*$""",
    re.I | re.X,
)
_ROLE_CLAIM = re.compile(r"^\s*as\s+(?:the|a|an)\s+(?:humanistic|futuristic|ecological)\s+writer\s*,\s*", re.I)


def clean_story(raw: str) -> str:
    """Strip wrappers around a story; the story's own words are left untouched."""
    text = _MARKERS.sub("", raw).replace("\r\n", "\n")
    lines = [ln.rstrip() for ln in text.split("\n")]
    while lines and (not lines[0].strip() or _LEAD.match(lines[0])):
        lines.pop(0)
    while lines and (not lines[-1].strip() or _TRAIL.match(lines[-1])):
        lines.pop()
    text = "\n".join(lines).strip()
    text = _ROLE_CLAIM.sub("", text)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text[:1].upper() + text[1:] if text else text


def clean_feedback(raw: str) -> str:
    """Feedback keeps its wording; only story markers a model echoed back are removed."""
    text = re.sub(r"<{2,}\s*\w*\s*<*|>{2,}|\bSTORY>+", "", _MARKERS.sub("", raw))
    return re.sub(r"\n{3,}", "\n\n", text).strip()
