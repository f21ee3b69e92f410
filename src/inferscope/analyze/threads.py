"""The critical thread(s): the host threads that carry the inference.

The breakdown's host categories (preprocessing, framework, CPU compute, waiting) count only these
threads; other threads are parallel activity (listed here, and by name in the culprit tables), so a
helper thread sleeping in poll() cannot turn a busy main thread into ``waiting_bound``.  GPU work and
blocking sync calls count on every thread (a sync blocks the thread that waits for the GPU).

Rule, the same for live runs, Kineto and nsys (first that applies):
  scope        threads holding inferscope.scope() ranges;
  gpu_launch   threads that launch GPU work (kernel/graph launch or copy calls with a launch flow);
  main         the main thread (tid == pid; live runs: the thread the sampler names 'main');
  all          no thread can be told apart: every host thread counts.
"""
from __future__ import annotations

import numpy as np

from .. import vocab as V
from ..trace.kinds import FlowKind, SpanKind, TrackKind
from ..trace.model import Trace, codes_in
from .classify import launch_api_mask
from .intervals import clip, total
from .select import overlap
from .window import SCOPE_CAT, root_pid


def critical_tracks(trace: Trace) -> tuple[np.ndarray, str]:
    """(bool per track: a critical CPU thread, rule name).  Non-CPU tracks are False."""
    tr = trace.tracks
    cpu = tr.kind == TrackKind.CPU_THREAD
    s = trace.spans
    out = np.zeros(len(tr), dtype=bool)
    if cpu.sum() <= 1:
        return cpu.copy(), "all"
    cid = trace.strings.get(SCOPE_CAT)
    if cid >= 0:
        m = (s.kind == SpanKind.ANNOTATION) & (s.cat == cid)
        if m.any():
            out[np.unique(s.track[m])] = True
            return out & cpu, "scope"
    f = trace.flows
    lt = np.zeros(len(s), dtype=bool)
    lt |= launch_api_mask(trace)
    if len(f):
        lt[f.src[f.kind == FlowKind.LAUNCH]] = True
    lt &= codes_in(s.kind, [SpanKind.RUNTIME, SpanKind.DRIVER, SpanKind.CPU_OP])
    if lt.any():
        out[s.track[lt]] = True     # (repeated tracks set the same True: no np.unique of every call)
        out &= cpu
        if out.any():
            return out, "gpu_launch"
    names = trace.strings.as_list()
    main = cpu & ((tr.tid == tr.pid) & (tr.pid >= 0)
                  | np.array([n >= 0 and names[n].startswith("main") for n in tr.name.tolist()], dtype=bool))
    root = root_pid(trace)
    if root is not None and (main & (tr.pid == root)).any():
        main &= tr.pid == root          # followed child processes have main threads too
    if main.any():
        return main, "main"
    return cpu.copy(), "all"


def child_process_tracks(trace: Trace) -> np.ndarray:
    """CPU threads of followed child processes (live runs: pid other than the program's own)."""
    tr = trace.tracks
    root = root_pid(trace)
    if root is None:
        return np.zeros(len(tr), dtype=bool)
    return (tr.kind == TrackKind.CPU_THREAD) & (tr.pid >= 0) & (tr.pid != root)


def native_thread_tracks(trace: Trace) -> np.ndarray:
    """Native (non-Python) threads of the program's process whose CPU time a live run recorded by perf
    role (collect/native_threads.py: Rayon tokenizer pools, OpenMP/BLAS workers)."""
    tr = trace.tracks
    c = trace.meta.get("collection") or {}
    tids = c.get("native_threads") if isinstance(c, dict) else None
    root = root_pid(trace)
    if not tids or root is None:
        return np.zeros(len(tr), dtype=bool)
    return (tr.kind == TrackKind.CPU_THREAD) & (tr.pid == root) & np.isin(tr.tid, np.asarray(tids, dtype=np.int64))


def helper_tracks(trace: Trace) -> np.ndarray:
    """Threads whose CPU work counts where the critical thread waits: followed child processes and
    the program's native threads (analyze/breakdown.py)."""
    return child_process_tracks(trace) | native_thread_tracks(trace)


