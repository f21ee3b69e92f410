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
                 >= ONE_OFF_CALL_MIN_PCT of the trace); standing out of the load's slow calls in the rest
                 (analyze/startup_calls.py).  Inside a step, start-up runs to that step's end.
  interpreter    live runs: the process start (/proc, before the first event) to the start of the program's
                 main module (collect/bootstrap.py's ``main_start`` MARK, else the first event): interpreter
                 start-up, site and InferScope's bootstrap, no line of the program's own; always cut (no
                 guard: nothing of the program is in it), the other rules then look for start-up after it;
  child_startup  live runs: the followed children's start-up to the first one's end (children.leading_child_startup:
                 interpreter and imports, all begun at once in the first half, the main thread not working meanwhile);
  profiler_init  the leading stretch that holds only the profiler's own records (OVERHEAD);
                 outlier calls are looked for in the first half of the program's own activity or
                 before the first GPU work, whichever ends later.
Teardown starts at the first release call (module unload, free, destroy, unmap, ...) after the
last GPU activity, when no launch or copy call follows it (rule ``release_after_gpu``); else, in a live run, at the
followed children's last event when the main thread then only waits for them to exit (``child_exit``).
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
from .. import vocab as V
from ..trace.kinds import GPU_WORK_KINDS, SpanKind
from ..trace.model import Trace, codes_in
from .children import leading_child_startup, trailing_child_exit
from .classify import launch_api_mask
from .sample_labels import function_of
from .stats import fast_unique
from .startup_calls import startup_calls
from .steady import Guards, describe_first_step, first_step_startup
from .threads import child_process_tracks
from .window import main_start_ns, process_start_ns

RELEASE_API_RE = re.compile(r"(?i)unload|destroy|free|release|unmap|unregister|deinit|finali[sz]e|reset")
COPY_API_RE = re.compile(r"(?i)memcpy|memset")

STARTUP_MAX_PASSES = 32     # bound on the start-up-call passes (each moves the cut to a later call's end)


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
    waiting = trace.strings.get(V.CLS_WAITING)
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
        wid = trace.strings.get(V.CLS_WAITING)
        idle = (s.kind == SpanKind.CPU_SAMPLE) & (s.name == wid) if wid >= 0 else np.zeros(len(s), bool)
        before = (s.start_ns < td) & (s.kind != SpanKind.OVERHEAD) & (s.kind != SpanKind.MARK) & ~idle
        td = int(s.end_ns[before].max()) if before.any() else td
    rule = "release_after_gpu: release calls (unload/free/destroy) after the last GPU activity, no launch or copy after them"
    ce = trailing_child_exit(trace) if td is None else None
    if ce is not None:
        td = ce["start_ns"]
        rule = (f"child_exit: the main process waited for followed child process(es) {_pids(ce['pids'])} to exit "
                "(their interpreter and module teardown, after their last recorded event)")
    if td is not None and hi - td >= min_ns and td > lo:
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
    cs = leading_child_startup(trace)
    if cs is not None:
        cands.append((cs["end_ns"], f"child_startup: followed child process(es) {_pids(cs['pids'])} starting (interpreter and imports, "
                                    f"{(cs['end_ns'] - cs['start_ns']) / 1e6:,.1f} ms to the first one ready) while the main "
                                    "process waited for them"))
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


def _pids(pids: list[int]) -> str:
    return ", ".join(str(p) for p in pids[:4]) + (" ..." if len(pids) > 4 else "")


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
