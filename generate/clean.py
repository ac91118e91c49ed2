"""Turn a raw reply into clean text: the wrappers go, the writer's own words stay.

Small models wrap stories in chatter. The metrics must see only the story, so every reply is
cleaned before it is stored or shown to another agent. A wrapper is:

- a leading line that is nothing but chatter: interjections and courtesies ("Certainly! I'd be
  happy to help."), an announcement of the reply ("Sure! Here's a story about X:"), a role
  header ("Futuristic Writer:", "As the Ecological Writer, I kept the river:"), and for stories
  a title line ("Title: X", a markdown heading, a line that is only bold, italic or [bracketed]);
- a label in front of the text on the same line: "Here's my story: The ship..." keeps "The ship...";
- trailing notes: word counts, "The End", separators, "I hope you enjoy it", and for stories
  "Note:" / "Summary:" paragraphs;
- our story markers (and the broken copies of them small models echo), anywhere.

An interjection that opens a sentence is story ("Certainly the ship was doomed.", "Sure enough,
the colony..."): a line is dropped only when all of it is chatter, and text after chatter on the
same line is kept whole unless the chatter ends in a label. When unsure, keep.
"""

from __future__ import annotations

import re

# Our markers (<<<STORY ... STORY>>>) and the broken copies small models echo (<<<STORY>>, STORY<<, <<<<<<).
_MARKER = re.compile(r"<{2,}[A-Za-z]*[<>]*|\bSTORY[<>]+|>{2,}")

_NOUN = (r"(?:story|stories|version|draft|revision|rewrite|tale|narrative|piece|take|attempt|response|feedback"
         r"|review|critique|advice|suggestions?|thoughts)")
_STARTER = (r"(?:(?:so|now|okay|well),?\s+)?(?:here(?:'s|’s|\s+is|\s+are)|below\s+(?:is|are)"
            r"|i(?:'ve|’ve|\s+have)\s+(?:written|revised|rewritten|created|crafted|updated|edited|composed)"
            r"|i(?:'ll|’ll|\s+will)\s+(?:write|revise|rewrite|share|give|provide)"
            r"|let\s+me\s+(?:write|revise|share|tell|give|provide))")
# "the story of Ada." could open a story; "the revised story." announces a reply.
_REPLY_NP = (r"(?:my|your|our|a|an|the\s+(?:\w+\s+)?(?:revised|rewritten|updated|new|improved|final|edited"
             r"|requested|short|possible))")

_ROLE_PREAMBLE = r"as\s+(?:the|a|an)\s+[^,\n]{0,40}?\b(?:writer|author|reviewer)\b[^\n]*:$"  # the whole line
_ANNOUNCE_LABEL = rf"{_STARTER}\b[^.!?:\n]*?\b{_NOUN}\b[^.!?:\n]*:"  # "Sure! Here's a story about X:"
_ANNOUNCE = rf"{_STARTER}\s+{_REPLY_NP}\b[^.!?:\n]*?\b{_NOUN}\b[^.!?:\n]*[.!]+"  # "Here is the revised story."
_LABEL = (r"(?:(?:my|the|your)\s+)?(?:(?:revised|rewritten|updated|final|new|improved)\s+)?"
          r"(?:story|draft|version|response|answer|feedback|review|critique|advice)\s*:")  # "Story: Once..."
_ROLE_LABEL = r"(?-i:(?:The\s+)?[A-Z][\w-]*\s+(?:Writer|Author|Reviewer|Teacher)\s*:)"  # "Futuristic Writer:"
_ROLE_CLAIM = r"(?-i:As\s+(?:the|an?)\s+[A-Z][\w-]*\s+Writer\s*,)"  # "As the Ecological Writer, the forest..."
# Punctuation is required: "Certainly the ship was doomed." and "Sure enough, ..." are story.
_INTERJECTION = r"(?:sure|certainly|of\s+course|absolutely|okay|ok|alright|all\s+right|gladly)\s*[!.,;:]+"
_COURTESY = (r"(?:i(?:'d|’d|\s+would)\s+be\s+(?:happy|glad|delighted)\s+to|i(?:'m|’m|\s+am)\s+(?:happy|glad)\s+to"
             r"|happy\s+to\s+help|thank\s+you|thanks|what\s+a\s+(?:great|wonderful|fun|fascinating|lovely))"
             r"[^.!?:\n]*[.!]+")
