"""Contention on the host: what the critical thread lost to other threads' Python (the GIL) and
which functions ran while the process took page faults at a high rate.  Live runs (the sampler's
CPU_SAMPLE spans and /proc counters); None elsewhere.  ``blocking``: the system calls, files and
Python frames the critical thread was blocked in (analyze/blocking.py; findings blocking_io, lock_wait).  The findings (gil_contention,
page_fault_storm, cpu_run_queue in diagnosis.py) read this section and the counters.

Rules (exact, over the window):
- gil: the critical thread's waiting (the breakdown's ``waiting`` source: off-CPU samples, OS
  calls) intersected with the union of the on-CPU *Python* samples (classes in
  ``PYTHON_SAMPLE_CLASSES``) of the other threads of the same process(es).  CPython lets one thread
  run Python at a time, so a thread that is off-CPU while another runs Python is waiting either for
  the GIL or for those threads' results (a queue.get on Python producers); both are limited by the
  GIL, and the sampler's stack does not tell them apart (stdlib frames are transparent).  It may also
  be blocked on unrelated I/O at the same moment: the overlap is an upper bound.  Child processes
  have their own GIL and are not counted.  Live runs match the two per bin of two sampler tick intervals
  (min of the critical thread's waiting and the others' summed Python in each bin): the sampler lays out a
  thread's on- and off-CPU parts of one interval as one block each, so instant-by-instant overlap of
  threads that hand the GIL over inside an interval would be mostly missed.  Per other thread: its Python time in the window, its time overlapping the
  critical thread's waiting, and its hottest function during that overlap.
- page_faults: the intervals between two ``proc.page_faults`` samples whose fault rate is at least
  thresholds.PAGE_FAULT_STORM_PER_S; the critical thread's on-CPU samples inside them, by function
  (which code was running while the faults happened: a sampled association, not a measurement of
  which instruction faulted).  Live runs also record ``proc.sys_cpu_s`` (kernel-mode CPU) on every
  sampler tick where faults happened; the kernel time of the storm tick intervals is then charged to
  the sampled function covering it (piecewise-linear over each interval) and the functions are
  ranked by that ``kernel_ms`` (``ranked_by``): with THP a 48 MiB page-touching call takes ~500
  faults in 5 ms while a model forward beside it takes as many, but only the former spends most of
  its time in the kernel.
"""
from __future__ import annotations

import numpy as np

from .. import thresholds as T
from .. import vocab as V
from ..trace.kinds import SpanKind, TrackKind
from ..trace.model import Trace
from .sample_labels import function_keys, split_label
from .intervals import clip, overlap_with_union, summed_until, union
from .select import overlap
from .threads import critical_tracks, native_thread_tracks
from .window import Window
from .blocking import blocking

# sampled classes in which a thread executes Python bytecode (holds the GIL); cpu_compute (native
# code that released it) and waiting are the others
PYTHON_SAMPLE_CLASSES = V.PYTHON_CLASSES
FAULT_METRIC = "proc.page_faults"
KERNEL_METRIC = "proc.sys_cpu_s"     # cumulative kernel-mode CPU s at tick resolution (live runs)


def _by_function(trace: Trace, idx: np.ndarray, us: np.ndarray, ue: np.ndarray, limit: int = 5,
                 by_thread: bool = True, weight_ns: np.ndarray | None = None) -> list[dict]:
    """Sampled spans idx: time inside the union (us, ue) per (function label, thread), largest first;
    ``by_thread`` False: per function over all the spans' threads ("thread": where it had the most).
    ``weight_ns``: each span's time given (the union is then unused)."""
    s = trace.spans
    if not len(idx) or (weight_ns is None and not len(us)):
        return []
    ov = overlap_with_union(s.start_ns[idx], s.end_ns[idx], us, ue) if weight_ns is None else weight_ns
    keep = (ov > 0) & (s.detail[idx] >= 0)
    idx, ov = idx[keep], ov[keep]
    if not len(idx):
        return []
    fkey, fnames, _ = function_keys(trace, s.detail[idx])
    key = np.stack((fkey, s.track[idx].astype(np.int64)), axis=1)
    uk, inv = np.unique(key, axis=0, return_inverse=True)
    tot = np.bincount(inv.reshape(-1), weights=ov.astype(np.float64), minlength=len(uk))
    if not by_thread:       # per function: its total, named on its largest thread
        fk, finv = np.unique(uk[:, 0], return_inverse=True)
        ftot = np.bincount(finv.reshape(-1), weights=tot, minlength=len(fk))
        out = []
        for j in np.argsort(-ftot, kind="stable")[:limit].tolist():
            rows = np.flatnonzero(finv.reshape(-1) == j)
            big = rows[np.argmax(tot[rows])]
            fn, f, _ = split_label(fnames[int(fk[j])])
            out.append({"function": fn, "file": f, "thread": trace.track_label(int(uk[big, 1])), "ms": float(ftot[j]) / 1e6,
                        "threads": int(len(rows))})
        return out
    out = []
    for j in np.argsort(-tot, kind="stable")[:limit].tolist():
        fn, f, _ = split_label(fnames[int(uk[j, 0])])
        out.append({"function": fn, "file": f, "thread": trace.track_label(int(uk[j, 1])), "ms": float(tot[j]) / 1e6})
    return out


