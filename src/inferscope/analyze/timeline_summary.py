"""Binned summary of a Trace's activity over a window, for the HTML timeline strip (``result/views.py`` types;
``analyze/views.py`` computes it for report.html, ``report/html_timeline.py`` draws it).

Everything is vectorised numpy: per (lane, activity class) the union of intervals is
computed once (sort + running max), then the covered time up to every bin edge is
read off a cumulative sum with ``searchsorted``.  Cost O(n log n + lanes x bins),
independent of how the spans nest, and the output size depends only on the number of
lanes and bins (a million events summarise to the same few hundred KB as a thousand).
"""
from __future__ import annotations

import numpy as np

from ..result.base import CATEGORIES
from ..result.views import CounterLane, Lane, Mark, TimelineSummary
from ..trace.kinds import SpanKind, TrackKind
from ..trace.model import Trace
from .breakdown import segment_classes, span_categories
from .counters import CUMULATIVE, REASONS_METRIC, unit_of
from .window import Window

# Activity classes drawn in the strip: exactly the breakdown's categories, in its priority order
# (first = drawn at the bottom and allocated first when classes overlap in one bin, e.g. a sync
# call nested in an op).  A span's class is the breakdown source it is evidence for
# (breakdown.span_categories); spans that are evidence for none (markers, plain ranges) are not drawn.
# The renderer's colours and labels per class: report/html_assets.py CLASSES.


def _union_coverage(starts: np.ndarray, ends: np.ndarray, groups: np.ndarray,
                    n_groups: int, width: int, edges: np.ndarray) -> np.ndarray:
    """Covered ns per (group, bin) of the union of [start, end) intervals.

    starts/ends are relative to the window start and clipped to [0, width].
    Returns float64 [n_groups, n_bins].
    """
    nb = len(edges) - 1
    if n_groups == 0:
        return np.zeros((0, nb))
    if len(starts) == 0:
        return np.zeros((n_groups, nb))
    stride = np.int64(width) + 1
    off = groups.astype(np.int64) * stride
    s = starts + off
    e = ends + off
    o = np.argsort(s, kind="stable")
    s = s[o]
    e = e[o]
    cm = np.maximum.accumulate(e)
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > cm[:-1]
    idx = np.flatnonzero(new)
    us = s[idx]
    ue = np.maximum.reduceat(e, idx)
    cum = np.zeros(len(us) + 1, dtype=np.int64)
    np.cumsum(ue - us, out=cum[1:])
    x = (np.arange(n_groups, dtype=np.int64)[:, None] * stride + edges[None, :]).ravel()
    k = np.searchsorted(us, x, side="right")
    over = np.zeros(len(x), dtype=np.int64)
    has = k > 0
    over[has] = np.maximum(0, ue[k[has] - 1] - x[has])
    covered = (cum[k] - over).reshape(n_groups, nb + 1)
    return np.diff(covered, axis=1).astype(np.float64)


def span_classes(trace: Trace) -> np.ndarray:
    """Activity class index per span (-1 = not drawn): the breakdown's category of the span."""
    return span_categories(trace).astype(np.int16)


def partition_lane(trace: Trace, t0: int, t1: int, edges: np.ndarray) -> Lane:
    """The window partition itself, binned: per bin, the time each breakdown category owns.
    Its per-class totals are the breakdown's, to the nanosecond."""
    seg_s, seg_e, cat, _, _ = segment_classes(trace, Window(t0, t1, "strip", "range"))
    ncls = len(CATEGORIES)
    width = t1 - t0
    cov = _union_coverage(seg_s - t0, seg_e - t0, cat.astype(np.int64), ncls, width, edges)
    bin_w = np.diff(edges).astype(np.float64)
    bin_w[bin_w <= 0] = 1.0
    cum = np.round(np.cumsum(cov / bin_w[None, :], axis=0) * 100.0).astype(np.int16)
    heights = np.clip(np.diff(np.vstack([np.zeros((1, len(bin_w)), dtype=np.int16), cum]), axis=0), 0, 100).astype(np.uint8)
    dur = seg_e - seg_s
    class_ns = {CATEGORIES[c]: int(dur[cat == c].sum()) for c in range(ncls)}
    busy = sum(v for k, v in class_ns.items() if k != "other")
    return Lane(label="all (breakdown)", kind="partition", track=-1, busy_ms=busy / 1e6,
                busy_pct=100.0 * busy / width if width else 0.0, heights=heights,
                class_ms={k: v / 1e6 for k, v in class_ns.items() if v}, class_ns=class_ns)


