"""Child processes of a live run (multiprocessing / DataLoader workers, subprocesses).  Python children
are followed by default (collect/bootstrap.py: their samples are in the trace under their own pid);
every child's CPU time is counted from /proc (``collect/system.py``: ``child.cpu_s[<pid>] <comm>``
counters, cumulative user+sys seconds per live descendant, and ``children.reaped_cpu_s`` for the
children already waited for), so the report can say that work ran where the sampler did not look.

CPU time inside the window is an estimate: per process, the difference of the cumulative counter between
the last observation before the window and the last one inside it (observations every ~0.5 s; a child
first seen inside the window counts from 0); for all children together, the rises of ``children.cpu_s``
(every descendant's CPU, reaped ones included, read at every listing and soon after each reap) inside the
window, which also holds the children no listing named (started and reaped between two listings, or a
child's CPU after its last listing): ``unlisted_cpu_s_in_window``.
"""
from __future__ import annotations

import re

import numpy as np

from .. import vocab as V
from ..trace.kinds import SpanKind, TrackKind
from ..trace.model import Trace
from .select import starts_inside
from .breakdown import source_intervals
from .intervals import clip, overlap_with_union, union
from .threads import child_process_tracks
from .window import root_pid

_CHILD = re.compile(r"^child\.cpu_s\[(\d+)\] (.*)$")


def children(trace: Trace, window) -> dict | None:
    tr, c = trace.tracks, trace.counters
    if len(c) == 0:
        return None
    names = trace.strings.as_list()
    lo, hi = int(window.start_ns), int(window.end_ns)
    rows = []
    reaped = 0.0
    agg = None                     # children.cpu_s readings (ts, v): every descendant's CPU, cumulative
    root = root_pid(trace)         # followed children record their own children.cpu_s: the program's is the sum
    last_ts = int(c.ts_ns.max())
    for t in np.flatnonzero(tr.kind == TrackKind.COUNTER).tolist():
        nm = names[int(tr.name[t])] if tr.name[t] >= 0 else ""
        m = c.track == t
        if nm == "children.reaped_cpu_s":
            reaped = max(reaped, float(c.value[m].max()))
            continue
        if nm == "children.cpu_s":
            if m.any() and (int(tr.pid[t]) == root if root is not None else agg is None or c.value[m].max() > agg[1].max()):
                agg = (c.ts_ns[m], c.value[m])
            continue
        mm = _CHILD.match(nm)
        if not mm or not m.any():
            continue
        ts, v = c.ts_ns[m], c.value[m]
        before = v[ts < lo]
        inside = v[starts_inside(ts, window, include_end=True)]   # closed: a reading at end_ns counts
        base = float(before[-1]) if len(before) else 0.0
        in_win = (float(inside[-1]) - base) if len(inside) else 0.0
        rows.append({"pid": int(mm.group(1)), "comm": mm.group(2), "cpu_s": float(v[-1]), "cpu_s_in_window": max(0.0, in_win),
                     "first_seen_ms": (int(ts[0]) - lo) / 1e6, "last_seen_ms": (int(ts[-1]) - lo) / 1e6,
                     "alive_at_end": int(ts[-1]) == last_ts})
    if not rows and reaped <= 0:
        return None
    followed = _followed(trace, lo, hi)
    for r in rows:
        r["followed"] = r["pid"] in followed["pids"]
        su = followed["startup"].get(r["pid"])
        r["startup_ms"] = None if su is None else (su[1] - su[0]) / 1e6
    # a followed child that lived between two /proc readings (~0.5 s apart: short DataLoader workers) is
    # still listed - its CPU time is in the reaped total, its samples in its own trace
    seen = {r["pid"] for r in rows}
    for pid in sorted(p for p in followed["pids"] if p not in seen):
        su = followed["startup"].get(pid)
        rows.append({"pid": int(pid), "comm": "(followed; no /proc reading)", "cpu_s": 0.0, "cpu_s_in_window": 0.0,
                     "first_seen_ms": None, "last_seen_ms": None, "alive_at_end": False, "followed": True,
                     "startup_ms": None if su is None else (su[1] - su[0]) / 1e6})
    rows.sort(key=lambda r: -r["cpu_s"])
    # reaped children's time is in RUSAGE_CHILDREN; those still alive at the end are not yet
    alive = sum(r["cpu_s"] for r in rows if r["alive_at_end"])
    total = reaped + alive
    n = max(len(rows), 1 if reaped > 0 else 0)
    nf = [r for r in rows if not r["followed"]]
    listed = sum(r["cpu_s_in_window"] for r in rows)
    in_win, unlisted = listed, None
    if agg is not None:            # absent from traces recorded before it (their estimate: listed children only)
        all_in = aggregate_in_window(*agg, window)
        total = max(total, float(agg[1][-1]))
        in_win, unlisted = max(listed, all_in), max(0.0, all_in - listed)
    return {"count": n, "cpu_s_total": total, "reaped_cpu_s": reaped, "cpu_s_in_window": in_win,
            "unlisted_cpu_s_in_window": unlisted, "profiled": bool(followed["followed"]),
            "followed": followed["followed"], "waiting_on_children_ms": followed["waiting_on_children_ms"],
            "waiting_on_child_startup_ms": followed["waiting_on_child_startup_ms"], "processes": rows,
            "not_followed": len(nf), "not_followed_cpu_s": sum(r["cpu_s"] for r in nf),
            "following": (trace.meta.get("collection") or {}).get("follow_children"),
            "basis": "/proc/<pid>/stat user+sys time of each live descendant, every ~0.5 s and soon after a child is reaped, "
                     "and getrusage(RUSAGE_CHILDREN) for reaped ones; CPU time in the window is an estimate from those "
                     "observations (all children: the rises of their sum, children.cpu_s)"}