def _class_ids(trace: Trace, names) -> np.ndarray:
    ids = [trace.strings.get(n) for n in names]
    return np.array([i for i in ids if i >= 0], dtype=np.int64)


def gil_wait(trace: Trace, lo: int, hi: int, crit: np.ndarray) -> dict | None:
    s, tr = trace.spans, trace.tracks
    win = Window(lo, hi)
    smp = (s.kind == SpanKind.CPU_SAMPLE) & overlap(s.start_ns, s.end_ns, win)
    if not smp.any() or not crit.any():
        return None
    pids = np.unique(tr.pid[crit])
    others = (tr.kind == TrackKind.CPU_THREAD) & ~crit & np.isin(tr.pid, pids) & ~native_thread_tracks(trace)
    py = smp & others[s.track] & np.isin(s.name, _class_ids(trace, PYTHON_SAMPLE_CLASSES))
    wid = trace.strings.get(V.CLS_WAITING)
    wait = smp & crit[s.track] & (s.name == wid) if wid >= 0 else np.zeros(len(s), bool)
    wait |= (s.kind == SpanKind.OS_RUNTIME) & crit[s.track] & overlap(s.start_ns, s.end_ns, win)
    wu = union(*clip(s.start_ns[wait], s.end_ns[wait], lo, hi))
    waiting_ns = int((wu[1] - wu[0]).sum())
    pidx = np.flatnonzero(py)
    if not len(pidx):
        return None
    bin_ns = _tick_bin_ns(trace, lo, hi)
    ps, pe = clip(s.start_ns[pidx], s.end_ns[pidx], lo, hi)
    both_ns = _overlap_ns(wu, ps, pe, lo, hi, bin_ns)
    # the functions are ranked by the same matching as the totals: with per-bin matching the blocks' exact
    # intersection can be empty while the bins match (a CI run's finding named no culprit at all)
    matched = _matched_ns(wu, ps, pe, lo, hi, bin_ns)
    rows = []
    for t in np.unique(s.track[pidx]).tolist():
        sel = s.track[pidx] == t
        ti, a, b = pidx[sel], ps[sel], pe[sel]
        ov = _overlap_ns(wu, a, b, lo, hi, bin_ns)
        top = _by_function(trace, ti, wu[0], wu[1], limit=1, weight_ns=_matched_ns(wu, a, b, lo, hi, bin_ns))
        rows.append({"thread": trace.track_label(int(t)), "python_ms": float((b - a).sum()) / 1e6, "overlap_ms": ov / 1e6,
                     "function": top[0]["function"] if top else None, "file": top[0]["file"] if top else None})
    rows.sort(key=lambda r: (-r["overlap_ms"], -r["python_ms"], r["thread"]))
    # the functions over all those threads: a starved sampler can stretch one tick's function (a thread's
    # start-up helper) over 200 ms of one thread, outweighing its loop there; the loop three threads
    # share stays the largest over all of them (zoo_gil named `cpu_mark` in 1 of ~27 runs by thread)
    funcs = [{"function": r["function"], "file": r["file"], "thread": r["thread"], "overlap_ms": r["ms"],
              "threads": r["threads"]} for r in _by_function(trace, pidx, wu[0], wu[1], limit=5, by_thread=False,
                                                          weight_ns=matched)]
    win = max(1, hi - lo)
    return {"critical_waiting_ms": waiting_ns / 1e6, "waiting_while_python_ms": both_ns / 1e6,
            "pct_of_window": 100.0 * both_ns / win, "pct_of_waiting": 100.0 * both_ns / waiting_ns if waiting_ns else 0.0,
            "python_threads": len(rows), "threads": rows, "functions": funcs,
            "bin_ms": bin_ns / 1e6 if bin_ns else None,
            "basis": "the critical thread's off-CPU time while another thread of its process ran Python (sampled; matched "
                     "per bin of bin_ms, two sampler ticks, when set): an upper bound of its wait for the GIL or for those "
                     "threads' results (it may be blocked on I/O at the same time)"}


