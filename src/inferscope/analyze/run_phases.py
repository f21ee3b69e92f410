"""Phases of a run: start-up, steady state and teardown, found by rules relative to the trace.

The default analysis window is the steady state (``window.resolve_window``): one-off work at
either end (interpreter start and module imports, lazy loading, a first step that is an outlier,
unloading modules and freeing memory at exit) must not decide a steady-state verdict.

Start-up ends at the latest of (each rule applies only when its evidence is in the trace):
  imports        live runs: the last sampled module import ("import X") before the bulk (half) of
                 the sampled non-import CPU time;
  first_step     the first step (ProfilerStep, else a serving engine's step range) when it lasts more than
                 STARTUP_STEP_OUTLIER_FACTOR x the median of the later steps and most of its excess is work
                 no later step runs (analyze/steady.py);
  outlier_call   a host API call or op at least STARTUP_CALL_OUTLIER_FACTOR x the median duration of
                 the calls of the same name (and >= STARTUP_CALL_OUTLIER_MIN_MS) early in the trace
                 (see profiler_init); a name seen fewer than 3 times: the one-off rule (>= ONE_OFF_CALL_MIN_MS and
                 >= ONE_OFF_CALL_MIN_PCT of the trace).  Inside a step, start-up runs to that step's end.
  interpreter    live runs: the process start (/proc, before the first event) to the start of the program's
                 main module (collect/bootstrap.py's ``main_start`` MARK, else the first event): interpreter
                 start-up, site and InferScope's bootstrap, no line of the program's own; always cut (no
                 guard: nothing of the program is in it), the other rules then look for start-up after it;
  profiler_init  the leading stretch that holds only the profiler's own records (OVERHEAD);
                 outlier calls are looked for in the first half of the program's own activity or
                 before the first GPU work, whichever ends later.
Teardown starts at the first release call (module unload, free, destroy, unmap, ...) after the
last GPU activity, when no launch or copy call follows it (rule ``release_after_gpu``).
A cut is made only when the part it removes holds at least PHASE_CUT_MIN_PCT of the trace and the
window left passes analyze/steady.py's guards (>= STEADY_MIN_STEPS complete steps when the trace has
steps, the trace's kinds of work, 'other' at most STEADY_MAX_OTHER_RISE_PCT points above the whole
trace's); a part found but not cut is listed in ``not_cut`` with the reason, a cut has its
``justification``.
"""
from __future__ import annotations

import re

import numpy as np

from .. import thresholds as T
from ..trace.kinds import GPU_WORK_KINDS, SpanKind
from ..trace.model import Trace, codes_in
from .classify import launch_api_mask, sync_api_mask
from .intervals import overlap_with_union, union
from .sample_labels import function_of
from .select import starts_inside
from .stats import fast_unique
from .step_names import EXEC_RE, SGL_RE
from .steady import Guards, describe_first_step, first_step_startup
from .threads import child_process_tracks
from .window import Window, main_start_ns, process_start_ns

RELEASE_API_RE = re.compile(r"(?i)unload|destroy|free|release|unmap|unregister|deinit|finali[sz]e|reset")
COPY_API_RE = re.compile(r"(?i)memcpy|memset")

STARTUP_MAX_PASSES = 32     # bound on the start-up-call passes (each moves the cut to a later call's end)
HOST_CALL_KINDS = (SpanKind.RUNTIME, SpanKind.DRIVER, SpanKind.CPU_OP)


def imports_end(trace: Trace) -> int | None:
    s = trace.spans
    smp = (s.kind == SpanKind.CPU_SAMPLE) & (s.end_ns > s.start_ns)
    kids = child_process_tracks(trace)
    if kids.any():      # followed children import at their own start, inside the program's steady state
        smp &= ~kids[s.track]
    smp = np.flatnonzero(smp)
    if len(smp) == 0:
        return None
    det = s.detail[smp]
    is_imp_id = trace.strings.ids_matching(lambda x: x.startswith("import "))
    imp = np.zeros(len(smp), dtype=bool)
    ok = det >= 0
    imp[ok] = is_imp_id[det[ok]]
    if not imp.any():
        return None
    waiting = trace.strings.get("waiting")
    work = ~imp & (s.name[smp] != waiting)
    if not work.any():
        return None
    # the time at which half of the sampled non-import CPU time has passed
    w = smp[work]
    dur = (s.end_ns[w] - s.start_ns[w]).astype(np.int64)
    order = np.argsort(s.end_ns[w], kind="stable")
    cum = np.cumsum(dur[order])
    half_t = int(s.end_ns[w][order][np.searchsorted(cum, cum[-1] / 2.0)])
    ends = s.end_ns[smp[imp]]
    ends = ends[ends <= half_t]
    return int(ends.max()) if len(ends) else None