def aggregate_in_window(ts: np.ndarray, v: np.ndarray, window) -> float:
    """All children's CPU seconds inside the window from ``children.cpu_s`` (cumulative, one reading per listing
    once the program has had a child): the sum of its rises from the last reading before the window (else from 0,
    as a child first seen inside the window) to the last one inside it (closed window).  Rises only: a descendant
    orphaned out of the process tree (reparented to init) takes its CPU out of the sum, which is not CPU given
    back.  (A ``scope()`` session started after children had run reads their CPU at its first listing: inside
    the window only when the window holds the session's start.)"""
    o = np.argsort(ts, kind="stable")
    ts, v = ts[o], v[o]
    idx = np.flatnonzero(starts_inside(ts, window, include_end=True))
    if not len(idx):
        return 0.0
    k = int(idx[0])
    seq = np.concatenate([v[k - 1:k] if k else np.zeros(1), v[k:int(idx[-1]) + 1]])
    return float(np.clip(np.diff(seq), 0.0, None).sum())


def _followed(trace: Trace, lo: int, hi: int) -> dict:
    """Followed (sampled) children: how long the program's critical thread waited while at least one
    child was on-CPU (any class but waiting, its own imports included), and, of its waiting, how long while a
    child was starting (``child_startups``: the child's interpreter and imports, before its own work)."""
    kids = child_process_tracks(trace)
    s = trace.spans
    if not kids.any():
        return {"followed": 0, "waiting_on_children_ms": None, "waiting_on_child_startup_ms": None, "pids": set(),
                "startup": {}}
    smp = (s.kind == SpanKind.CPU_SAMPLE) & kids[s.track]
    wid = trace.strings.get(V.CLS_WAITING)
    busy = smp & (s.name != wid)
    bu = union(*clip(s.start_ns[busy], s.end_ns[busy], lo, hi))
    wa, wb = source_intervals(trace)["waiting"]            # the critical thread's waiting
    wu = union(*clip(wa, wb, lo, hi))
    both = int(overlap_with_union(wu[0], wu[1], bu[0], bu[1]).sum())
    pids = set(np.unique(trace.tracks.pid[np.flatnonzero(kids)]).tolist())
    su = child_startups(trace)
    st_ns = None
    if su:
        sa = np.asarray([v[0] for v in su.values()], np.int64)
        sb = np.asarray([v[1] for v in su.values()], np.int64)
        ua, ub = union(*clip(sa, sb, lo, hi))
        st_ns = int(overlap_with_union(wu[0], wu[1], ua, ub).sum())
    return {"followed": len(pids), "waiting_on_children_ms": both / 1e6,
            "waiting_on_child_startup_ms": None if st_ns is None else st_ns / 1e6, "pids": pids, "startup": su}


