"""One-off host calls: single API calls or ops so long they are start-up work, not inference,
and (live runs) sampled time spent importing Python modules.

CUDA context creation (first runtime call), lazy kernel-module loading (first launch of a
kernel), cuDNN/cuBLAS handle creation and autotuning show up as one call of seconds.
A window that contains them describes start-up, not steady state.
"""
from __future__ import annotations

import numpy as np


from .. import thresholds as T
from .. import vocab as V
from ..trace.kinds import SpanKind
from ..trace.model import Trace
from .intervals import clip, total
from .select import overlap, starts_inside
from .threads import child_process_tracks
from .run_phases import imports_end
from .startup_calls import startup_calls
from .window import Window
from .steady import step_spans
from .window import SCOPE_CAT, is_request


def one_off_host_calls(trace: Trace, window: Window, top_n: int = 5) -> dict:
    """Start-up calls inside the window, by the one start-up rule (startup_calls.startup_calls), and the
    sampled module imports that run_phases' imports rule counts as start-up.  The steady window
    run_phases cuts holds none of either by construction."""
    s = trace.spans
    lo, hi = window.start_ns, window.end_ns
    win = window.dur_ns
    if win <= 0:
        return {"calls": [], "union_ms": 0.0, "union_pct": 0.0}
    min_ns = max(T.ONE_OFF_CALL_MIN_MS * 1e6, win * T.ONE_OFF_CALL_MIN_PCT / 100.0)
    dur = np.minimum(s.end_ns, hi) - np.maximum(s.start_ns, lo)
    cand = startup_calls(trace, lo, hi)
    # innermost first: drop a span when a chosen descendant covers most of it
    cand = cand[np.argsort(-s.depth[cand].astype(np.int64), kind="stable")]
    chosen: list[int] = []
    for i in cand.tolist():
        covered = any(s.track[j] == s.track[i] and s.start_ns[j] >= s.start_ns[i] and s.end_ns[j] <= s.end_ns[i]
                      and dur[j] >= T.ONE_OFF_NESTED_COVER_FRACTION * dur[i] for j in chosen)
        if not covered:
            chosen.append(i)
    chosen.sort(key=lambda i: -int(dur[i]))
    calls = [{"name": trace.name_of(i), "kind": SpanKind(int(s.kind[i])).name.lower(), "ms": int(dur[i]) / 1e6,
              "offset_ms": (int(s.start_ns[i]) - lo) / 1e6, "pct_of_window": 100.0 * int(dur[i]) / win}
             for i in chosen[:top_n]]
    a_parts, b_parts = [s.start_ns[chosen]], [s.end_ns[chosen]]
    # live runs: sampled time inside the import machinery (detail "import <module>") is start-up too
    imp = _import_samples(trace)
    ie = imports_end(trace)
    imp &= s.end_ns <= (ie if ie is not None else np.iinfo(np.int64).min)
    if imp.any():
        ia, ib = clip(s.start_ns[imp], s.end_ns[imp], lo, hi)
        it = total(ia, ib)
        if it >= min_ns:
            calls.insert(0, {"name": "Python module imports (sampled)", "kind": "cpu_sample", "ms": it / 1e6,
                             "offset_ms": (int(ia.min()) - lo) / 1e6 if len(ia) else 0.0,
                             "pct_of_window": 100.0 * it / win})
            a_parts.append(ia)
            b_parts.append(ib)
            chosen.append(-1)
    lead = lead_in(trace, window, min_ns)
    if lead is not None:
        calls.append({"name": f"work before the first {lead['unit']} (start-up: loading, warm-up)", "kind": "lead_in",
                      "ms": lead["ms"], "offset_ms": 0.0, "pct_of_window": 100.0 * lead["ms"] * 1e6 / win})
        calls.sort(key=lambda c: -c["ms"])
        calls = calls[:top_n]
        a_parts.append(np.asarray([lo], np.int64))
        b_parts.append(np.asarray([lead["end_ns"]], np.int64))
        chosen.append(-2)
    if chosen:
        a, b = clip(np.concatenate(a_parts), np.concatenate(b_parts), lo, hi)
        u = total(a, b)
    else:
        u = 0
    return {"calls": calls, "count": len(chosen), "union_ms": u / 1e6, "union_pct": 100.0 * u / win,
            "threshold_ms": min_ns / 1e6}


def lead_in(trace: Trace, window: Window, min_ns: float) -> dict | None:
    """The stretch from the window's start to its first step or request, when it is start-up: the window holds
    >= 2 of them, the stretch is >= STARTUP_LEAD_IN_FACTOR x their median start-to-start period and >= min_ns
    (the one-off size), and host work (on-CPU samples, host calls) covers >= STARTUP_CALLS_MIN_SHARE_OF_CUT of it.
    Returns {end_ns, ms, unit, period_ms} or None."""
    s = trace.spans
    lo = window.start_ns
    st = step_spans(trace)
    unit = "step"
    if not len(st):
        cid = trace.strings.get(SCOPE_CAT)
        sc = np.flatnonzero((s.kind == SpanKind.ANNOTATION) & (s.cat == cid) & (s.end_ns > s.start_ns)) if cid >= 0 else st
        st = np.asarray([i for i in sc.tolist() if is_request(trace, i)], np.int64)
        unit = "request"
    if not len(st):
        return None
    starts = np.sort(s.start_ns[st][starts_inside(s.start_ns[st], window)])
    if len(starts) < 2:
        return None
    first = int(starts[0])
    period = float(np.median(np.diff(starts)))
    if first - lo < max(min_ns, T.STARTUP_LEAD_IN_FACTOR * period):
        return None
    wid = trace.strings.get(V.CLS_WAITING)
    rq = trace.strings.get(V.CLS_RUN_QUEUE)
    host = np.isin(s.kind, [SpanKind.CPU_SAMPLE, SpanKind.CPU_OP, SpanKind.RUNTIME, SpanKind.DRIVER, SpanKind.PYTHON]) \
        & (s.name != wid) & (s.name != rq) & overlap(s.start_ns, s.end_ns, Window(lo, first))
    ha, hb = clip(s.start_ns[host], s.end_ns[host], lo, first)
    if total(ha, hb) < T.STARTUP_CALLS_MIN_SHARE_OF_CUT * (first - lo):
        return None
    return {"end_ns": first, "ms": (first - lo) / 1e6, "unit": unit, "period_ms": period / 1e6}


def _import_samples(trace: Trace) -> np.ndarray:
    s = trace.spans
    m = s.kind == SpanKind.CPU_SAMPLE
    if not m.any():
        return m
    is_imp = trace.strings.ids_matching(lambda x: x.startswith("import "))
    d = s.detail
    ok = m & (d >= 0)
    out = np.zeros(len(s), dtype=bool)
    out[ok] = is_imp[d[ok]]
    kids = child_process_tracks(trace)
    if kids.any():      # followed children import at their own start: not the program's start-up
        out &= ~kids[s.track]
    return out