def summarise(trace: Trace, start_ns: int | None = None, end_ns: int | None = None,
              n_bins: int = 1000, max_gpu_lanes: int = 16, max_cpu_lanes: int = 10,
              max_marks: int = 400, min_cpu_busy_pct: float = 0.5) -> TimelineSummary:
    if start_ns is None or end_ns is None:
        b0, b1 = trace.bounds_ns()
        start_ns = b0 if start_ns is None else start_ns
        end_ns = b1 if end_ns is None else end_ns
    t0 = int(start_ns)
    t1 = int(end_ns)
    if t1 <= t0:
        t1 = t0 + 1
    width = t1 - t0
    n_bins = int(max(1, min(n_bins, width)))
    edges = np.round(np.linspace(0, width, n_bins + 1)).astype(np.int64)
    bin_w = np.diff(edges).astype(np.float64)
    bin_w[bin_w <= 0] = 1.0

    s = trace.spans
    tk = trace.tracks.kind
    notes: list[str] = []
    lanes: list[Lane] = []
    hidden = 0
    if len(s):
        cls = span_classes(trace)
        inwin = (s.end_ns > t0) & (s.start_ns < t1) & (cls >= 0) & (s.end_ns > s.start_ns)
        idx = np.flatnonzero(inwin)
        st = np.clip(s.start_ns[idx], t0, t1) - t0
        en = np.clip(s.end_ns[idx], t0, t1) - t0
        tr = s.track[idx].astype(np.int64)
        cl = cls[idx].astype(np.int64)
        trk_kind = tk[tr] if len(tr) else np.zeros(0, dtype=np.uint8)
        lane_ok = np.isin(trk_kind, [int(TrackKind.GPU_STREAM), int(TrackKind.CPU_THREAD), int(TrackKind.GPU_DEVICE)])
        st, en, tr, cl = st[lane_ok], en[lane_ok], tr[lane_ok], cl[lane_ok]
        if len(tr):
            # busy time per track (union), to pick which lanes to draw
            utr, tr_inv = np.unique(tr, return_inverse=True)
            busy_cov = _union_coverage(st, en, tr_inv, len(utr), width, edges)
            busy_total = busy_cov.sum(axis=1)
            kinds_u = tk[utr]
            gpu_sel = [i for i in np.argsort(-busy_total, kind="stable") if kinds_u[i] != TrackKind.CPU_THREAD]
            cpu_sel = [i for i in np.argsort(-busy_total, kind="stable")
                       if kinds_u[i] == TrackKind.CPU_THREAD and busy_total[i] * 100.0 / width >= min_cpu_busy_pct]
            n_cpu_all = int(np.sum(kinds_u == TrackKind.CPU_THREAD))
            hidden = max(0, len(gpu_sel) - max_gpu_lanes) + max(0, n_cpu_all - min(len(cpu_sel), max_cpu_lanes))
            gpu_sel = sorted(gpu_sel[:max_gpu_lanes], key=lambda i: (int(trace.tracks.device[utr[i]]), int(trace.tracks.tid[utr[i]])))
            cpu_sel = sorted(cpu_sel[:max_cpu_lanes], key=lambda i: (int(trace.tracks.pid[utr[i]]), int(trace.tracks.tid[utr[i]])))
            chosen = gpu_sel + cpu_sel
            if chosen:
                lane_of_u = np.full(len(utr), -1, dtype=np.int64)
                lane_of_u[np.asarray(chosen, dtype=np.int64)] = np.arange(len(chosen))
                lane = lane_of_u[tr_inv]
                keep = lane >= 0
                ncls = len(CATEGORIES)
                grp = lane[keep] * ncls + cl[keep]
                cov = _union_coverage(st[keep], en[keep], grp, len(chosen) * ncls, width, edges)
                cov = cov.reshape(len(chosen), ncls, n_bins)
                for li, ui in enumerate(chosen):
                    busy_f = np.clip(busy_cov[ui] / bin_w, 0.0, 1.0)
                    frac = np.clip(cov[li] / bin_w[None, :], 0.0, 1.0)
                    # allocate classes in priority order so the stack never exceeds the busy fraction
                    alloc = np.zeros_like(frac)
                    remaining = busy_f.copy()
                    for c in range(ncls):
                        a = np.minimum(frac[c], remaining)
                        alloc[c] = a
                        remaining -= a
                    cum = np.round(np.cumsum(alloc, axis=0) * 100.0).astype(np.int16)
                    heights = np.diff(np.vstack([np.zeros((1, n_bins), dtype=np.int16), cum]), axis=0)
                    heights = np.clip(heights, 0, 100).astype(np.uint8)
                    t = int(utr[ui])
                    kind = "cpu" if tk[t] == TrackKind.CPU_THREAD else "gpu"
                    bms = float(busy_total[ui]) / 1e6
                    class_ms = {CATEGORIES[c]: float((alloc[c] * bin_w).sum()) / 1e6
                                for c in range(ncls) if alloc[c].any()}
                    lanes.append(Lane(label=trace.track_label(t), kind=kind, track=t, busy_ms=bms,
                                      busy_pct=100.0 * float(busy_total[ui]) / width, heights=heights,
                                      class_ms=class_ms))
    if hidden:
        notes.append(f"{hidden} less busy track(s) not drawn")

    # ---- markers: steps and top-level annotations ----
    marks: list[Mark] = []
    if len(s):
        for kind_enum, mkind in ((SpanKind.STEP, "step"), (SpanKind.ANNOTATION, "annotation")):
            m = (s.kind == int(kind_enum)) & (s.end_ns > t0) & (s.start_ns < t1) & (s.end_ns > s.start_ns)
            ii = np.flatnonzero(m)
            if mkind == "annotation" and len(ii):
                # outermost annotations only (not nested in another annotation/step), longest first
                par = s.parent[ii]
                outer = (par < 0) | (s.kind[np.maximum(par, 0)] != int(SpanKind.ANNOTATION))
                ii = ii[outer]
                min_len = width / (n_bins * 2.0)
                ii = ii[(s.end_ns[ii] - s.start_ns[ii]) >= min_len]
            if len(ii) > max_marks:
                dur = s.end_ns[ii] - s.start_ns[ii]
                ii = np.sort(ii[np.argsort(-dur, kind="stable")[:max_marks]])
                notes.append(f"only the {max_marks} longest {mkind} ranges are marked")
            names = trace.names(ii) if len(ii) else []
            for j, i in enumerate(ii.tolist()):
                marks.append(Mark(label=names[j], kind=mkind, start_ns=int(s.start_ns[i]), end_ns=int(s.end_ns[i])))

    # ---- counters (NVML first, then CPU, process, per core) averaged per bin ----
    counters = counter_lanes(trace, t0, t1, edges, n_bins, notes)

    return TimelineSummary(t0=t0, t1=t1, n_bins=n_bins, edges=edges, lanes=lanes, counters=counters,
                           marks=marks, hidden_lanes=hidden, notes=notes,
                           partition=partition_lane(trace, t0, t1, edges) if len(s) else None)


