"""Markdown text: the one escaping function of report.md, diff.md and cross_rank.md (``md_escape``: Markdown's own
backslash escapes, never HTML entities), code spans, headings, cell values, and plain terminal text."""
from __future__ import annotations

import re

from .shown import words

_URL_RE = re.compile(r"(?i)(https?|ftp|www)([:.])")
_BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
# what Markdown could read as markup after the brackets, pipes and backticks are escaped: "<" opening a tag
# (<a, </a, <!--, <?), a URI autolink (<scheme:...>) or an e-mail autolink (<local@...>; local-part characters
# per CommonMark); "<" before a digit too, so that a template name reads the same throughout (Array\<char*, 3>,
# Kernel\<4>); "<=", "<-", "< " stay as written.  "&" starting an entity (&lt; &#60;); ">" opening a block
# quote at the start of a line.
_LT_RE = re.compile(r"<(?=[A-Za-z0-9/!?]|[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@)")
_ENTITY_RE = re.compile(r"&(?=#[0-9]{1,7};|#[xX][0-9A-Fa-f]{1,6};|[A-Za-z][A-Za-z0-9]{0,31};)")
_QUOTE_RE = re.compile(r"^(\s*)>")


def _printable(s) -> str:
    """No control characters (C0, DEL, C1: spaces) and no bidi overrides."""
    s = "" if s is None else str(s)
    s = "".join(ch if (ch >= " " or ch == "\t") and not ("\x7f" <= ch <= "\x9f") else " " for ch in s)
    return s.translate({ord(c): None for c in _BIDI})


def md_escape(s, limit: int = 120) -> str:
    """Make a trace-provided string safe inside a Markdown table cell / line: Markdown's own backslash
    escapes, never HTML entities (report.md is read with ``cat`` as often as rendered)."""
    s = _printable(s)
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    # backslash first; then table pipes, code spans, link/image brackets ([x](u), ![x](u)),
    # HTML and autolinks (<...>), entities, block quotes, and bare-URL autolinks (GFM links "http://", "www.")
    s = s.replace("\\", "\\\\").replace("|", "\\|").replace("`", "\\`").replace("[", "\\[").replace("]", "\\]")
    s = _QUOTE_RE.sub(r"\1\\>", _ENTITY_RE.sub(r"\\&", _LT_RE.sub(r"\\<", s)))
    return _URL_RE.sub(lambda m: m.group(1) + "\\" + m.group(2), s)


def md_heading(name, limit: int = 200) -> str:
    """An identifier (``gc_pauses``, ``cpu_op``) as heading words ("GC pauses", "CPU op"), escaped."""
    return md_escape(words(name), limit)


def md_code(s, limit: int = 300) -> str:
    """A trace-provided string as a Markdown code span (shown verbatim: no escape is read inside one),
    its fence longer than any backtick run inside."""
    s = _printable(s).replace("\t", " ")
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    runs = [len(m) for m in re.findall(r"`+", s)]
    fence = "`" * ((max(runs) + 1) if runs else 1)
    pad = " " if s.startswith("`") or s.endswith("`") or (s.startswith(" ") and s.endswith(" ") and s.strip()) else ""
    return f"{fence}{pad}{s}{pad}{fence}" if s else "` `"


def _fmt(v, nd=3):
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return f"{v:,.{nd}f}"
    if isinstance(v, int):
        return f"{v:,}"
    return md_escape(v)


def plain(s, limit: int = 200) -> str:
    """Trace-provided text for the terminal / code block: no control or bidi characters."""
    s = "" if s is None else str(s)
    s = "".join(ch for ch in s if (ch >= " " or ch == "\t") and ch not in _BIDI)
    return s if len(s) <= limit else s[: limit - 1] + "…"
