"""Phases: per ProfilerStep and per user range (record_function / NVTX / scope()).

Wall time is host time.  GPU time is attributed through correlation: a GPU activity
belongs to a range when the host call that launched it started inside the range on the
same thread.  Nested ranges each get their launches (inclusive).  Coverage is the share
of all GPU work time in the window whose launch falls inside at least one range.
"""
from __future__ import annotations

import numpy as np

from .stats import fast_unique

from ..trace.kinds import SpanKind
from ..trace.model import Trace
from .classify import gpu_work_mask
from .intervals import union
from .links import launchers_for
from .window import Window

DEFAULT_PHASE_MAP = {"prefill": ["prefill", "prompt"], "decode": ["decode", "generation", "generate_step"],
                     "sampling": ["sampling", "sample"]}


def _launch_table(trace: Trace, window: Window):
    s = trace.spans
    g = gpu_work_mask(trace) & (s.start_ns >= window.start_ns) & (s.start_ns < window.end_ns)
    gi = np.flatnonzero(g)
    src = launchers_for(trace, gi)
    dur = (s.end_ns[gi] - s.start_ns[gi]).astype(np.int64)
    total_gpu = int(dur.sum())
    ok = src >= 0
    src, dur = src[ok], dur[ok]
    ltrack = s.track[src]
    lstart = s.start_ns[src]
    o = np.lexsort((lstart, ltrack))
    return ltrack[o], lstart[o], dur[o], total_gpu


def map_phase(name: str, phase_map: dict[str, list[str]]) -> str | None:
    low = name.lower()
    for phase, pats in phase_map.items():
        for p in pats:
            if p.lower() in low:
                return phase
    return None


def phases(trace: Trace, window: Window, phase_map: dict | None = None, max_steps: int = 100) -> dict:
    s = trace.spans
    lo, hi = window.start_ns, window.end_ns
    rng = np.isin(s.kind, [SpanKind.STEP, SpanKind.ANNOTATION]) & (s.end_ns > lo) & (s.start_ns < hi) & (s.end_ns > s.start_ns)
    ridx = np.flatnonzero(rng)
    ltrack, lstart, ldur, total_gpu = _launch_table(trace, window)
    cum = np.concatenate(([0], np.cumsum(ldur)))
    attributed = np.zeros(len(ridx), dtype=np.int64)
    covered_mask = np.zeros(len(ldur), dtype=bool)
    if len(ridx) and len(ldur):
        rt = s.track[ridx]
        for t in fast_unique(rt).tolist():
            a = np.searchsorted(ltrack, t, side="left")
            b = np.searchsorted(ltrack, t, side="right")
            if a == b:
                continue
            ls = lstart[a:b]
            sel = np.flatnonzero(rt == t)
            i0 = a + np.searchsorted(ls, s.start_ns[ridx[sel]], side="left")
            i1 = a + np.searchsorted(ls, s.end_ns[ridx[sel]], side="left")
            attributed[sel] = cum[i1] - cum[i0]
            us, ue = union(s.start_ns[ridx[sel]], s.end_ns[ridx[sel]])
            k = np.searchsorted(us, ls, side="right") - 1
            inside = (k >= 0) & (ls < ue[np.maximum(k, 0)])
            covered_mask[a:b] |= inside
    coverage = float(ldur[covered_mask].sum()) / total_gpu if total_gpu else None
    names = trace.names(ridx)
    wall = (np.minimum(s.end_ns[ridx], hi) - np.maximum(s.start_ns[ridx], lo)).astype(np.int64)
    steps = []
    by_name: dict[str, list] = {}
    for j, i in enumerate(ridx.tolist()):
        nm = names[j]
        if s.kind[i] == SpanKind.STEP and len(steps) < max_steps:
            steps.append({"name": nm, "start_ms": (int(s.start_ns[i]) - lo) / 1e6, "wall_ms": int(wall[j]) / 1e6,
                          "gpu_ms": int(attributed[j]) / 1e6})
        if s.kind[i] == SpanKind.ANNOTATION:
            r = by_name.setdefault(nm, [0, 0, 0, 0])
            r[0] += 1
            r[1] += int(wall[j])
            r[2] += int(attributed[j])
            r[3] = max(r[3], int(wall[j]))
    ranges = [{"name": k, "count": v[0], "wall_ms": v[1] / 1e6, "mean_ms": v[1] / v[0] / 1e6, "max_ms": v[3] / 1e6,
               "gpu_ms": v[2] / 1e6} for k, v in sorted(by_name.items(), key=lambda kv: -kv[1][1])]
    used_map = phase_map or DEFAULT_PHASE_MAP
    per_phase: dict[str, list] = {}
    for r in ranges:
        ph = map_phase(r["name"], used_map)
        if ph is None:
            continue
        p = per_phase.setdefault(ph, [0, 0.0, 0.0, []])
        p[0] += r["count"]
        p[1] += r["wall_ms"]
        p[2] += r["gpu_ms"]
        p[3].append(r["name"])
    phase_rows = [{"phase": k, "ranges": v[0], "wall_ms": v[1], "gpu_ms": v[2], "names": v[3][:10]}
                  for k, v in per_phase.items()]
    return {
        "steps": steps, "step_count": int((s.kind[ridx] == SpanKind.STEP).sum()),
        "ranges": ranges, "phase_map_source": "user" if phase_map else "default",
        "phase_map": used_map, "phases": phase_rows,
        "gpu_attribution_coverage_pct": None if coverage is None else 100.0 * coverage,
        "rule": "GPU time attributed to a range when its launching host call started inside the range on the same thread",
    }


def phase_tables(ph: dict) -> dict:
    t = {}
    if ph.get("steps"):
        t["steps"] = {"columns": ["step", "start_ms", "wall_ms", "gpu_ms"],
                      "rows": [[r["name"], round(r["start_ms"], 6), round(r["wall_ms"], 6), round(r["gpu_ms"], 6)] for r in ph["steps"]]}
    if ph.get("ranges"):
        t["ranges"] = {"columns": ["range", "count", "wall_ms", "mean_ms", "max_ms", "gpu_ms"],
                       "rows": [[r["name"], r["count"], round(r["wall_ms"], 6), round(r["mean_ms"], 6), round(r["max_ms"], 6),
                                 round(r["gpu_ms"], 6)] for r in ph["ranges"][:200]]}
    if ph.get("phases"):
        t["phases"] = {"columns": ["phase", "ranges", "wall_ms", "gpu_ms"],
                       "rows": [[r["phase"], r["ranges"], round(r["wall_ms"], 6), round(r["gpu_ms"], 6)] for r in ph["phases"]]}
    return t
