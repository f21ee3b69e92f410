"""Idle-gap attribution per GPU stream (after HTA's idle-time breakdown).

For consecutive GPU activities a, b on one stream with a gap g = b.start - a.end > 0:
  kernel_wait  g <= thresholds.IDLE_GAP_MIN_NS: back-to-back launch latency
  host_wait    b's launching host call started at or after a ended: the queue was empty,
               the GPU waited for the host to issue work
  other        b was already issued before a ended yet started later (cross-stream
               dependency, event wait), or b has no known launcher
Per-stream gap times are stream-time: ``by_class_stream_ms`` sums them over every stream, so it
can exceed the window (6 streams idle together for 1 s count 6 s).  Window (wall) time is the
device-wide view: ``device_gap_ms`` (no activity on any stream).
Also: the gap-size distribution and the largest device-wide idle gaps (no activity on
any stream) with what the host was doing meanwhile.
"""
from __future__ import annotations

import numpy as np

from .select import overlap
from .stats import fast_unique

from .. import thresholds
from ..trace.kinds import SpanKind, TrackKind
from ..trace.model import Trace
from .classify import gpu_work_mask
from .intervals import clip, gaps, union
from .links import launchers_for
from .window import Window

BUCKETS_US = (10, 100, 1_000, 10_000)
BUCKET_LABELS = ("<10us", "10-100us", "100us-1ms", "1-10ms", ">=10ms")


def _host_index(trace: Trace):
    s = trace.spans
    host = (trace.tracks.kind[s.track] == TrackKind.CPU_THREAD) & (s.kind != SpanKind.STEP) & (s.kind != SpanKind.MARK)
    hidx = np.flatnonzero(host)  # ascending start (spans are start-sorted)
    max_dur = int((s.end_ns[hidx] - s.start_ns[hidx]).max()) if len(hidx) else 0
    return hidx, s.start_ns[hidx], max_dur