MAX_CORE_LANES = 16


def _counter_order(metric: str, device: int) -> tuple:
    core = metric.startswith("cpu.core")
    return (0 if metric.startswith("gpu.") else 3 if core else 1 if metric.startswith("cpu.") else 2, device,
            int(metric[8:].split(".")[0]) if core and metric[8:].split(".")[0].isdigit() else 0, metric)


def counter_lanes(trace, t0: int, t1: int, edges: np.ndarray, n_bins: int, notes: list) -> list:
    """One lane per counter track, GPU counters first; cumulative counters (page faults, context
    switches) drawn as rates; the clock-event reason bitmask is drawn as the throttling band instead;
    per-core CPU lanes after the first MAX_CORE_LANES are counted in a note."""
    c = trace.counters
    out: list[CounterLane] = []
    if not len(c):
        return out
    tracks = []
    for t in np.unique(c.track).tolist():
        nid = int(trace.tracks.name[t])
        metric = trace.strings[nid] if nid >= 0 else trace.track_label(int(t))
        if metric == REASONS_METRIC:
            continue
        tracks.append((_counter_order(metric, int(trace.tracks.device[t])), t, metric))
    tracks.sort()
    cores_drawn = cores_hidden = 0
    for _, t, metric in tracks:
        if metric.startswith("cpu.core"):
            if cores_drawn >= MAX_CORE_LANES:
                cores_hidden += 1
                continue
        m = c.track == t
        ts, v = c.ts_ns[m], c.value[m]
        if metric in CUMULATIVE:
            o = np.argsort(ts, kind="stable")
            ts, v = ts[o], v[o]
            dt = np.diff(ts) / 1e9
            with np.errstate(divide="ignore", invalid="ignore"):
                v = np.diff(v) / dt
            ts = ts[1:]
            metric = CUMULATIVE[metric]
        sel = (ts >= t0) & (ts <= t1) & np.isfinite(v) & (v >= 0)
        ts, v = ts[sel], v[sel]
        if len(v) == 0:
            continue
        b = np.clip(np.searchsorted(edges, ts - t0, side="right") - 1, 0, n_bins - 1)
        cnt = np.bincount(b, minlength=n_bins)
        sm = np.bincount(b, weights=v, minlength=n_bins)
        has = np.flatnonzero(cnt)
        vals = sm[has] / cnt[has]
        dev = int(trace.tracks.device[t])
        label = f"GPU{dev} {metric[4:]}" if metric.startswith("gpu.") and dev >= 0 else metric
        out.append(CounterLane(label=label, unit_max=float(vals.max()), bins=has, values=vals, vmin=float(vals.min()),
                               vmax=float(vals.max()), unit=unit_of(metric), mean=float(v.mean())))
        if metric.startswith("cpu.core"):
            cores_drawn += 1
    if cores_hidden:
        notes.append(f"{cores_hidden} per-core CPU counter(s) not drawn (first {MAX_CORE_LANES} shown; all in the counters_cores table)")
    return out
