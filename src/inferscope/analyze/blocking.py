"""Why the inference thread is off-CPU: blocking I/O and lock waits, named by system call, file and the
Python frame that waits (live runs; the marks of collect/blocking.py).  Section ``contention.blocking``;
its findings ``blocking_io`` and ``lock_wait`` are in diagnosis_blocking.py.

Rules (over the window, the critical threads of analyze/threads.py):
- The sampler's ``waiting`` time of a thread (CPU_SAMPLE spans of class waiting; run-queue delay is
  not waiting for I/O) is charged to the label in force on that thread: the last ``inferscope.offcpu``
  mark at or before each instant (a mark is written when the syscall/file/frame seen at a tick of a
  mostly-off-CPU thread changes, at the start of the interval it describes).  Waiting under a
  ``running`` mark (the off-CPU part of a mostly-on-CPU tick interval) or before any mark is
  ``unattributed``, and so is the last piece of a wait that runs past the window's end (its label was
  read at a tick after the end: at exit, the join of a thread after the timed reads).
- kind of a call (vocab.kind_of): io (read/write/pread64/fsync/openat/...), lock (futex),
  sleep, poll, other.  blocking_io = io time; rows by (syscall, frame, directory), the file with the
  most time named, with its open flags (O_DIRECT, O_DSYNC, O_SYNC) and the byte count of read/write.
- gil: futex waits whose deadline was within the GIL switch interval at the tick (CPython's take_gil
  waits one switch interval at a time): the GIL, not a lock; left out of lock.
- lock: the other futex time; the part of it during which another thread of the process ran Python
  (contention.PYTHON_SAMPLE_CLASSES) is ``python_overlap_ms`` (GIL-like: that thread may hold the
  GIL or the lock; gil_contention covers it) and is left out of ``lock_ms``.  For the rest, what the
  other threads of the process were doing at the same time (their own labels: "off-CPU in
  clock_nanosleep at f.py:12 holder", or "running <function>"): a thread sleeping or blocked while
  the waiter waits is the likely holder.
"""
from __future__ import annotations

import json
import os

import numpy as np

from .. import vocab as V
from ..vocab import OFFCPU_CAT as CAT, RUNNING, kind_of
from ..trace.kinds import SpanKind, TrackKind
from ..trace.model import Trace
from .select import overlap
from .threads import native_thread_tracks
from .window import Window
from .intervals import clip, overlap_with_union, union

PY_CLASSES = V.PYTHON_CLASSES


def _kind(label) -> str:
    """io | lock | gil | sleep | poll | other: a futex wait with a deadline within the switch interval is
    CPython's GIL wait (collect/blocking.Probe._short_timeout), not a lock."""
    nm, info = label
    if nm == "futex" and info.get("short_timeout"):
        return "gil"
    return kind_of(nm)


def _labels(trace: Trace) -> tuple[dict, list]:
    """track -> (sorted mark times, label ids); labels[i] = (name, info dict)."""
    s = trace.spans
    cid = trace.strings.get(CAT)
    if cid < 0:
        return {}, []
    idx = np.flatnonzero((s.kind == SpanKind.MARK) & (s.cat == cid))
    if not len(idx):
        return {}, []
    strs = trace.strings
    keys: dict = {}
    labels: list = []
    lab = np.empty(len(idx), np.int64)
    for j, (n, d) in enumerate(zip(s.name[idx].tolist(), s.detail[idx].tolist())):
        k = keys.get((n, d))
        if k is None:
            try:
                info = json.loads(strs[d]) if d >= 0 else {}
                if not isinstance(info, dict):
                    info = {}
            except (ValueError, TypeError):
                info = {}
            k = keys[(n, d)] = len(labels)
            labels.append((strs[n], info))
        lab[j] = k
    out = {}
    tr = s.track[idx]
    for t in np.unique(tr).tolist():
        m = tr == t
        ts = s.start_ns[idx][m]
        o = np.argsort(ts, kind="stable")
        out[t] = (ts[o], lab[m][o])
    return out, labels