def startup_calls(trace: Trace, lo: int, hi: int) -> np.ndarray:
    """The one start-up-call rule (run_phases' outlier_call, host_calls.one_off_host_calls): indices of host
    calls in [lo, hi) that are start-up work, ordered by end.

    A call qualifies when it is an outlier against its own name (>= STARTUP_CALL_OUTLIER_FACTOR x its
    name's median and >= STARTUP_CALL_OUTLIER_MIN_MS), or, for a name seen fewer than
    ONE_OFF_RECURRING_MIN_CALLS times, >= ONE_OFF_CALL_MIN_MS and >= ONE_OFF_CALL_MIN_PCT of the trace; it
    starts in the first half of the program's activity in [lo, hi) or before the first GPU work there; it is
    not inside a step, not mostly covered by GPU work, not mostly a blocking sync.  The calls must explain
    the start-up they mark: the latest end e is kept only when the calls ending by e cover at least
    STARTUP_CALLS_MIN_SHARE_OF_CUT of [lo, e] (one 1 ms op does not make 412 ms start-up).
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
    while len(cand):
        e = int(s.end_ns[cand[-1]])
        ua, ub = union(np.maximum(s.start_ns[cand], lo), np.minimum(s.end_ns[cand], e))
        if int((ub - ua).sum()) >= T.STARTUP_CALLS_MIN_SHARE_OF_CUT * (e - lo):
            break
        cand = cand[:-1]
    return cand


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


def _outlier_calls(trace: Trace, lo: int, hi: int, limit: int) -> np.ndarray:
    """Indices of host calls that are outliers against their own name, starting in [lo, limit)."""
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
    if len(stp) and len(cand):
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
        sidx = np.flatnonzero(sync_api_mask(trace))
        keep = []
        for i in cand.tolist():
            ins = sidx[(s.track[sidx] == s.track[i]) & (s.start_ns[sidx] >= s.start_ns[i]) & (s.end_ns[sidx] <= s.end_ns[i])]
            if int((s.end_ns[ins] - s.start_ns[ins]).sum()) < T.ONE_OFF_SYNC_INSIDE_MAX_FRACTION * int(s.end_ns[i] - s.start_ns[i]):
                keep.append(i)
        cand = np.asarray(keep, dtype=np.int64)
    return cand


def _teardown_start(trace: Trace) -> int | None:
    s = trace.spans
    gw = codes_in(s.kind, [int(k) for k in GPU_WORK_KINDS])
    if not gw.any():
        return None
    last_gpu = int(s.end_ns[gw].max())
    api = np.flatnonzero(codes_in(s.kind, [SpanKind.RUNTIME, SpanKind.DRIVER]) & (s.start_ns >= last_gpu))
    if len(api) == 0:
        return None
    rel_ids = trace.strings.ids_matching(lambda x: bool(RELEASE_API_RE.search(x)), s.name[api])
    rel = rel_ids[s.name[api]]
    if not rel.any():
        return None
    t0 = int(s.start_ns[api[rel]].min())
    after = api[s.start_ns[api] >= t0]
    copy_ids = trace.strings.ids_matching(lambda x: bool(COPY_API_RE.search(x)), s.name[after])
    work = launch_api_mask(trace)[after] | copy_ids[s.name[after]]
    if work.any():
        return None
    return t0


def _top_items(trace: Trace, a: int, b: int, n: int = 5) -> list[dict]:
    """What a cut part holds: host calls (top level) by name and sampled imports by module."""
    s = trace.spans
    m = (s.start_ns < b) & (s.end_ns > a)
    calls = m & (codes_in(s.kind, [SpanKind.RUNTIME, SpanKind.DRIVER]) | ((s.kind == SpanKind.CPU_OP) & (s.depth == 0)))
    rows = []
    for kind_mask, key_col, prefix in ((calls, s.name, ""), (m & (s.kind == SpanKind.CPU_SAMPLE) & (s.detail >= 0), s.detail, "")):
        idx = np.flatnonzero(kind_mask)
        if len(idx) == 0:
            continue
        d = (np.minimum(s.end_ns[idx], b) - np.maximum(s.start_ns[idx], a)).astype(np.int64)
        keys = key_col[idx]
        uk, inv, cnt = fast_unique(keys, return_inverse=True, return_counts=True)
        tot = np.bincount(inv, weights=d, minlength=len(uk))
        for k, c, t in zip(uk.tolist(), cnt.tolist(), tot.tolist()):
            nm = trace.strings[int(k)]
            rows.append({"name": prefix + (function_of(nm) if key_col is s.detail else nm), "count": int(c), "ms": t / 1e6})
    merged: dict[str, dict] = {}       # sampled functions: one row whatever their line
    for r in rows:
        m = merged.get(r["name"])
        if m is None:
            merged[r["name"]] = r
        else:
            m["count"] += r["count"]
            m["ms"] += r["ms"]
    rows = list(merged.values())
    rows.sort(key=lambda r: -r["ms"])
    return rows[:n]


def interpreter_end(trace: Trace) -> tuple[int, int] | None:
    """(process start, main-module start) of a live run when interpreter start-up lies before the program's own
    first event: from /proc's process start (before the trace's first event) or to bootstrap's main_start MARK
    (after it); None otherwise (imported traces, no process start recorded)."""
    lo, hi = trace.bounds_ns()
    if hi <= lo:
        return None
    ps, ms = process_start_ns(trace), main_start_ns(trace)
    a = ps if ps is not None and ps < lo else lo
    b = ms if ms is not None and lo <= ms < hi else lo
    return (a, b) if b > a else None


def _segment(trace: Trace, lo: int, a: int, b: int, rule: str) -> dict:
    return {"start_ns": int(a), "end_ns": int(b), "offset_ms": (a - lo) / 1e6, "ms": (b - a) / 1e6, "rule": rule,
            "top": _top_items(trace, a, b)}


def run_phases(trace: Trace) -> dict:
    """Start-up and teardown of the whole trace, and the steady state between them."""
    lo, hi = trace.bounds_ns()
    out = {"startup": None, "teardown": None, "steady_start_ns": int(lo), "steady_end_ns": int(hi),
           "steady_ms": (hi - lo) / 1e6, "trace_ms": (hi - lo) / 1e6, "cut": False, "steady_steps": None,
           "justification": "", "not_cut": []}
    if hi <= lo:
        return out
    guards = Guards(trace)
    t_lo = lo
    min_ns = (hi - lo) * T.PHASE_CUT_MIN_PCT / 100.0
    end = hi
    td = _teardown_start(trace)
    if td is not None and td > lo:
        # the steady state ends with the last activity before the first release call (the
        # profiler's own OVERHEAD records aside, and time a thread merely sat off-CPU: sampled or
        # scheduler 'waiting' runs up to the release call are idle, not inference)
        s = trace.spans
        wid = trace.strings.get("waiting")
        idle = (s.kind == SpanKind.CPU_SAMPLE) & (s.name == wid) if wid >= 0 else np.zeros(len(s), bool)
        before = (s.start_ns < td) & (s.kind != SpanKind.OVERHEAD) & (s.kind != SpanKind.MARK) & ~idle
        td = int(s.end_ns[before].max()) if before.any() else td
    if td is not None and hi - td >= min_ns and td > lo:
        rule = "release_after_gpu: release calls (unload/free/destroy) after the last GPU activity, no launch or copy after them"
        why = guards.reason_against(lo, td, startup=False)
        if why is None:
            out["teardown"] = _segment(trace, lo, td, hi, rule)
            end = td
        else:
            out["not_cut"].append({"part": "teardown", "ms": (hi - td) / 1e6, "rule": rule.split(":")[0], "reason": why})
    cands: list[tuple[int, str]] = []
    interp = interpreter_end(trace)
    lo_user = interp[1] if interp is not None else lo      # where the program's own code can start
    ie = imports_end(trace)
    if ie is not None:
        cands.append((ie, "imports: last sampled module import before half of the sampled CPU work"))
    fs = first_step_startup(trace)
    if fs is not None and fs["startup"]:
        cands.append((fs["end_ns"], "first_step: " + describe_first_step(fs)))
    elif fs is not None:
        out["not_cut"].append({"part": "startup", "ms": fs["ms"], "rule": "first_step",
                               "reason": f"the first step lasts {fs['ms']:,.1f} ms vs a median of {fs['typical_ms']:,.2f} ms "
                                         f"for the later steps, but only {fs['one_off_ms']:,.1f} ms of its {fs['excess_ms']:,.1f} ms "
                                         "excess is work no later step runs: a slow step, not start-up"})
    # the program's own first event: a leading stretch of profiler records only (nsys "CUDA profiling
    # initialization") is start-up too
    s = trace.spans
    own = (s.kind != SpanKind.OVERHEAD) & (s.kind != SpanKind.MARK) & (s.end_ns > s.start_ns)
    lo_own = int(s.start_ns[own].min()) if own.any() else lo
    if lo_own > lo:
        cands.append((lo_own, "profiler_init: only the profiler's own records (OVERHEAD) before the program's first event"))
    cands = [(e, r) for e, r in cands if lo_user < e < end]
    # start-up calls (the one rule, startup_calls), looked for again after each cut until none is left in
    # the rest: the steady window then holds no call that host_calls would call start-up work
    e0 = max([lo_user] + [e for e, _ in cands])
    for _ in range(STARTUP_MAX_PASSES):
        oc = startup_calls(trace, e0, end)
        if len(oc) == 0:
            break
        i = int(oc[-1])
        e0 = int(s.end_ns[i])
        cands.append((e0, f"outlier_call: {trace.name_of(i)[:80]} {(s.end_ns[i] - s.start_ns[i]) / 1e6:.1f} ms, "
                          f">= {T.STARTUP_CALL_OUTLIER_FACTOR:g} x the median of its name (or a single call >= "
                          f"{T.ONE_OFF_CALL_MIN_MS:g} ms and {T.ONE_OFF_CALL_MIN_PCT:g}% of the trace)"))
    cands = [(e, r) for e, r in cands if lo_user < e < end]
    if cands:
        e, r = max(cands)
        if e - lo >= min_ns:
            why = guards.reason_against(e, end, startup=True)
            if why is None:
                out["startup"] = _segment(trace, lo, lo, e, r)
                lo = e
            else:
                out["not_cut"].append({"part": "startup", "ms": (e - lo) / 1e6, "rule": r.split(":")[0], "reason": why})
    if interp is not None and interp[1] < end:
        out["startup"] = _with_interpreter(trace, t_lo, interp, out["startup"])
        lo = max(lo, interp[1])
    out["steady_start_ns"], out["steady_end_ns"] = int(lo), int(end)
    out["steady_ms"] = (end - lo) / 1e6
    out["cut"] = out["startup"] is not None or out["teardown"] is not None
    if len(guards.steps):
        out["steady_steps"] = guards.complete_steps(lo, end)
    if out["cut"]:
        out["justification"] = justification(out, guards.other_pct(lo, end), guards.other_pct(t_lo, hi))
    return out


INTERPRETER_RULE = ("interpreter: the process start to the program's main module (interpreter start-up, site, "
                    "InferScope's bootstrap; no code of the program's)")


def _with_interpreter(trace: Trace, lo: int, interp: tuple[int, int], seg: dict | None) -> dict:
    """The start-up part with the interpreter's start-up before it: [process start, main start] alone, or the part
    another rule found, extended back to the process start.  Its time before the first event is one row of
    ``top`` (nothing was sampled there)."""
    a, b = interp
    if seg is None:
        seg = _segment(trace, lo, max(a, lo), b, INTERPRETER_RULE)
    if a < lo:
        row = {"name": "interpreter start-up (not sampled)", "count": 1,
               "ms": (lo - a) / 1e6}
        top = sorted(seg["top"] + [row], key=lambda r: -r["ms"])[:5]
        seg = dict(seg, start_ns=int(a), offset_ms=(a - lo) / 1e6, ms=(seg["end_ns"] - a) / 1e6, top=top)
    return seg


def justification(rp: dict, other_win_pct: float, other_all_pct: float) -> str:
    """Why the cut is safe: what was cut by which rule, the steady steps left, the 'other' shares."""
    parts = [f"{w} {rp[k]['ms']:,.1f} ms (rule {rp[k]['rule'].split(':')[0]})"
             for k, w in (("startup", "start-up"), ("teardown", "teardown")) if rp.get(k)]
    steps = (f"{rp['steady_steps']} complete steady steps remain (>= {T.STEADY_MIN_STEPS}); "
             if rp.get("steady_steps") is not None else "the trace has no steps; ")
    return ("left out " + " and ".join(parts) + "; " + steps + f"'other' {other_win_pct:.1f}% of the steady state vs "
            f"{other_all_pct:.1f}% over the whole trace (at most +{T.STEADY_MAX_OTHER_RISE_PCT:g} points)")


def describe(seg: dict | None, what: str) -> str | None:
    """'start-up 1,900.0 ms: import torch 1,500.0 ms, ...' (None when there is no such part)."""
    if not seg:
        return None
    items = ", ".join(f"{r['name'][:60]} {r['ms']:,.1f} ms" + (f" ({r['count']:,} calls)" if r["count"] > 1 else "")
                      for r in seg["top"][:3])
    return f"{what} {seg['ms']:,.1f} ms" + (f": {items}" if items else "")
