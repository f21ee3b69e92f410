"""tables/<name>.csv: every table of the result, one CSV each (seed 004 file names)."""
from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import numpy as np

from ..result import Report
from ..result.views import IdleGapList
from ..util.atomic import atomic_open, atomic_write_text

# seed 004 names for the tables it defines
FILE_NAMES = {"kernels": "kernels.csv", "gpu_idle_gaps": "gpu_idle_gaps.csv"}
IDLE_GAP_COLUMNS = ["offset_ms", "ms", "host_activity", "host_overlap_pct", "start_ns", "end_ns"]
_CHUNK_ROWS = 65536     # rows formatted at a time: the text in memory stays a few MB whatever the gap count


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


def render(report: Report, trace, path) -> None:
    outdir = Path(path)
    if outdir.suffix.lower() == ".csv":  # a single file was asked for: the breakdown
        tables = {"breakdown": report.tables["breakdown"]}
        names = {"breakdown": outdir}
    else:
        tables = report.tables
        names = {n: outdir / FILE_NAMES.get(n, _safe(n) + ".csv") for n in tables}
    views = getattr(report, "views", None)      # analyze/views.py: every idle gap (with the trace)
    for name, t in tables.items():
        if name == "gpu_idle_gaps" and views is not None and views.idle_gaps is not None:
            _idle_gaps_csv(report, views.idle_gaps, names[name])
            continue
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow([_cell(c) for c in t.columns])
        for row in t.rows:
            w.writerow([_cell(v) for v in row])
        atomic_write_text(names[name], buf.getvalue())


def _idle_gaps_csv(report: Report, gaps: IdleGapList, path: Path) -> None:
    """tables/gpu_idle_gaps.csv: EVERY device-wide idle gap in the window (report.json, report.md and the
    HTML keep the largest ``top_n`` with what the host was doing), longest first, as ``analyze/views.py`` found
    them with ``idle_gaps.device_gaps`` (the rule of ``idle_gaps.largest``).  The host columns are filled for the
    gaps in ``idle_gaps.largest`` and empty for the rest; the gaps stay two int64 arrays, written in chunks."""
    lo = int(report.window.start_ns)
    ds, de = gaps.start_ns, gaps.end_ns
    host = {g.start_ns: g for g in (report.idle_gaps.largest if report.idle_gaps is not None else [])}
    with atomic_open(path, "w") as f:
        cw = csv.writer(f, lineterminator="\n")
        cw.writerow(IDLE_GAP_COLUMNS)
        for c0 in range(0, len(ds), _CHUNK_ROWS):
            a, b = ds[c0:c0 + _CHUNK_ROWS], de[c0:c0 + _CHUNK_ROWS]
            off = np.round((a - lo) / 1e6, 6).tolist()
            ms = np.round((b - a) / 1e6, 6).tolist()
            a, b = a.tolist(), b.tolist()
            lines = []
            for i in range(len(a)):
                g = host.get(a[i])
                if g is not None and g.end_ns == b[i]:
                    buf = io.StringIO()
                    csv.writer(buf, lineterminator="\n").writerow(
                        [off[i], ms[i], _cell(g.host), g.host_overlap_pct, a[i], b[i]])
                    lines.append(buf.getvalue())
                else:
                    lines.append(f"{off[i]!r},{ms[i]!r},,,{a[i]},{b[i]}\n")
            f.write("".join(lines))