def _segments(trace: Trace, track: int, marks, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The thread's waiting time in [lo, hi) cut at its marks: (start, end, label id; -1 = none)."""
    s = trace.spans
    wid = trace.strings.get(V.CLS_WAITING)
    if wid < 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    w = np.flatnonzero((s.kind == SpanKind.CPU_SAMPLE) & (s.track == track) & (s.name == wid)
                       & overlap(s.start_ns, s.end_ns, Window(lo, hi)))
    a = np.clip(s.start_ns[w], lo, hi)
    b = np.clip(s.end_ns[w], lo, hi)
    past = (b < s.end_ns[w]).tolist()      # cut at hi: runs past the window
    if marks is None:
        return a, b, np.full(len(a), -1, np.int64)
    mt, ml = marks
    A, B, L = [], [], []
    for x, y, over in zip(a.tolist(), b.tolist(), past):
        if y <= x:
            continue
        j = int(np.searchsorted(mt, x, "right")) - 1
        k = int(np.searchsorted(mt, y, "left"))
        cur, cl = x, (int(ml[j]) if j >= 0 else -1)
        for i in range(j + 1, k):
            m = int(mt[i])
            if m > cur:
                A.append(cur)
                B.append(m)
                L.append(cl)
                cur = m
            cl = int(ml[i])
        A.append(cur)
        B.append(y)
        # a wait running past the window's end: its last label was read at a tick after the end (the
        # join at exit, not the reads before it): not charged to the window
        L.append(-1 if over else cl)
    return np.asarray(A, np.int64), np.asarray(B, np.int64), np.asarray(L, np.int64)


def _overlap_by_key(a: np.ndarray, b: np.ndarray, c: np.ndarray, d: np.ndarray, keys: list) -> dict:
    """Sum over key of the overlap of disjoint intervals (a, b) with disjoint intervals (c, d) (key per (c, d))."""
    out: dict = {}
    if not len(a) or not len(c):
        return out
    oa = np.argsort(a, kind="stable")
    oc = np.argsort(c, kind="stable")
    a, b = a[oa].tolist(), b[oa].tolist()
    c, d = c[oc].tolist(), d[oc].tolist()
    keys = [keys[i] for i in oc.tolist()]
    i = j = 0
    while i < len(a) and j < len(c):
        ov = min(b[i], d[j]) - max(a[i], c[j])
        if ov > 0:
            out[keys[j]] = out.get(keys[j], 0) + ov
        if b[i] < d[j]:
            i += 1
        else:
            j += 1
    return out


def _python_union(trace: Trace, tracks: list, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    s = trace.spans
    ids = [trace.strings.get(n) for n in PY_CLASSES]
    ids = [i for i in ids if i >= 0]
    m = (s.kind == SpanKind.CPU_SAMPLE) & np.isin(s.track, tracks) & np.isin(s.name, ids) \
        & overlap(s.start_ns, s.end_ns, Window(lo, hi))
    return union(*clip(s.start_ns[m], s.end_ns[m], lo, hi))


def _other_states(trace: Trace, track: int, marks, labels: list, lo: int, hi: int) -> tuple[list, list, list, list]:
    """Another thread's time as (start, end, description): its labelled waiting and its on-CPU samples."""
    a, b, lab = _segments(trace, track, marks, lo, hi)
    keys = []
    for x in lab.tolist():
        if x < 0 or labels[x][0] == RUNNING:
            keys.append("off-CPU")
        else:
            nm, info = labels[x]
            keys.append(f"off-CPU in {nm}" + (f" at {info['frame']}" if info.get("frame") else ""))
    s = trace.spans
    wid = trace.strings.get(V.CLS_WAITING)
    on = np.flatnonzero((s.kind == SpanKind.CPU_SAMPLE) & (s.track == track) & (s.name != wid)
                        & overlap(s.start_ns, s.end_ns, Window(lo, hi)))
    strs = trace.strings
    if not len(a) and not len(on) and marks is not None:
        # a thread never seen mostly on-CPU has no samples (assemble.py drops idle threads' runs) but
        # keeps its marks: its state is their step function (a lock holder that sleeps 40 ms at a time)
        mt, ml = marks
        ends = np.append(mt[1:], hi)
        A, B, keys = [], [], []
        for x, y, k in zip(mt.tolist(), ends.tolist(), ml.tolist()):
            x, y = max(x, lo), min(y, hi)
            if y > x:
                nm, info = labels[k]
                A.append(x)
                B.append(y)
                keys.append("running" if nm == RUNNING else
                            f"off-CPU in {nm}" + (f" at {info['frame']}" if info.get("frame") else ""))
        return A, B, keys
    A = a.tolist() + np.clip(s.start_ns[on], lo, hi).tolist()
    B = b.tolist() + np.clip(s.end_ns[on], lo, hi).tolist()
    for n, d in zip(s.name[on].tolist(), s.detail[on].tolist()):
        cls = strs[n]
        keys.append("runnable, waiting for a CPU" if cls == V.CLS_RUN_QUEUE else
                    f"running {cls}" + (f" ({strs[d]})" if d >= 0 else ""))
    return A, B, keys


def blocking(trace: Trace, lo: int, hi: int, crit: np.ndarray) -> dict | None:
    """The section (None without off-CPU marks: not a live run, or the probe was off)."""
    by_track, labels = _labels(trace)
    if not labels:
        return None
    tr = trace.tracks
    win = max(1, hi - lo)
    ctracks = [int(t) for t in np.flatnonzero(crit & (tr.kind == TrackKind.CPU_THREAD))]
    waiting = attributed = 0
    per_label: dict = {}      # (track, label) -> ns
    lock_pieces: dict = {}    # track -> (a, b) of futex time
    for t in ctracks:
        a, b, lab = _segments(trace, t, by_track.get(t), lo, hi)
        d = b - a
        waiting += int(d.sum())
        for x, ns in zip(lab.tolist(), d.tolist()):
            if x < 0 or labels[x][0] == RUNNING:
                continue
            attributed += ns
            per_label[(t, x)] = per_label.get((t, x), 0) + ns
        fl = np.array([x >= 0 and _kind(labels[x]) == "lock" for x in lab.tolist()], bool)
        if fl.any():
            lock_pieces[t] = (a[fl], b[fl])
    kinds = {"io": 0, "lock": 0, "gil": 0, "sleep": 0, "poll": 0, "other": 0}
    by_sys: dict = {}
    rows: dict = {}
    for (t, x), ns in per_label.items():
        nm, info = labels[x]
        k = _kind(labels[x])
        kinds[k] += ns
        by_sys[(nm, k)] = by_sys.get((nm, k), 0) + ns
        path = info.get("path")
        key = (t, nm, info.get("frame"), os.path.dirname(path) if path else None)
        r = rows.get(key)
        if r is None:
            r = rows[key] = {"kind": k, "syscall": nm, "frame": info.get("frame"), "via": info.get("via"),
                             "thread": trace.track_label(t), "ms": 0.0, "paths": {}, "flags": set(), "sizes": {},
                             "timed": None}
        r["ms"] += ns / 1e6
        if path:
            r["paths"][path] = r["paths"].get(path, 0) + ns
        r["flags"].update(info.get("flags") or ())
        if info.get("size") is not None:
            r["sizes"][int(info["size"])] = r["sizes"].get(int(info["size"]), 0) + ns
        if "timed" in info:
            r["timed"] = bool(info["timed"]) or bool(r["timed"])
    calls = []
    for r in sorted(rows.values(), key=lambda r: (-r["ms"], r["syscall"], r["frame"] or "")):
        paths, sizes = r.pop("paths"), r.pop("sizes")
        r["path"] = max(paths, key=paths.get) if paths else None
        r["files"] = len(paths)
        r["flags"] = sorted(r["flags"])
        r["size"] = max(sizes, key=sizes.get) if sizes else None
        r["pct_of_window"] = 100.0 * r["ms"] * 1e6 / win
        calls.append(r)
    # lock waits: what the other threads of the process did meanwhile
    lock_ns = sum(int((b - a).sum()) for a, b in lock_pieces.values())
    py_ns = 0
    others: dict = {}
    if lock_pieces:
        pids = np.unique(tr.pid[crit])
        oth = (tr.kind == TrackKind.CPU_THREAD) & ~crit & np.isin(tr.pid, pids) & ~native_thread_tracks(trace)
        otracks = [int(t) for t in np.flatnonzero(oth)]
        pu = _python_union(trace, otracks, lo, hi)
        for t, (a, b) in lock_pieces.items():
            py_ns += int(overlap_with_union(a, b, pu[0], pu[1]).sum()) if len(pu[0]) else 0
            for o in otracks:
                A, B, keys = _other_states(trace, o, by_track.get(o), labels, lo, hi)
                for key, ns in _overlap_by_key(a, b, np.asarray(A, np.int64), np.asarray(B, np.int64), keys).items():
                    k2 = (trace.track_label(o), key)
                    others[k2] = others.get(k2, 0) + ns
    lock_others = [{"thread": th, "state": st, "ms": ns / 1e6, "pct_of_lock_wait": 100.0 * ns / lock_ns if lock_ns else 0.0}
                   for (th, st), ns in sorted(others.items(), key=lambda kv: (-kv[1], kv[0]))[:5]]
    net_lock = max(0, lock_ns - py_ns)
    return {
        "waiting_ms": waiting / 1e6, "attributed_ms": attributed / 1e6,
        "io_ms": kinds["io"] / 1e6, "io_pct_of_window": 100.0 * kinds["io"] / win,
        "lock_ms": net_lock / 1e6, "lock_pct_of_window": 100.0 * net_lock / win,
        "futex_ms": lock_ns / 1e6, "python_overlap_ms": py_ns / 1e6,
        "gil_ms": kinds["gil"] / 1e6, "sleep_ms": kinds["sleep"] / 1e6, "poll_ms": kinds["poll"] / 1e6, "other_ms": kinds["other"] / 1e6,
        "by_syscall": [{"syscall": n, "kind": k, "ms": ns / 1e6}
                       for (n, k), ns in sorted(by_sys.items(), key=lambda kv: (-kv[1], kv[0][0]))],
        "calls": calls[:12], "lock_others": lock_others,
        "basis": "the critical thread's sampled off-CPU time charged to the system call, file and Python frame it was "
                 "blocked in at the sampler's ticks (/proc/self/task/<tid>/syscall); time under no label is unattributed",
    }
