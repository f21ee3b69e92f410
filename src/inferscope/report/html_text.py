"""Escaping and number formatting shared by the HTML renderers (report.html, diff.html, sweep.html,
the roofline SVG).

Every string that comes from a trace or from the analysis (kernel, thread, range and file
names, finding text) goes through ``text()``/``attr()``: control characters and bidi
overrides are shown as visible ``<U+XXXX>`` codes, lone surrogates become U+FFFD, long names
are truncated for display with the full name in a ``title`` attribute, and everything is
escaped with ``html.escape(quote=True)``.  No element or attribute is ever built from data.
"""
from __future__ import annotations

import html
import math
import re
from typing import Any

# ---------------------------------------------------------------------------------------
# escaping
# ---------------------------------------------------------------------------------------
_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e"
                     "\u2060-\u2069\ufeff\ufff9-\ufffb]")
_SURROGATE = re.compile("[\ud800-\udfff]")
DISPLAY_MAX = 160
TITLE_MAX = 20000


def clean(s: Any) -> str:
    """Make a string safe to *show*: visible codes for invisible/bidi chars, no surrogates."""
    if s is None:
        return ""
    if not isinstance(s, str):
        s = str(s)
    s = _SURROGATE.sub("\ufffd", s)
    s = s.replace("\t", " ").replace("\r\n", " ").replace("\n", " ").replace("\r", " ")
    return _UNSAFE.sub(lambda m: f"<U+{ord(m.group(0)):04X}>", s)


def attr(s: Any, limit: int = TITLE_MAX) -> str:
    c = clean(s)
    if len(c) > limit:
        c = c[:limit] + "…"
    return html.escape(c, quote=True)


def text(s: Any, limit: int = DISPLAY_MAX) -> str:
    """Escaped display text; names longer than ``limit`` are cut, full name in a title."""
    c = clean(s)
    if len(c) <= limit:
        return html.escape(c, quote=True)
    return (f'<span class="trunc" title="{attr(c)}">{html.escape(c[:limit], quote=True)}'
            f'… <small>({len(c):,} chars)</small></span>')


# ---------------------------------------------------------------------------------------
# number formatting (shared with tests: the browser test looks for fmt_ms(e2e_ms))
# ---------------------------------------------------------------------------------------
def _num(x) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def fmt_ms(x) -> str:
    v = _num(x)
    if v is None:
        return "n/a"
    if abs(v) >= 100:
        return f"{v:,.1f} ms"
    if abs(v) >= 1:
        return f"{v:,.2f} ms"
    return f"{v:,.3f} ms"


def fmt_pct(x) -> str:
    v = _num(x)
    return "n/a" if v is None else f"{v:.1f}%"


def fmt_cell(v) -> str:
    if isinstance(v, bool) or v is None:
        return text("" if v is None else str(v).lower())
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if not math.isfinite(v):
            return "n/a"
        if v == int(v) and abs(v) < 1e15:
            return f"{int(v):,}" if abs(v) >= 1000 else f"{v:g}"
        return f"{v:,.3f}" if abs(v) < 1e6 else f"{v:,.1f}"
    return text(v)