def child_startups(trace: Trace) -> dict:
    """pid -> (start_ns, end_ns) of each followed child's start-up: from its first event (its main_start MARK,
    collect/bootstrap.py, or its first sample; its interpreter's start before that is not recorded) to the end of
    its last sampled module import before half of its sampled non-import CPU time (run_phases' imports rule, per
    child).  A child that imports nothing sampled: its first event to its first sample of other work."""
    kids = child_process_tracks(trace)
    s = trace.spans
    if not kids.any():
        return {}
    m = kids[s.track] & ((s.kind == SpanKind.CPU_SAMPLE) | (s.kind == SpanKind.MARK))
    idx = np.flatnonzero(m)
    if not len(idx):
        return {}
    is_imp = trace.strings.ids_matching(lambda x: x.startswith("import "))
    wid, rq = trace.strings.get(V.CLS_WAITING), trace.strings.get(V.CLS_RUN_QUEUE)
    pid_of = trace.tracks.pid[s.track[idx]]
    out = {}
    for pid in np.unique(pid_of).tolist():
        j = idx[pid_of == pid]
        smp = j[s.kind[j] == SpanKind.CPU_SAMPLE]
        if not len(smp):
            continue
        start = int(s.start_ns[j].min())
        d = s.detail[smp]
        imp = np.zeros(len(smp), bool)
        imp[d >= 0] = is_imp[d[d >= 0]]
        work = ~imp & (s.name[smp] != wid) & (s.name[smp] != rq)
        if not work.any():
            continue
        w = smp[work]
        o = np.argsort(s.end_ns[w], kind="stable")
        cum = np.cumsum((s.end_ns[w] - s.start_ns[w])[o])
        half_t = int(s.end_ns[w][o][np.searchsorted(cum, cum[-1] / 2.0)])
        ends = s.end_ns[smp[imp]]
        ends = ends[ends <= half_t]
        end = int(ends.max()) if len(ends) else int(s.start_ns[w].min())
        if end > start:
            out[int(pid)] = (start, end)
    return out


def children_warning(ch: dict | None) -> str | None:
    if not ch or ch["cpu_s_total"] <= 0:
        return None
    if ch.get("followed"):
        nf = [r for r in ch["processes"] if not r.get("followed")]
        rest = ""
        if nf:
            top = ", ".join(f"{r['comm']} [{r['pid']}] {r['cpu_s']:.2f} CPU-s" for r in nf[:3])
            rest = (f" {len(nf)} child process(es) were not followed (not Python, multiprocessing's helpers, or without InferScope's "
                    f"environment) and used {sum(r['cpu_s'] for r in nf):.2f} CPU-s that were not profiled: {top}.")
        return (f"{ch['count']} child process(es) used {ch['cpu_s_total']:.2f} CPU-s; {ch['followed']} Python child "
                f"process(es) were followed (sampled: their functions are in the culprit tables, thread 'main (<pid>)'), "
                f"and the program waited {ch['waiting_on_children_ms']:.1f} ms while a followed child was on-CPU"
                + (f", {ch['waiting_on_child_startup_ms']:.1f} ms of its waiting while a child was starting (the child's "
                   "interpreter and imports: start-up, not the child's work; a pool started once and reused pays it once)"
                   if ch.get("waiting_on_child_startup_ms") else "") + "." + unlisted_text(ch) + rest)
    top = ", ".join(f"{r['comm']} [{r['pid']}] {r['cpu_s']:.2f} CPU-s" for r in ch["processes"][:3])
    return (f"{ch['count']} child process(es) used {ch['cpu_s_total']:.2f} CPU-s that were not profiled "
            f"(~{ch['cpu_s_in_window']:.2f} CPU-s inside the window, estimate)" + (f": {top}" if top else "") +
            "." + unlisted_text(ch) + " Their work is not in the breakdown or the culprit tables (not Python, or following turned off: "
            "follow_children / INFERSCOPE_FOLLOW_CHILDREN=0); time the main process spends waiting on them shows as waiting. "
            + follow_hint(ch))


