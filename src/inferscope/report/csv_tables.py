"""tables/<name>.csv: every table of the result, one CSV each (seed 004 file names)."""
from __future__ import annotations

import csv
import io
import re
from pathlib import Path

from ..util.atomic import atomic_write_text

# seed 004 names for the tables it defines
FILE_NAMES = {"kernels": "kernels.csv", "gpu_idle_gaps": "gpu_idle_gaps.csv"}


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:80] or "table"


_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_NEWLINE = re.compile("[\t\n\r\u2028\u2029]")
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


_UNSAFE = re.compile(_CONTROL.pattern[:-1] + _NEWLINE.pattern[1:-1] + _BIDI.pattern[1:])


def _cell(v):
    """A trace-provided value made inert for spreadsheets and terminals: control characters
    (ESC, BEL, NUL ...) become U+FFFD, tabs/newlines a space, bidi overrides are removed, and a
    leading formula character (=, +, -, @, also after spaces) is neutralised with a quote."""
    if not isinstance(v, str):
        return v
    if _UNSAFE.search(v) is not None:   # most cells hold none of those characters: one search
        v = _BIDI.sub("", _CONTROL.sub("\ufffd", _NEWLINE.sub(" ", v)))
    if v.lstrip()[:1] in ("=", "+", "-", "@") and not _is_number(v):
        return "'" + v
    return v


def _is_number(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False


def render(result: dict, trace, path) -> None:
    outdir = Path(path)
    if outdir.suffix.lower() == ".csv":  # a single file was asked for: the breakdown
        tables = {"breakdown": result["tables"]["breakdown"]}
        names = {"breakdown": outdir}
    else:
        tables = result.get("tables", {})
        names = {n: outdir / FILE_NAMES.get(n, _safe(n) + ".csv") for n in tables}
    for name, t in tables.items():
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow([_cell(c) for c in t["columns"]])
        for row in t["rows"]:
            w.writerow([_cell(v) for v in row])
        atomic_write_text(names[name], buf.getvalue())
