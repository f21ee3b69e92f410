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


def _cell(v):
    # neutralise spreadsheet formula injection from trace-provided names
    if isinstance(v, str) and v[:1] in ("=", "+", "-", "@") and not _is_number(v):
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
        w.writerow(t["columns"])
        for row in t["rows"]:
            w.writerow([_cell(v) for v in row])
        atomic_write_text(names[name], buf.getvalue())