def _tick_bin_ns(trace: Trace, lo: int, hi: int) -> int:
    """Bin for matching waiting with other threads' Python: thresholds.GIL_OVERLAP_BIN_TICKS sampler tick
    intervals (live meta: the achieved steady rate); 0 (exact overlap) without a rate (imported traces)."""
    coll = trace.meta.get("collection") or {}
    rate = coll.get("cpu_sampling_hz_steady") or coll.get("cpu_sampling_hz_achieved")
    try:
        rate = float(rate)
    except (TypeError, ValueError):
        return 0
    if not rate > 0:
        return 0
    return max(int(T.GIL_OVERLAP_BIN_TICKS * 1e9 / rate), (hi - lo) // T.GIL_OVERLAP_MAX_BINS + 1)


def _overlap_ns(wu: tuple[np.ndarray, np.ndarray], ps: np.ndarray, pe: np.ndarray, lo: int, hi: int, bin_ns: int) -> int:
    """Waiting (disjoint union ``wu``) matched with Python spans (may overlap: several threads).  bin_ns 0:
    their exact intersection.  Else per bin, min(waiting, summed Python): the sampler places each thread's
    on-CPU and off-CPU parts of a tick interval as one block each (collect/sampler.py), so threads that take
    turns on the GIL inside one interval show side by side, not interleaved - the exact intersection of the
    blocks would miss most of the hand-overs (zoo_gil: 30-100 of 190-350 ms)."""
    if not bin_ns:
        pu = union(ps, pe)
        return int(overlap_with_union(wu[0], wu[1], pu[0], pu[1]).sum())
    edges = _bin_edges(lo, hi, bin_ns)
    w = np.diff(summed_until(wu[0] - lo, wu[1] - lo, edges))
    p = np.diff(summed_until(ps - lo, pe - lo, edges))
    return int(np.minimum(w, p).sum())


def _bin_edges(lo: int, hi: int, bin_ns: int) -> np.ndarray:
    """Edges of the matching bins, relative to lo; the last one clipped to hi."""
    edges = np.arange(0, hi - lo + bin_ns, bin_ns, dtype=np.int64)
    edges[-1] = min(int(edges[-1]), hi - lo)
    return edges


def _matched_ns(wu: tuple[np.ndarray, np.ndarray], ps: np.ndarray, pe: np.ndarray, lo: int, hi: int,
                bin_ns: int) -> np.ndarray:
    """Each Python span's part of _overlap_ns: its exact overlap with the waiting (bin_ns 0), else its time
    in each bin times that bin's matched fraction min(waiting, Python) / Python - the spans of a bin share
    its match in proportion to their time, and the parts sum to _overlap_ns."""
    if not len(ps):
        return np.zeros(0)
    if not bin_ns:
        return overlap_with_union(ps, pe, wu[0], wu[1]).astype(np.float64)
    edges = _bin_edges(lo, hi, bin_ns)
    w = np.diff(summed_until(wu[0] - lo, wu[1] - lo, edges)).astype(np.float64)
    p = np.diff(summed_until(ps - lo, pe - lo, edges)).astype(np.float64)
    frac = np.divide(np.minimum(w, p), p, out=np.zeros_like(p), where=p > 0)
    cum = np.concatenate(([0.0], np.cumsum(frac * np.diff(edges))))     # integral of the fraction up to each edge

    def integral(t):
        k = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, len(frac) - 1)
        return cum[k] + frac[k] * (t - edges[k])
    return np.maximum(integral(pe - lo) - integral(ps - lo), 0.0)


