"""Culprit tables: the Python functions, framework ops and runtime/driver API calls that hold the
window's time, by name, so a finding can say *what* to change.

- functions: the live sampler's function of every tick (CPU_SAMPLE ``detail``, "file:func:line", one
  function per run: sampled self time and sampler ticks, by class and thread; ``file`` is "path:line",
  the line with the most sampled time - analyze/sample_labels.py), and Python frames a profiler recorded (PYTHON spans,
  Kineto with_stack: self time = the frame minus its recorded children, total = the whole frame);
- ops: CPU ops (aten::...): self time (minus child ops), total, calls, and the GPU time of the
  kernels/copies launched from inside them (launch flows, attributed to the innermost op), and the most
  frequent recorded input shapes (record_shapes; analyze/op_shapes.py);
- apis: CUDA/HIP runtime and driver calls by base name (``_v3020`` suffixes dropped; kind ``cuda``)
  and OS runtime calls (nsys OSRT: poll, read, pthread_cond_wait ...; kind ``os``): count, total
  (summed over threads), p50, max.
Every time is clipped to the window; shares are of the window.  The tables hold every row
(tables/*.csv); ``result['culprits']`` keeps the top ``top_n`` of each.
"""
from __future__ import annotations

import numpy as np

from .. import classes as CL
from ..trace.kinds import SpanKind
from ..trace.model import Trace, codes_in
from .breakdown import python_self_intervals
from .launched import by_owner, launched_gpu
from .op_shapes import shapes_by_name
from .sample_labels import function_keys, sample_counts, split_label, top_line
from .select import clipped_durations, in_window
from .stats import fast_unique, grouped_stats

_DOMAIN = CL.DOMAIN_NAMES


def _functions(trace: Trace, window, win_ns: int) -> list[dict]:
    s = trace.spans
    rows: list[dict] = []
    smp = in_window(trace, (s.kind == SpanKind.CPU_SAMPLE) & (s.detail >= 0), window)
    if len(smp):
        d = clipped_durations(trace, smp, window).astype(np.float64)
        fkey, fnames, line = function_keys(trace, s.detail[smp])
        ticks = sample_counts(trace, smp)
        # key: (function, class, thread); the line shown is the one with the most sampled time
        key = np.stack((fkey, s.name[smp].astype(np.int64), s.track[smp].astype(np.int64)), axis=1)
        uk, inv = np.unique(key, axis=0, return_inverse=True)
        inv = inv.reshape(-1)
        tot = np.bincount(inv, weights=d, minlength=len(uk))
        cnt = np.bincount(inv, weights=ticks, minlength=len(uk))
        lines = top_line(inv, line, d, len(uk))
        for j in range(len(uk)):
            fn, f, _ = split_label(fnames[int(uk[j, 0])])
            if f and lines[j] >= 0:
                f = f"{f}:{int(lines[j])}"
            rows.append({"function": fn, "file": f, "class": trace.strings[int(uk[j, 1])],
                         "thread": trace.track_label(int(uk[j, 2])), "self_ms": tot[j] / 1e6, "total_ms": None,
                         "samples": int(cnt[j]), "calls": None, "source": "sampler (function of each tick)"})
    py = s.kind == SpanKind.PYTHON
    if py.any():
        pst, pen, powner = python_self_intervals(trace)
        a, b = np.maximum(pst, window.start_ns), np.minimum(pen, window.end_ns)
        ok = b > a
        sid = s.name[powner[ok]]
        self_ns = (b - a)[ok].astype(np.float64)
        idx = in_window(trace, py, window)
        tot = clipped_durations(trace, idx, window).astype(np.float64)
        names = np.concatenate((sid, s.name[idx]))
        uk, inv = fast_unique(names, return_inverse=True)
        n1 = len(sid)
        self_sum = np.bincount(inv[:n1], weights=self_ns, minlength=len(uk))
        tot_sum = np.bincount(inv[n1:], weights=tot, minlength=len(uk))
        calls = np.bincount(inv[n1:], minlength=len(uk))
        for j, k in enumerate(uk.tolist()):
            label = trace.strings[int(k)]
            m = CL._FRAME.match(label)
            if m and m.group("line"):
                fn, f = m.group("func"), f"{m.group('path')}:{m.group('line')}"
            else:
                fn, f = label, ""
            rows.append({"function": fn, "file": f, "class": _DOMAIN[CL.recorded_frame_domain(label)], "thread": "",
                         "self_ms": self_sum[j] / 1e6, "total_ms": tot_sum[j] / 1e6, "samples": None,
                         "calls": int(calls[j]), "source": "profiler Python frames (self = frame minus recorded children)"})
    for r in rows:
        r["self_pct"] = 100.0 * r["self_ms"] * 1e6 / win_ns if win_ns else 0.0
    rows.sort(key=lambda r: (-r["self_ms"], r["function"]))
    return [r for r in rows if r["self_ms"] > 0 or (r["total_ms"] or 0) > 0]


def _innermost_op(trace: Trace, idx: np.ndarray) -> np.ndarray:
    """For spans idx, the innermost enclosing CPU_OP (by the parent chain), -1 for none."""
    s = trace.spans
    cur = s.parent[idx].astype(np.int64)
    out = np.full(len(idx), -1, dtype=np.int64)
    for _ in range(int(s.depth.max()) + 1 if len(s) else 0):
        live = (cur >= 0) & (out < 0)
        if not live.any():
            break
        isop = np.zeros(len(idx), dtype=bool)
        isop[live] = s.kind[cur[live]] == SpanKind.CPU_OP
        out[isop] = cur[isop]
        nxt = np.full(len(idx), -1, dtype=np.int64)
        nxt[live] = s.parent[cur[live]]
        cur = nxt
    return out


