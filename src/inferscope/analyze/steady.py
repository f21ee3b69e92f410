"""What makes a steady-state cut safe (analyze/run_phases.py): the evidence that a first step is
start-up, and the guards every cut must pass.  A window is never cut to something less informative
than the whole trace.

first_step evidence  the first step lasts more than STARTUP_STEP_OUTLIER_FACTOR x the median of the
                     later steps AND at least STARTUP_STEP_ONE_OFF_MIN_SHARE of its excess over that
                     median is one-off work: time covered by calls, ops or GPU work whose name no later
                     step runs (module loading, autotuning, first-launch work).  One slow call of an op
                     the later steps run too (a preempted aten::mul beside a CPU hog) is not start-up.
guards (each cut)    steps     when the trace has steps, the window left holds >= STEADY_MIN_STEPS
                               complete steps;
                     kinds     it keeps the trace's kinds of work (GPU work, host work) and every GPU
                               activity of the trace ends inside it unless the cut is start-up;
                     other     its unattributed ('other') share is at most STEADY_MAX_OTHER_RISE_PCT
                               points above the whole trace's (the breakdown's own partition, computed
                               once over the whole trace and integrated over the window).
"""
from __future__ import annotations

import numpy as np

from .. import thresholds as T
from ..trace.kinds import GPU_WORK_KINDS, SpanKind
from ..trace.model import Trace, codes_in
from .breakdown import CATEGORIES, segment_classes
from .intervals import union
from .step_names import EXEC_RE, SGL_RE
from .window import Window

WORK_KINDS = (SpanKind.RUNTIME, SpanKind.DRIVER, SpanKind.CPU_OP, SpanKind.PYTHON)
HOST_KINDS = (SpanKind.RUNTIME, SpanKind.DRIVER, SpanKind.CPU_OP, SpanKind.PYTHON, SpanKind.CPU_SAMPLE)


def step_spans(trace: Trace) -> np.ndarray:
    """Indices of the trace's steps, by start: ProfilerStep spans, else serving-engine step ranges (analyze/llm.py)."""
    s = trace.spans
    st = np.flatnonzero((s.kind == SpanKind.STEP) & (s.end_ns > s.start_ns))
    if not len(st):
        ann = np.flatnonzero((s.kind == SpanKind.ANNOTATION) & (s.end_ns > s.start_ns) & (s.name >= 0))
        if len(ann):
            ok = trace.strings.ids_matching(lambda x: bool(EXEC_RE.search(x) or SGL_RE.match(x.strip())), s.name[ann])
            st = ann[ok[s.name[ann]]]
    return st[np.argsort(s.start_ns[st], kind="stable")]


def first_step_startup(trace: Trace) -> dict | None:
    """The first step judged by its work; None when there are fewer than two steps or it is not an outlier.

    Returns {start_ns, end_ns, ms, typical_ms, excess_ms, one_off_ms, top, startup} (startup: the evidence holds).
    """
    s = trace.spans
    st = step_spans(trace)
    if len(st) < 2:
        return None
    d = (s.end_ns[st] - s.start_ns[st]).astype(np.float64)
    typical = float(np.median(d[1:]))
    if not (typical > 0 and d[0] > T.STARTUP_STEP_OUTLIER_FACTOR * typical):
        return None
    a0, b0 = int(s.start_ns[st[0]]), int(s.end_ns[st[0]])
    a1, b1 = int(s.start_ns[st[1:]].min()), int(s.end_ns[st[1:]].max())
    work = codes_in(s.kind, [int(k) for k in WORK_KINDS + tuple(GPU_WORK_KINDS)]) & (s.end_ns > s.start_ns) & (s.name >= 0)
    first = np.flatnonzero(work & (s.start_ns < b0) & (s.end_ns > a0))
    later = np.flatnonzero(work & (s.start_ns < b1) & (s.end_ns > a1) & (s.start_ns >= b0))
    new = first[~np.isin(s.name[first], s.name[later])]
    ua, ub = union(np.maximum(s.start_ns[new], a0), np.minimum(s.end_ns[new], b0))
    one_off = int((ub - ua).sum()) if len(ua) else 0
    excess = d[0] - typical
    top: list[dict] = []
    if len(new):
        dur = (np.minimum(s.end_ns[new], b0) - np.maximum(s.start_ns[new], a0)).astype(np.float64)
        ids, inv = np.unique(s.name[new], return_inverse=True)
        tot = np.bincount(inv, weights=dur, minlength=len(ids))
        for j in np.argsort(-tot, kind="stable")[:3].tolist():
            top.append({"name": trace.strings[int(ids[j])], "ms": float(tot[j]) / 1e6})
    return {"start_ns": a0, "end_ns": b0, "ms": d[0] / 1e6, "typical_ms": typical / 1e6, "excess_ms": excess / 1e6,
            "one_off_ms": one_off / 1e6, "top": top,
            "startup": one_off >= T.STARTUP_STEP_ONE_OFF_MIN_SHARE * excess}


