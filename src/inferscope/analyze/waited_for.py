"""What the other threads did while the critical thread(s) waited (``threads.waited_for`` in report.json).

Its own module: it reads the breakdown's waiting source (``breakdown.source_intervals``), and the breakdown
reads ``threads.critical_tracks``.
"""
from __future__ import annotations

import numpy as np

from ..trace.kinds import SpanKind, TrackKind
from ..trace.model import Trace
from .breakdown import source_intervals
from .intervals import clip, overlap_with_union, total, union
from .sample_labels import function_of
from .select import overlap
from .threads import OFF_CPU_CLASSES, critical_tracks
from .window import Window


def waited_for(trace: Trace, window, top_n: int = 8) -> list[dict]:
    """What the other threads did while the critical thread(s) waited: "waiting for thread X doing Y".

    The breakdown counts only the critical thread(s), so a pool worker's work the main thread waits for shows as
    that thread's waiting.  For each other CPU thread (the process's own and followed children's), its sampled
    on-CPU time (CPU_SAMPLE spans of a class on a CPU) that overlaps the critical thread's waiting (the breakdown's
    ``waiting`` source: sampled off-CPU and run-queue time, OS-runtime calls): one row per thread, the largest
    overlap first, with its dominant class and function during that overlap (every module import counted as one
    function, "module imports"); ``pct_of_waiting``: of the critical thread's waiting time in the window.
    Evidence beside the breakdown: its totals do not change."""
    s, tr = trace.spans, trace.tracks
    lo, hi = int(window.start_ns), int(window.end_ns)
    crit, _ = critical_tracks(trace)
    oth = (tr.kind == TrackKind.CPU_THREAD) & ~crit
    if not oth.any():
        return []
    wa, wb = source_intervals(trace)["waiting"]
    wu = union(*clip(wa, wb, lo, hi))
    wait_ns = total(*wu)
    if wait_ns <= 0:
        return []
    off = [trace.strings.get(n) for n in OFF_CPU_CLASSES]
    m = (s.kind == SpanKind.CPU_SAMPLE) & oth[s.track] & ~np.isin(s.name, off) & overlap(s.start_ns, s.end_ns, Window(lo, hi))
    idx = np.flatnonzero(m)
    if not len(idx):
        return []
    a, b = clip(s.start_ns[idx], s.end_ns[idx], lo, hi)
    ov = overlap_with_union(a, b, wu[0], wu[1]).astype(np.int64)
    keep = ov > 0
    idx, ov = idx[keep], ov[keep]
    if not len(idx):
        return []
    names = trace.strings
    fn_of: dict = {}

    def fn(d: int) -> str | None:         # 'file:func', every module import as one (a thread's start-up)
        if d < 0:
            return None
        v = fn_of.get(d)
        if v is None:
            x = names[d]
            v = fn_of[d] = "module imports" if x.startswith("import ") else function_of(x)
        return v
    per: dict = {}          # track -> {"ns", "cls": {name: ns}, "fn": {function: ns}}
    for t, n, d, o in zip(s.track[idx].tolist(), s.name[idx].tolist(), s.detail[idx].tolist(), ov.tolist()):
        r = per.setdefault(t, {"ns": 0, "cls": {}, "fn": {}})
        r["ns"] += o
        r["cls"][n] = r["cls"].get(n, 0) + o
        f = fn(d)
        if f is not None:
            r["fn"][f] = r["fn"].get(f, 0) + o
    rows = []
    for t, r in sorted(per.items(), key=lambda kv: (-kv[1]["ns"], kv[0]))[:top_n]:
        c = max(r["cls"], key=lambda k: (r["cls"][k], -k))
        f = max(r["fn"], key=lambda k: (r["fn"][k], k)) if r["fn"] else None
        rows.append({"thread": trace.track_label(t), "pid": int(tr.pid[t]), "ms": r["ns"] / 1e6,
                     "pct_of_waiting": 100.0 * r["ns"] / wait_ns, "class": names[c], "class_ms": r["cls"][c] / 1e6,
                     "function": f, "function_ms": r["fn"][f] / 1e6 if f else None})
    return rows
