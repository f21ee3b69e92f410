"""The one start-up-call rule (run_phases' outlier_call, host_calls.one_off_host_calls): host calls so much
slower than the other calls of their name, early in the program, that they are start-up work.

On a loaded machine a preempted op is as slow as a lazy first call (issue 45: beside two CPU hogs the
outliers of a generate() trace are its ordinary ops, each one time slice long, all through the trace).
Start-up is one-off: the calls must cover what they cut STARTUP_CALLS_BACKGROUND_FACTOR times as densely
as the same kind of outlier covers the rest of the window (the background rate of slow calls there).
"""
from __future__ import annotations

import numpy as np

from .. import thresholds as T
from ..trace.kinds import GPU_WORK_KINDS, SpanKind
from ..trace.model import Trace, codes_in
from .classify import sync_api_mask
from .intervals import overlap_with_union, union
from .select import starts_inside
from .stats import fast_unique
from .step_names import EXEC_RE, SGL_RE
from .window import Window

HOST_CALL_KINDS = (SpanKind.RUNTIME, SpanKind.DRIVER, SpanKind.CPU_OP)


def startup_calls(trace: Trace, lo: int, hi: int) -> np.ndarray:
    """Indices of host calls in [lo, hi) that are start-up work, ordered by end.

    A call qualifies when it is an outlier against its own name (>= STARTUP_CALL_OUTLIER_FACTOR x its
    name's median and >= STARTUP_CALL_OUTLIER_MIN_MS), or, for a name seen fewer than
    ONE_OFF_RECURRING_MIN_CALLS times, >= ONE_OFF_CALL_MIN_MS and >= ONE_OFF_CALL_MIN_PCT of the trace; it
    starts in the first half of the program's activity in [lo, hi) or before the first GPU work there; it is
    not inside a step, not mostly covered by GPU work, not mostly a blocking sync.  The calls must explain
    the start-up they mark: the latest end e is kept only when the calls ending by e cover at least
    STARTUP_CALLS_MIN_SHARE_OF_CUT of [lo, e] (one 1 ms op does not make 412 ms start-up) and at least
    STARTUP_CALLS_BACKGROUND_FACTOR x the share of [e, hi) that such outliers cover (steps included), that
    requirement capped at STARTUP_CALLS_DENSE_SHARE (calls filling their cut are start-up, however slow the rest).
    """
    s = trace.spans
    own = (s.kind != SpanKind.OVERHEAD) & (s.kind != SpanKind.MARK) & (s.end_ns > s.start_ns) \
        & starts_inside(s.start_ns, Window(lo, hi))
    if not own.any() or hi <= lo:
        return np.zeros(0, dtype=np.int64)
    lo_own = int(s.start_ns[own].min())
    limit = lo_own + (hi - lo_own) // 2
    gw = codes_in(s.kind, [int(k) for k in GPU_WORK_KINDS]) & starts_inside(s.start_ns, Window(lo, hi))
    if gw.any():   # context creation and lazy loading come before the first GPU work, wherever that is
        limit = max(limit, int(s.start_ns[gw].min()))
    cand = _outlier_calls(trace, lo, hi, limit)
    if len(cand) == 0:
        return cand
    cand = cand[np.argsort(s.end_ns[cand], kind="stable")]
    bg = _outlier_calls(trace, lo, hi, hi, in_steps=True)     # the slow calls of the whole window: background
    bg = bg[np.argsort(s.start_ns[bg], kind="stable")]
    ba, bb = union(np.maximum(s.start_ns[bg], lo), np.minimum(s.end_ns[bg], hi))
    bcum = np.concatenate(([0], np.cumsum(bb - ba)))
    dur = s.end_ns - s.start_ns
    while len(cand):
        e = int(s.end_ns[cand[-1]])
        rest = bg[np.searchsorted(s.start_ns[bg], e, side="left"):]
        if len(rest) >= T.ONE_OFF_RECURRING_MIN_CALLS:     # calls no slower than the rest's slow calls are load
            stand = dur[cand] > T.STARTUP_CALLS_BACKGROUND_FACTOR * float(np.median(dur[rest]))
            if not stand[-1]:
                cand = cand[:-1]
                continue
            cut = cand[stand]
        else:
            cut = cand
        ua, ub = union(np.maximum(s.start_ns[cut], lo), np.minimum(s.end_ns[cut], e))
        cov = int((ub - ua).sum())
        rate = _covered_after(ba, bb, bcum, e) / (hi - e) if hi > e else 0.0
        need = min(T.STARTUP_CALLS_BACKGROUND_FACTOR * rate, T.STARTUP_CALLS_DENSE_SHARE)
        if cov >= max(T.STARTUP_CALLS_MIN_SHARE_OF_CUT, need) * (e - lo):
            return cut
        cand = cand[:-1]
    return cand


def _covered_after(ua: np.ndarray, ub: np.ndarray, cum: np.ndarray, t: int) -> int:
    """Time of the disjoint sorted intervals [ua, ub) after t."""
    i = int(np.searchsorted(ub, t, side="right"))       # intervals i.. end after t
    if i >= len(ua):
        return 0
    return int(cum[-1] - cum[i]) - max(0, t - int(ua[i]))