def _host_activity(trace: Trace, a: int, b: int, hostix=None) -> dict:
    """What the host threads were doing in [a, b): the innermost host span covering most of it."""
    s = trace.spans
    hidx, hstart, max_dur = hostix if hostix is not None else _host_index(trace)
    i0 = np.searchsorted(hstart, a - max_dur, side="left")
    i1 = np.searchsorted(hstart, b, side="left")
    sub = hidx[i0:i1]
    idx = sub[s.end_ns[sub] > a]
    if len(idx) == 0:
        return {"host": "nothing recorded on the host", "host_kind": None, "host_overlap_pct": 0.0}
    ov = np.minimum(s.end_ns[idx], b) - np.maximum(s.start_ns[idx], a)
    g = max(1, b - a)
    frac = ov / g
    major = frac >= 0.5
    if major.any():
        sel = idx[major]
        best = sel[np.argmax(s.depth[sel].astype(np.int64) * 10**6 + (ov[major] * 10**6 // g))]
    else:
        best = idx[np.argmax(ov)]
    chain = []
    p = int(s.parent[best])
    steps = 0
    while 0 <= p < len(s) and len(chain) < 2 and steps < 256:   # bounded even if parents were to cycle
        if s.kind[p] in (SpanKind.CPU_OP, SpanKind.ANNOTATION, SpanKind.PYTHON):
            chain.append(trace.name_of(p))
        p = int(s.parent[p])
        steps += 1
    i = int(np.flatnonzero(idx == best)[0])
    return {"host": trace.name_of(int(best)), "host_kind": SpanKind(int(s.kind[best])).name.lower(),
            "host_overlap_pct": round(100.0 * float(frac[i]), 1),
            "host_within": chain}


def device_gaps(trace: Trace, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """Device-wide idle gaps in [lo, hi): no GPU activity (kernel, graph, copy, memset) on any stream,
    between the first and the last activity in the window; (starts, ends) int64 ns, in time order.
    The one rule for ``idle_gaps.largest`` / ``device_gaps`` and ``tables/gpu_idle_gaps.csv``."""
    s = trace.spans
    gw = gpu_work_mask(trace)   # start-sorted, so the union needs no sort
    us, ue = union(*clip(s.start_ns[gw], s.end_ns[gw], lo, hi))
    del gw
    if not len(us):
        return us, ue
    return gaps(us, ue, int(us[0]), int(ue[-1]))


def largest_first(ds: np.ndarray, de: np.ndarray) -> np.ndarray:
    """Order of the gaps, longest first (ties: the earlier first)."""
    return np.argsort(ds - de, kind="stable")


def idle_gaps(trace: Trace, window: Window, top_n: int = 10) -> dict:
    s = trace.spans
    m = gpu_work_mask(trace)
    lo, hi = window.start_ns, window.end_ns
    m &= overlap(s.start_ns, s.end_ns, window)
    out = {"per_stream": [], "by_class_stream_ms": {"host_wait": 0.0, "kernel_wait": 0.0, "other": 0.0}, "streams": 0,
           "distribution": [], "largest": [], "rule": __doc__.strip().splitlines()[0]}
    if not m.any():
        return out
    idx = np.flatnonzero(m)
    del m
    tr = s.track[idx]
    o = np.argsort(tr, kind="stable")  # spans are start-sorted: stable by track keeps start order
    idx = idx[o]
    tr = tr[o]
    del o
    st = s.start_ns[idx]
    cm = s.end_ns[idx]
    # running max of end within a stream (activities on one stream can overlap in traces)
    same = tr[1:] == tr[:-1]
    bounds = np.concatenate(([0], np.flatnonzero(~same) + 1, [len(idx)]))
    for b0, b1 in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        np.maximum.accumulate(cm[b0:b1], out=cm[b0:b1])
    gap = st[1:] - cm[:-1]          # gap before activity i+1
    del st
    same &= gap > 0
    gi = np.flatnonzero(same)       # activity gi + 1 follows a gap (in place below: one index array alive)
    del same
    g_ns = gap[gi]
    g_prev_end = cm[gi]
    del gap, cm
    gi += 1
    gtr = tr[gi]
    streams = fast_unique(tr)
    del tr
    nxt = idx[gi]
    del idx, gi
    lsrc = launchers_for(trace, nxt)
    del nxt
    host_wait = lsrc >= 0
    np.maximum(lsrc, 0, out=lsrc)
    launch_start = s.start_ns[lsrc]
    del lsrc
    host_wait &= launch_start >= g_prev_end     # b's launching call started after a ended
    del launch_start, g_prev_end
    cls = np.full(len(g_ns), 2, dtype=np.int8)  # other
    cls[host_wait] = 0  # host_wait
    del host_wait
    cls[g_ns <= thresholds.IDLE_GAP_MIN_NS] = 1  # kernel_wait
    names = ("host_wait", "kernel_wait", "other")
    for c in range(3):
        out["by_class_stream_ms"][names[c]] = float(g_ns[cls == c].sum()) / 1e6
    out["streams"] = int(len(streams))
    for t in streams.tolist():
        mt = gtr == t
        out["per_stream"].append({
            "track": int(t), "stream": trace.track_label(int(t)),
            "device": int(trace.tracks.device[t]), "stream_id": int(trace.tracks.tid[t]),
            "gaps": int(mt.sum()), "idle_ms": float(g_ns[mt].sum()) / 1e6,
            **{f"{names[c]}_ms": float(g_ns[mt & (cls == c)].sum()) / 1e6 for c in range(3)},
        })
    edges = np.array(BUCKETS_US, dtype=np.int64) * 1000
    b = np.searchsorted(edges, g_ns, side="right")
    for i, lab in enumerate(BUCKET_LABELS):
        mb = b == i
        out["distribution"].append({"bucket": lab, "count": int(mb.sum()), "stream_ms": float(g_ns[mb].sum()) / 1e6})
    # device-wide gaps: no GPU activity on any stream
    del g_ns, gtr, cls, b, mb
    ds, de = device_gaps(trace, lo, hi)
    dl = de - ds
    top = largest_first(ds, de)[:top_n]
    hostix = _host_index(trace)
    for j in top.tolist():
        a, bb = int(ds[j]), int(de[j])
        row = {"start_ns": a, "end_ns": bb, "ms": (bb - a) / 1e6,
               "offset_ms": (a - lo) / 1e6}
        row.update(_host_activity(trace, a, bb, hostix))
        out["largest"].append(row)
    out["device_gaps"] = int(len(dl))
    out["device_gap_ms"] = float(dl.sum()) / 1e6
    return out
