"""Contention on the host: what the critical thread lost to other threads' Python (the GIL) and
which functions ran while the process took page faults at a high rate.  Live runs (the sampler's
CPU_SAMPLE spans and /proc counters); None elsewhere.  The findings (gil_contention,
page_fault_storm, cpu_run_queue in diagnosis.py) read this section and the counters.

Rules (exact, over the window):
- gil: the critical thread's waiting (the breakdown's ``waiting`` source: off-CPU samples, OS
  calls) intersected with the union of the on-CPU *Python* samples (classes in
  ``PYTHON_SAMPLE_CLASSES``) of the other threads of the same process(es).  CPython lets one thread
  run Python at a time, so a thread that is off-CPU while another runs Python is waiting either for
  the GIL or for those threads' results (a queue.get on Python producers); both are limited by the
  GIL, and the sampler's stack does not tell them apart (stdlib frames are transparent).  It may also
  be blocked on unrelated I/O at the same moment: the overlap is an upper bound.  Child processes
  have their own GIL and are not counted.  Per other thread: its Python time in the window, its time overlapping the
  critical thread's waiting, and its hottest function during that overlap.
- page_faults: the intervals between two ``proc.page_faults`` samples whose fault rate is at least
  thresholds.PAGE_FAULT_STORM_PER_S; the critical thread's on-CPU samples inside them, by function
  (which code was running while the faults happened: a sampled association, not a measurement of
  which instruction faulted).
"""
from __future__ import annotations

import numpy as np

from .. import thresholds as T
from ..trace.kinds import SpanKind, TrackKind
from ..trace.model import Trace
from .culprits import _split_func
from .intervals import clip, overlap_with_union, union
from .threads import critical_tracks, native_thread_tracks

# sampled classes in which a thread executes Python bytecode (holds the GIL); cpu_compute (native
# code that released it) and waiting are the others
PYTHON_SAMPLE_CLASSES = ("tokenization", "preprocessing", "user_code", "framework")
FAULT_METRIC = "proc.page_faults"


def _by_function(trace: Trace, idx: np.ndarray, us: np.ndarray, ue: np.ndarray, limit: int = 5) -> list[dict]:
    """Sampled spans idx: time inside the union (us, ue) per (function label, thread), largest first."""
    s = trace.spans
    if not len(idx) or not len(us):
        return []
    ov = overlap_with_union(s.start_ns[idx], s.end_ns[idx], us, ue)
    keep = (ov > 0) & (s.detail[idx] >= 0)
    idx, ov = idx[keep], ov[keep]
    if not len(idx):
        return []
    key = np.stack((s.detail[idx].astype(np.int64), s.track[idx].astype(np.int64)), axis=1)
    uk, inv = np.unique(key, axis=0, return_inverse=True)
    tot = np.bincount(inv.reshape(-1), weights=ov.astype(np.float64), minlength=len(uk))
    out = []
    for j in np.argsort(-tot, kind="stable")[:limit].tolist():
        fn, f = _split_func(trace.strings[int(uk[j, 0])])
        out.append({"function": fn, "file": f, "thread": trace.track_label(int(uk[j, 1])), "ms": float(tot[j]) / 1e6})
    return out


def _class_ids(trace: Trace, names) -> np.ndarray:
    ids = [trace.strings.get(n) for n in names]
    return np.array([i for i in ids if i >= 0], dtype=np.int64)