def _ops(trace: Trace, window, win_ns: int) -> list[dict]:
    s = trace.spans
    op_mask = s.kind == SpanKind.CPU_OP
    idx = in_window(trace, op_mask, window)
    if len(idx) == 0:
        return []
    tot = clipped_durations(trace, idx, window).astype(np.int64)
    # self = op minus its child ops (clipped to the window)
    par = s.parent.astype(np.int64)
    kids = np.flatnonzero(op_mask & (par >= 0))
    kids = kids[s.kind[np.maximum(par[kids], 0)] == SpanKind.CPU_OP]
    child_ns = np.zeros(len(s), dtype=np.int64)
    if len(kids):
        np.add.at(child_ns, par[kids], clipped_durations(trace, kids, window).astype(np.int64))
    self_ns = np.maximum(tot - child_ns[idx], 0)
    # GPU time of the work each op launched (launch flows: API call -> GPU activity)
    dev_ns = np.zeros(len(s), dtype=np.int64)
    lg = launched_gpu(trace, window, select="overlaps")
    launched = lg.launcher >= 0
    if launched.any():
        owner = np.full(len(lg.gpu), -1, dtype=np.int64)
        owner[launched] = _innermost_op(trace, lg.launcher[launched])
        dev_ns = by_owner(owner, lg.clipped_ns, len(s))
    names = s.name[idx]
    uk, inv, cnt = fast_unique(names, return_inverse=True, return_counts=True)
    self_sum = np.bincount(inv, weights=self_ns.astype(np.float64), minlength=len(uk))
    tot_sum = np.bincount(inv, weights=tot.astype(np.float64), minlength=len(uk))
    dev_sum = np.bincount(inv, weights=dev_ns[idx].astype(np.float64), minlength=len(uk))
    shp = shapes_by_name(trace, idx)
    rows = [{"name": trace.strings[int(k)], "calls": int(c), "self_ms": a / 1e6, "total_ms": t / 1e6,
             "device_ms": d / 1e6, "self_pct": 100.0 * a / win_ns if win_ns else 0.0, "shapes": shp.get(int(k), "")}
            for k, c, a, t, d in zip(uk.tolist(), cnt.tolist(), self_sum.tolist(), tot_sum.tolist(), dev_sum.tolist())]
    rows.sort(key=lambda r: (-r["self_ms"], r["name"]))
    return rows


def _apis(trace: Trace, window, win_ns: int) -> list[dict]:
    s = trace.spans
    idx = in_window(trace, codes_in(s.kind, [SpanKind.RUNTIME, SpanKind.DRIVER, SpanKind.OS_RUNTIME]), window)
    if len(idx) == 0:
        return []
    d = clipped_durations(trace, idx, window).astype(np.int64)
    is_os = s.kind[idx] == SpanKind.OS_RUNTIME
    # base name per distinct string id, then group
    uniq = fast_unique(s.name[idx])
    bmap = {}
    for sid in uniq.tolist():
        bmap[sid] = CL.api_base_name(trace.strings[int(sid)])
    bnames = sorted(set(bmap.values()))
    bidx = {b: i for i, b in enumerate(bnames)}
    lut = np.zeros(int(uniq.max()) + 1, dtype=np.int64)
    for sid, b in bmap.items():
        lut[sid] = bidx[b]
    key = lut[s.name[idx]] * 2 + is_os      # an OS call and a CUDA call never share a row
    g = grouped_stats(key, d, percentiles=(50,))
    rows = [{"name": bnames[int(k) // 2], "kind": "os" if k % 2 else "cuda", "calls": int(c), "total_ms": t / 1e6,
             "p50_us": p / 1e3, "max_us": mx / 1e3, "pct_of_window": 100.0 * t / win_ns if win_ns else 0.0}
            for k, c, t, p, mx in zip(g["key"].tolist(), g["count"].tolist(), g["sum"].tolist(), g["p50"].tolist(), g["max"].tolist())]
    rows.sort(key=lambda r: (-r["total_ms"], r["name"]))
    return rows


def culprits(trace: Trace, window, top_n: int = 20) -> dict:
    win_ns = int(window.dur_ns)
    fn, ops, apis = _functions(trace, window, win_ns), _ops(trace, window, win_ns), _apis(trace, window, win_ns)
    tables = {}
    if fn:
        tables["top_python_functions"] = {
            "columns": ["function", "file", "class", "thread", "self_ms", "self_pct", "total_ms", "samples", "calls", "source"],
            "rows": [[r["function"], r["file"], r["class"], r["thread"], round(r["self_ms"], 6), round(r["self_pct"], 4),
                      None if r["total_ms"] is None else round(r["total_ms"], 6), r["samples"], r["calls"], r["source"]]
                     for r in fn]}
    if ops:
        tables["top_ops"] = {"columns": ["op", "calls", "self_ms", "self_pct", "total_ms", "device_ms", "shapes"],
                             "rows": [[r["name"], r["calls"], round(r["self_ms"], 6), round(r["self_pct"], 4),
                                       round(r["total_ms"], 6), round(r["device_ms"], 6), r["shapes"]] for r in ops]}
    if apis:
        tables["top_apis"] = {"columns": ["api", "kind", "calls", "total_ms", "pct_of_window", "p50_us", "max_us"],
                              "rows": [[r["name"], r["kind"], r["calls"], round(r["total_ms"], 6), round(r["pct_of_window"], 4),
                                        round(r["p50_us"], 3), round(r["max_us"], 3)] for r in apis]}
    return {"functions": fn[:top_n], "ops": ops[:top_n], "apis": apis[:top_n],
            "counts": {"functions": len(fn), "ops": len(ops), "apis": len(apis)}, "tables": tables}