def _series(trace: Trace, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """(ts, value) of a cumulative counter, time-ordered, invalid samples dropped."""
    c, tk = trace.counters, trace.tracks
    mid = trace.strings.get(metric)
    if mid < 0 or not len(c):
        return np.zeros(0, np.int64), np.zeros(0)
    tracks = np.flatnonzero((tk.kind == TrackKind.COUNTER) & (tk.name == mid))
    m = np.isin(c.track, tracks) & np.isfinite(c.value) & (c.value >= 0)
    ts, v = c.ts_ns[m], c.value[m]
    o = np.argsort(ts, kind="stable")
    return ts[o], v[o]


def _kernel_by_function(trace: Trace, on: np.ndarray, fts: np.ndarray, fv: np.ndarray, lo: int, hi: int,
                        limit: int = 5) -> list[dict] | None:
    """Kernel-mode CPU of the fault-storm tick intervals charged to the sampled spans ``on`` that cover
    them: the cumulative ``proc.sys_cpu_s`` series restricted to intervals whose fault rate is a storm
    is a piecewise-linear K(t); a span gets K(end) - K(start).  None without the tick-level series."""
    kts, kv = _series(trace, KERNEL_METRIC)
    if len(kts) < 2 or len(fts) < 2:
        return None
    a, b = kts[:-1], kts[1:]
    dt = (b - a) / 1e9
    dfault = np.interp(b, fts, fv) - np.interp(a, fts, fv)
    rate = np.divide(dfault, dt, out=np.zeros_like(dfault), where=dt > 0)
    dk = np.where(rate >= T.PAGE_FAULT_STORM_PER_S, np.maximum(np.diff(kv), 0.0), 0.0)
    cum = np.concatenate(([0.0], np.cumsum(dk)))
    s = trace.spans
    idx = on[s.detail[on] >= 0]
    st = np.clip(s.start_ns[idx], lo, hi)
    en = np.clip(s.end_ns[idx], lo, hi)
    kern = (np.interp(en, kts, cum) - np.interp(st, kts, cum)) * 1e3        # ms
    keep = kern > 0
    idx, kern = idx[keep], kern[keep]
    if not len(idx):
        return []
    fkey, fnames, _ = function_keys(trace, s.detail[idx])
    key = np.stack((fkey, s.track[idx].astype(np.int64)), axis=1)
    uk, inv = np.unique(key, axis=0, return_inverse=True)
    tot = np.bincount(inv.reshape(-1), weights=kern, minlength=len(uk))
    out = []
    for j in np.argsort(-tot, kind="stable")[:limit].tolist():
        fn, f, _ = split_label(fnames[int(uk[j, 0])])
        out.append({"function": fn, "file": f, "thread": trace.track_label(int(uk[j, 1])), "kernel_ms": float(tot[j])})
    return out


def fault_storms(trace: Trace, lo: int, hi: int, crit: np.ndarray) -> dict | None:
    ts, v = _series(trace, FAULT_METRIC)
    if len(ts) < 2:
        return None
    a, b = ts[:-1], ts[1:]
    dv = np.maximum(np.diff(v), 0.0)
    dt = (b - a) / 1e9
    rate = np.divide(dv, dt, out=np.zeros_like(dv), where=dt > 0)
    win = Window(lo, hi)
    hot = (rate >= T.PAGE_FAULT_STORM_PER_S) & overlap(a, b, win)
    ha, hb = clip(a[hot], b[hot], lo, hi)
    if not len(ha):
        return {"intervals": 0, "ms": 0.0, "faults": 0, "functions": [], "rate_threshold_per_s": T.PAGE_FAULT_STORM_PER_S}
    hu = union(ha, hb)
    s = trace.spans
    wid = trace.strings.get(V.CLS_WAITING)
    on = np.flatnonzero((s.kind == SpanKind.CPU_SAMPLE) & crit[s.track] & (s.name != wid)
                        & overlap(s.start_ns, s.end_ns, win))
    out = {"intervals": int(hot.sum()), "ms": float((hu[1] - hu[0]).sum()) / 1e6, "faults": int(dv[hot].sum()),
           "functions": _by_function(trace, on, hu[0], hu[1]), "rate_threshold_per_s": T.PAGE_FAULT_STORM_PER_S}
    kf = _kernel_by_function(trace, on, ts, v, lo, hi)
    if kf:
        # tick-level kernel time: the functions ranked by the kernel time charged to them, with
        # their time in the storm intervals beside it
        ms = {(r["function"], r["file"], r["thread"]): r["ms"] for r in _by_function(trace, on, hu[0], hu[1], limit=10**6)}
        for r in kf:
            r["ms"] = ms.get((r["function"], r["file"], r["thread"]), 0.0)
        out["functions"] = kf
        out["kernel_ms"] = float(sum(r["kernel_ms"] for r in _kernel_by_function(trace, on, ts, v, lo, hi, limit=10**6)))
        out["ranked_by"] = "kernel_ms"
    return out


def contention(trace: Trace, window) -> dict | None:
    """The section: None unless the trace has sampled threads (live runs)."""
    s = trace.spans
    if not (s.kind == SpanKind.CPU_SAMPLE).any():
        return None
    lo, hi = int(window.start_ns), int(window.end_ns)
    crit, _ = critical_tracks(trace)
    return {"gil": gil_wait(trace, lo, hi, crit), "page_faults": fault_storms(trace, lo, hi, crit),
            "blocking": blocking(trace, lo, hi, crit)}