def gil_wait(trace: Trace, lo: int, hi: int, crit: np.ndarray) -> dict | None:
    s, tr = trace.spans, trace.tracks
    smp = (s.kind == SpanKind.CPU_SAMPLE) & (s.end_ns > lo) & (s.start_ns < hi)
    if not smp.any() or not crit.any():
        return None
    pids = np.unique(tr.pid[crit])
    others = (tr.kind == TrackKind.CPU_THREAD) & ~crit & np.isin(tr.pid, pids) & ~native_thread_tracks(trace)
    py = smp & others[s.track] & np.isin(s.name, _class_ids(trace, PYTHON_SAMPLE_CLASSES))
    wid = trace.strings.get("waiting")
    wait = smp & crit[s.track] & (s.name == wid) if wid >= 0 else np.zeros(len(s), bool)
    wait |= (s.kind == SpanKind.OS_RUNTIME) & crit[s.track] & (s.end_ns > lo) & (s.start_ns < hi)
    wu = union(*clip(s.start_ns[wait], s.end_ns[wait], lo, hi))
    waiting_ns = int((wu[1] - wu[0]).sum())
    pidx = np.flatnonzero(py)
    if not len(pidx):
        return None
    pu = union(*clip(s.start_ns[pidx], s.end_ns[pidx], lo, hi))
    both_ns = int(overlap_with_union(wu[0], wu[1], pu[0], pu[1]).sum())
    rows = []
    for t in np.unique(s.track[pidx]).tolist():
        ti = pidx[s.track[pidx] == t]
        a, b = clip(s.start_ns[ti], s.end_ns[ti], lo, hi)
        ov = int(overlap_with_union(a, b, wu[0], wu[1]).sum())
        top = _by_function(trace, ti, wu[0], wu[1], limit=1)
        rows.append({"thread": trace.track_label(int(t)), "python_ms": float((b - a).sum()) / 1e6, "overlap_ms": ov / 1e6,
                     "function": top[0]["function"] if top else None, "file": top[0]["file"] if top else None})
    rows.sort(key=lambda r: (-r["overlap_ms"], -r["python_ms"], r["thread"]))
    win = max(1, hi - lo)
    return {"critical_waiting_ms": waiting_ns / 1e6, "waiting_while_python_ms": both_ns / 1e6,
            "pct_of_window": 100.0 * both_ns / win, "pct_of_waiting": 100.0 * both_ns / waiting_ns if waiting_ns else 0.0,
            "python_threads": len(rows), "threads": rows,
            "basis": "the critical thread's off-CPU time while another thread of its process ran Python (sampled): an "
                     "upper bound of its wait for the GIL or for those threads' results (it may be blocked on I/O at the same time)"}


def fault_storms(trace: Trace, lo: int, hi: int, crit: np.ndarray) -> dict | None:
    c, tk = trace.counters, trace.tracks
    fid = trace.strings.get(FAULT_METRIC)
    if fid < 0 or not len(c):
        return None
    tracks = np.flatnonzero((tk.kind == TrackKind.COUNTER) & (tk.name == fid))
    m = np.isin(c.track, tracks) & np.isfinite(c.value) & (c.value >= 0)
    ts, v = c.ts_ns[m], c.value[m]
    o = np.argsort(ts, kind="stable")
    ts, v = ts[o], v[o]
    if len(ts) < 2:
        return None
    a, b = ts[:-1], ts[1:]
    dv = np.maximum(np.diff(v), 0.0)
    dt = (b - a) / 1e9
    rate = np.divide(dv, dt, out=np.zeros_like(dv), where=dt > 0)
    hot = (rate >= T.PAGE_FAULT_STORM_PER_S) & (b > lo) & (a < hi)
    ha, hb = clip(a[hot], b[hot], lo, hi)
    if not len(ha):
        return {"intervals": 0, "ms": 0.0, "faults": 0, "functions": [], "rate_threshold_per_s": T.PAGE_FAULT_STORM_PER_S}
    hu = union(ha, hb)
    s = trace.spans
    wid = trace.strings.get("waiting")
    on = (s.kind == SpanKind.CPU_SAMPLE) & crit[s.track] & (s.name != wid) & (s.end_ns > lo) & (s.start_ns < hi)
    return {"intervals": int(hot.sum()), "ms": float((hu[1] - hu[0]).sum()) / 1e6, "faults": int(dv[hot].sum()),
            "functions": _by_function(trace, np.flatnonzero(on), hu[0], hu[1]),
            "rate_threshold_per_s": T.PAGE_FAULT_STORM_PER_S}


def contention(trace: Trace, window) -> dict | None:
    """The section: None unless the trace has sampled threads (live runs)."""
    s = trace.spans
    if not (s.kind == SpanKind.CPU_SAMPLE).any():
        return None
    lo, hi = int(window.start_ns), int(window.end_ns)
    crit, _ = critical_tracks(trace)
    return {"gil": gil_wait(trace, lo, hi, crit), "page_faults": fault_storms(trace, lo, hi, crit)}