# Units a leading line is read as, in order. A "soft" unit is chatter only when the whole line is
# chatter; a "label" unit ends the wrapper, so what follows it on the line is the text.
_UNITS = [(kind, re.compile(r"[*_#\s]*(?:" + rx + r")[*_]*\s*", re.I)) for kind, rx in (
    ("label", _ROLE_PREAMBLE), ("label", _ANNOUNCE_LABEL), ("label", _ANNOUNCE), ("label", _LABEL),
    ("label", _ROLE_LABEL), ("label", _ROLE_CLAIM), ("soft", _INTERJECTION), ("soft", _COURTESY),
)]
_TITLE = re.compile(r"""[*_#\s]*(?:story\s+)?title\s*[*_]*:.*
    | \#{1,6}\s+\S.*
    | \*{1,2}[^*\n]{1,80}\*{1,2}[.:]?
    | _{1,2}[^_\n]{1,80}_{1,2}[.:]?
    | \[[^\]\n]{1,80}\]""", re.I | re.X)
# Whole trailing lines. Each courtesy names the reply ("I hope you enjoy this story"), so that a
# story's own last line ("I hope the stars remember us.") never matches.
_TRAIL = re.compile(r"""[*_\s(]*(?:
    word\s*count\s*[:=]?\s*~?\d[\d,]*.*
  | (?:words\s*[:=]\s*)?~?\d[\d,]*(?:\s+words)?
  | (?:the\s+end|end\s+of\s+(?:the\s+)?story|fin)\W*
  | [-*_=~#]{3,}
  | i\s+hope\s+(?:you|that\s+you|readers?|the\s+readers?)\s+(?:enjoy|enjoyed|like|liked|love|loved)
        \s+(?:it|this|that|my|the|reading)\b.*
  | i\s+hope\s+(?:this|it|my\s+\w+|the\s+(?:\w+\s+)?(?:story|version|revision|feedback))
        \s+(?:helps?|meets?|captures?|works\s+for|is\s+helpful|was\s+helpful|inspires?)\b.*
  | let\s+me\s+know\s+(?:if\s+you|what\s+you\s+think|whether\s+you)\b.*
  | feel\s+free\s+to\s+(?:ask|let\s+me|suggest|modify|reach|request|share)\b.*
  | (?:thank\s+you|thanks)\s+for\s+(?:reading|the\s+(?:prompt|task|opportunity|feedback|chance))\b.*
  | (?:if\s+you(?:'d|\s+would)|would\s+you)\s+like\s+(?:me\s+to|any|another|a\s+different|more|changes)\b.*
)[*_\s).!]*""", re.I | re.X)
_NOTE = re.compile(r"[*_\s]*(?:(?:note|notes|author'?s\s+note|summary)\s*[*_]*:|p\.\s*s\.)", re.I)
_END_INLINE = re.compile(r"(?<=[.!?\"”])\s*\**(?:the\s+end|end\s+of\s+(?:the\s+)?story)\**\.?\s*$", re.I)


def _lead(line: str) -> tuple[str | None, bool]:
    """Read chatter units off the start of a line: (None, _) if the line is all chatter, else
    (the text to keep, whether a label was cut off in front of it)."""
    rest, labelled = line.strip(), False
    while rest:
        for kind, rx in _UNITS:
            m = rx.match(rest)
            if m and m.end() > 0:
                rest, labelled = rest[m.end():].strip(), labelled or kind == "label"
                break
        else:
            break
    if not rest:
        return None, labelled
    return (rest, True) if labelled else (line.strip(), False)


def _clean(raw: str, *, story: bool) -> str:
    lines = [ln.rstrip() for ln in _MARKER.sub("", raw).replace("\r\n", "\n").split("\n")]
    cut_prefix = False
    while lines:
        if not lines[0].strip() or (story and _TITLE.fullmatch(lines[0].strip())):
            lines.pop(0)
            continue
        kept, cut_prefix = _lead(lines[0])
        if kept is None:
            lines.pop(0)
            continue
        lines[0] = kept
        break
    while lines:
        last = lines[-1].strip()
        if not last or _TRAIL.fullmatch(last):
            lines.pop()
            continue
        # In a story's last paragraph, a line that opens with "Note:" starts a note that runs to the end.
        note = len(lines) - 1
        while note > 0 and not (story and _NOTE.match(lines[note])) and lines[note - 1].strip():
            note -= 1
        if note > 0 and story and _NOTE.match(lines[note]):
            del lines[note:]
            continue
        break
    text = _END_INLINE.sub("", "\n".join(lines)).strip()
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text[:1].upper() + text[1:] if cut_prefix else text


def clean_story(raw: str) -> str:
    """The story without its wrappers; the story's own words are left untouched."""
    return _clean(raw, story=True)


def clean_feedback(raw: str) -> str:
    """Feedback without chatter around it ("Sure! Here's my feedback:", "I hope this helps!");
    its wording, headings and notes are kept."""
    return _clean(raw, story=False)


def clean_reply(role: str, raw: str) -> str:
    """Clean a reply by the role of its call: a writer's reply is a story, any other is feedback."""
    return clean_story(raw) if role == "write" else clean_feedback(raw)