def _outlier_base(trace: Trace) -> np.ndarray:
    """Indices (ascending) of the host calls that are outliers against their own name, whatever the
    window: computed once per trace (run_phases and one_off_host_calls ask with different windows;
    the outliers alone are kept, not every host call)."""
    cache = trace.__dict__.setdefault("_mask_cache", {})
    v = cache.get("startup_outlier_base")
    if v is not None and v[0] == len(trace.spans):
        return v[1]
    s = trace.spans
    m = codes_in(s.kind, [int(k) for k in HOST_CALL_KINDS]) & ~sync_api_mask(trace) & (s.end_ns > s.start_ns)
    idx = np.flatnonzero(m)
    out = np.zeros(0, dtype=bool)
    if len(idx):
        dur = (s.end_ns[idx] - s.start_ns[idx]).astype(np.int64)
        names = s.name[idx]
        uk, inv, cnt = fast_unique(names, return_inverse=True, return_counts=True)
        starts = np.concatenate(([0], np.cumsum(cnt)[:-1]))
        k = int(dur.max()) + 1      # dur > 0: one sort of name * k + dur orders as lexsort((dur, inv))
        if len(uk) * k < 2 ** 62:
            sd = np.sort(inv * k + dur) % k
        else:
            sd = dur[np.lexsort((dur, inv))]
        med = sd[starts + (cnt - 1) // 2].astype(np.float64)  # lower median per name
        n = cnt[inv]
        t_lo, t_hi = trace.bounds_ns()
        total = max(1, t_hi - t_lo)     # relative to the trace, so every window applies the same thresholds
        recurring = (n >= T.ONE_OFF_RECURRING_MIN_CALLS) & (dur >= T.STARTUP_CALL_OUTLIER_FACTOR * med[inv]) \
            & (dur >= T.STARTUP_CALL_OUTLIER_MIN_MS * 1e6)
        single = (n < T.ONE_OFF_RECURRING_MIN_CALLS) & (dur >= T.ONE_OFF_CALL_MIN_MS * 1e6) \
            & (dur >= total * T.ONE_OFF_CALL_MIN_PCT / 100.0)
        out = recurring | single
    idx = idx[out] if len(idx) else idx
    cache["startup_outlier_base"] = (len(s), idx)
    return idx


def _outlier_calls(trace: Trace, lo: int, hi: int, limit: int, in_steps: bool = False) -> np.ndarray:
    """Indices of host calls that are outliers against their own name, starting in [lo, limit); those inside a
    step only with ``in_steps``."""
    s = trace.spans
    idx = _outlier_base(trace)
    if len(idx) == 0:
        return idx.copy()
    st = s.start_ns[idx]
    cand = idx[starts_inside(st, Window(lo, limit))]
    # inside a step the first_step rule decides (a long call in a typical step is steady work); serving
    # engines' step ranges (vLLM execute_..., SGLang step[...], analyze/llm.py) are steps too
    ann = s.kind == SpanKind.ANNOTATION
    step_names = trace.strings.ids_matching(lambda x: bool(EXEC_RE.search(x) or SGL_RE.search(x)), s.name[ann])
    stp = np.flatnonzero((s.kind == SpanKind.STEP) | (ann & step_names[np.maximum(s.name, 0)] & (s.name >= 0)))
    if len(stp) and len(cand) and not in_steps:
        inside = (s.start_ns[stp][None, :] <= s.start_ns[cand][:, None]) & (s.end_ns[stp][None, :] >= s.end_ns[cand][:, None])
        cand = cand[~inside.any(axis=1)]
    # a call with GPU work running through most of it waits on (or overlaps) the steady work: start-up
    # (context creation, lazy loading, allocator growth) runs with the GPU idle.
    if len(cand):
        gw = codes_in(s.kind, [int(k) for k in GPU_WORK_KINDS])
        if gw.any():
            us, ue = union(s.start_ns[gw], s.end_ns[gw])
            cov = overlap_with_union(s.start_ns[cand], s.end_ns[cand], us, ue)
            cand = cand[cov < 0.5 * (s.end_ns[cand] - s.start_ns[cand])]
    # an op that mostly waits in a blocking sync inside it (aten::to around a D2H copy) is a sync
    if len(cand):
        cand = cand[_sync_inside_ns(trace, cand) < T.ONE_OFF_SYNC_INSIDE_MAX_FRACTION * (s.end_ns[cand] - s.start_ns[cand])]
    return cand


def _sync_inside_ns(trace: Trace, cand: np.ndarray) -> np.ndarray:
    """Per call of ``cand``: the time of the blocking sync calls on its track that lie wholly inside it (a
    thread's sync API calls follow one another, so sorted by start their ends are sorted too)."""
    s = trace.spans
    out = np.zeros(len(cand), dtype=np.int64)
    sidx = np.flatnonzero(sync_api_mask(trace))
    if not len(sidx):
        return out
    for t in np.unique(s.track[cand]).tolist():
        si = sidx[s.track[sidx] == t]
        if not len(si):
            continue
        si = si[np.argsort(s.start_ns[si], kind="stable")]
        a, b = s.start_ns[si], np.maximum.accumulate(s.end_ns[si])
        cum = np.concatenate(([0], np.cumsum(s.end_ns[si] - s.start_ns[si])))
        k = np.flatnonzero(s.track[cand] == t)
        i0 = np.searchsorted(a, s.start_ns[cand[k]], side="left")
        i1 = np.searchsorted(b, s.end_ns[cand[k]], side="right")
        out[k] = np.where(i1 > i0, cum[np.maximum(i1, i0)] - cum[i0], 0)
    return out