def unlisted_text(ch: dict) -> str:
    """How much of the children's CPU inside the window no process row names (' ' + a sentence, or '')."""
    u = ch.get("unlisted_cpu_s_in_window")
    if not u or u < 0.005:
        return ""
    return (f" {u:.2f} CPU-s of it ran in children no /proc listing named (started and reaped between two listings "
            "~0.5 s apart, or a child's CPU after its last listing): counted in the total, in no process row.")


def follow_hint(ch: dict) -> str:
    """How to see unfollowed children's functions, by why they were not followed."""
    if ch.get("following") is False:
        return ("To see their functions: run again with following on (the default: unset INFERSCOPE_FOLLOW_CHILDREN or set "
                "it to 1, follow_children: true); Python workers are followed whatever their start method (fork: DataLoader's "
                "default on Linux, spawn, forkserver), each sampled under its own pid.")
    return ("Following was on: these children are not Python, are multiprocessing's helpers, or were started without "
            "InferScope's environment (a cleared env=, a fresh interpreter outside the process tree); a Python one can "
            "be profiled on its own with inferscope run, or by calling its work function in the main process.")


def leading_child_startup(trace: Trace) -> dict | None:
    """The followed children's start-up, up to the first one's end (the first worker ready), as the program's start-up
    (run_phases' ``child_startup`` rule): when every followed child starts at once (each child's start-up, ``child_startups``, begins before the first of them
    ends: a pool started once, not a process per item), in the first half of the trace, and the main process's
    main thread does no sampled work (samples other than 'waiting' / 'run_queue') through at least half of it.
    Returns {start_ns, end_ns, pids} or None."""
    su = child_startups(trace)
    root = root_pid(trace)
    if not su or root is None:
        return None
    first_end = min(b for _, b in su.values())
    if any(a > first_end for a, _ in su.values()):      # started again later: a start-up paid per item is steady
        return None
    # to the first child's start-up end: from then a worker serves, and the main process waits on its work
    a, e = min(a for a, _ in su.values()), first_end
    lo, hi = trace.bounds_ns()
    if a > lo + (hi - lo) // 2:
        return None
    if _main_work_ns(trace, root, a, e) >= 0.5 * (e - a):
        return None
    return {"start_ns": a, "end_ns": e, "pids": sorted(su)}


def _main_work_ns(trace: Trace, root: int, a: int, b: int) -> int:
    """Sampled time of the main process's main thread in [a, b) doing anything but wait (off-CPU 'waiting', or
    'run_queue': runnable, not running)."""
    s, tr = trace.spans, trace.tracks
    main = (tr.kind == TrackKind.CPU_THREAD) & (tr.pid == root) & (tr.tid == root)
    idle = np.isin(s.name, [i for i in (trace.strings.get(c) for c in V.OFF_CPU_CLASSES) if i >= 0])
    m = main[s.track] & (s.kind == SpanKind.CPU_SAMPLE) & ~idle & (s.start_ns < b) & (s.end_ns > a)
    return int((np.minimum(s.end_ns[m], b) - np.maximum(s.start_ns[m], a)).sum())


def trailing_child_exit(trace: Trace) -> dict | None:
    """The main process's wait for its followed children to exit, as teardown (run_phases' ``child_exit`` rule):
    from the children's last recorded event (their samplers stop before their interpreter and module teardown,
    which a torch worker can take a second for) to the end of the run, when that lies in the second half of the
    trace and the main process's main thread does no sampled work (samples other than 'waiting' / 'run_queue')
    through at least half of it.  Returns {start_ns, end_ns, pids} or None."""
    kids = child_process_tracks(trace)
    root = root_pid(trace)
    s, tr = trace.spans, trace.tracks
    if root is None or not kids.any():
        return None
    k = kids[s.track]
    if not k.any():
        return None
    t0 = int(s.end_ns[k].max())
    lo, hi = trace.bounds_ns()
    if not (lo + (hi - lo) // 2 < t0 < hi):
        return None
    if _main_work_ns(trace, root, t0, hi) >= 0.5 * (hi - t0):
        return None
    return {"start_ns": t0, "end_ns": hi, "pids": sorted(np.unique(tr.pid[s.track[k]]).tolist())}