RULE_TEXT = {"scope": "threads holding inferscope.scope() ranges", "gpu_launch": "threads that launch GPU work",
             "main": "the main thread", "all": "every host thread (none could be told apart)"}


# sampled classes (SpanKind.CPU_SAMPLE names) that are not on a CPU: every other class is the thread's CPU time
OFF_CPU_CLASSES = V.OFF_CPU_CLASSES


def threads(trace: Trace, window) -> dict:
    """Every host thread in the window: recorded and waiting time, and where sampled (live runs) its
    on-CPU and run-queue time.  ``all_threads_on_cpu_pct``: the on-CPU time of all threads together, in %
    of the window (% of one core: up to 100 x cores) - the union view beside the critical thread's
    breakdown (the main thread 25 % on CPU beside three threads holding the GIL the rest: ~100 % here)."""
    crit, rule = critical_tracks(trace)
    s, tr = trace.spans, trace.tracks
    lo, hi = int(window.start_ns), int(window.end_ns)
    host = (tr.kind == TrackKind.CPU_THREAD)[s.track] & (s.end_ns > s.start_ns) & overlap(s.start_ns, s.end_ns, window) \
        & (s.kind != SpanKind.OVERHEAD) & (s.kind != SpanKind.MARK)
    idx = np.flatnonzero(host)
    rows = []
    wid, rqid = (trace.strings.get(n) for n in OFF_CPU_CLASSES)
    sampled = False
    if len(idx):
        order = np.argsort(s.track[idx], kind="stable")
        idx = idx[order]
        tk = s.track[idx]
        cuts = np.flatnonzero(np.diff(tk)) + 1
        for grp in np.split(idx, cuts):
            t = int(s.track[grp[0]])
            a, b = clip(s.start_ns[grp], s.end_ns[grp], lo, hi)
            busy = total(a, b)
            name = s.name[grp]
            waiting = codes_in(s.kind[grp], [SpanKind.OS_RUNTIME]) | (name == wid)
            wa, wb = clip(s.start_ns[grp[waiting]], s.end_ns[grp[waiting]], lo, hi)
            row = {"thread": trace.track_label(t), "pid": int(tr.pid[t]), "tid": int(tr.tid[t]), "critical": bool(crit[t]),
                   "recorded_ms": busy / 1e6, "waiting_ms": total(wa, wb) / 1e6, "on_cpu_ms": None, "run_queue_ms": None}
            smp = s.kind[grp] == SpanKind.CPU_SAMPLE
            if smp.any():
                sampled = True
                on = smp & (name != wid) & (name != rqid)
                rq = smp & (name == rqid)
                row["on_cpu_ms"] = total(*clip(s.start_ns[grp[on]], s.end_ns[grp[on]], lo, hi)) / 1e6
                row["run_queue_ms"] = total(*clip(s.start_ns[grp[rq]], s.end_ns[grp[rq]], lo, hi)) / 1e6
            rows.append(row)
    rows.sort(key=lambda r: (not r["critical"], -r["recorded_ms"]))
    dur_ms = max(hi - lo, 1) / 1e6
    on_all = sum(r["on_cpu_ms"] or 0.0 for r in rows) if sampled else None
    on_crit = sum(r["on_cpu_ms"] or 0.0 for r in rows if r["critical"]) if sampled else None
    return {"rule": rule, "rule_text": RULE_TEXT[rule], "critical": [r["thread"] for r in rows if r["critical"]],
            "threads": rows,
            "all_threads_on_cpu_ms": on_all, "all_threads_on_cpu_pct": None if on_all is None else 100.0 * on_all / dur_ms,
            "critical_on_cpu_pct": None if on_crit is None else 100.0 * on_crit / dur_ms,
            "on_cpu_basis": ("sampled: each thread's CPU-clock time between the sampler's ticks (native threads: "
                             "schedstat run time by perf role), summed over threads" if sampled else None)}