def describe_first_step(ev: dict) -> str:
    items = ", ".join(f"{r['name'][:60]} {r['ms']:,.1f} ms" for r in ev["top"])
    return (f"the first step lasts {ev['ms']:,.1f} ms, more than {T.STARTUP_STEP_OUTLIER_FACTOR:g} x the median of the "
            f"later steps ({ev['typical_ms']:,.2f} ms), and {ev['one_off_ms']:,.1f} ms of its {ev['excess_ms']:,.1f} ms "
            f"excess is work no later step runs" + (f" ({items})" if items else ""))


class Guards:
    """The checks a proposed window [a, b) must pass; whole-trace figures computed once, when first asked."""

    def __init__(self, trace: Trace):
        self.trace = trace
        self.lo, self.hi = trace.bounds_ns()
        self.steps = step_spans(trace)
        s = trace.spans
        self.gpu = codes_in(s.kind, [int(k) for k in GPU_WORK_KINDS]) & (s.end_ns > s.start_ns)
        self.host = codes_in(s.kind, [int(k) for k in HOST_KINDS]) & (s.end_ns > s.start_ns)
        self._other = None

    def complete_steps(self, a: int, b: int) -> int:
        s = self.trace.spans
        st = self.steps
        return int(((s.start_ns[st] >= a) & (s.end_ns[st] <= b)).sum())

    def _other_ns(self, a: int, b: int) -> int:
        if self._other is None:
            seg_s, seg_e, cat, _, _ = segment_classes(self.trace, Window(self.lo, self.hi))
            oth = (cat == len(CATEGORIES) - 1)
            cum = np.concatenate(([0], np.cumsum(np.where(oth, seg_e - seg_s, 0))))
            self._other = (seg_s, seg_e, oth, cum)
        seg_s, seg_e, oth, cum = self._other
        if not len(seg_s):
            return 0

        def upto(t: int) -> int:     # other time in [lo, t)
            i = int(np.searchsorted(seg_s, t, side="right")) - 1
            if i < 0:
                return 0
            return int(cum[i]) + (int(min(t, seg_e[i]) - seg_s[i]) if oth[i] else 0)
        return upto(b) - upto(a)

    def other_pct(self, a: int, b: int) -> float:
        return 100.0 * self._other_ns(a, b) / (b - a) if b > a else 0.0

    def reason_against(self, a: int, b: int, startup: bool) -> str | None:
        """None when [a, b) is an informative window; else why not (one clause)."""
        s = self.trace.spans
        if len(self.steps):
            n = self.complete_steps(a, b)
            if n < T.STEADY_MIN_STEPS:
                return f"only {n} complete step{'s' if n != 1 else ''} would remain (< {T.STEADY_MIN_STEPS})"
        inside = (s.start_ns < b) & (s.end_ns > a)
        for m, what in ((self.gpu, "GPU work"), (self.host, "host work")):
            if m.any() and not (m & inside).any():
                return f"no {what} would remain"
        if not startup and self.gpu.any() and int(s.end_ns[self.gpu].max()) > b:
            return "GPU work runs after the cut"
        o_win, o_all = self.other_pct(a, b), self.other_pct(self.lo, self.hi)
        if o_win > o_all + T.STEADY_MAX_OTHER_RISE_PCT:
            return f"the rest would be {o_win:.1f}% unattributed ('other') vs {o_all:.1f}% over the whole trace"
        return None
