"""Collected events -> Trace columns (shared by the live session and the crash-journal reader).

Events are the ring buffer's tuples (buffer.py):
  span:    (0, span_kind, tid, start_ns, end_ns, name, detail, cat[, ticks])  ticks: a CPU_SAMPLE run's sampler
           ticks (stored in the span's correlation column)
  counter: (1, metric, device, ts_ns, value)
Each thread gets one CPU_THREAD track (named "<thread name> (<tid>)", the main thread "main"),
each (metric, device) one COUNTER track.  CPU_SAMPLE spans of threads never seen on CPU are
dropped (idle pool threads would only add "waiting" rows).
"""
from __future__ import annotations

import numpy as np

from ..trace.kinds import SpanKind, TrackKind


def overflow_warning(dropped: int, size_mb: float, capacity: int) -> str:
    return (f"trace buffer overflow: the oldest {dropped} events were dropped "
            f"(buffer {size_mb:g} MB ~ {capacity} events); increase INFERSCOPE_TRACE_SIZE_MB")


def add_events(b, events, *, pid: int, main_tid: int | None, thread_names: dict, idle_tids) -> None:
    """Append ``events`` to TraceBuilder ``b``."""

    tracks: dict = {}
    ctracks: dict = {}
    S = b.strings.intern
    cols = {k: [] for k in ("start_ns", "end_ns", "track", "kind", "name", "detail", "cat", "correlation")}
    cnt = {"track": [], "ts_ns": [], "value": []}
    cs = int(SpanKind.CPU_SAMPLE)
    idle = set(idle_tids or ())
    for ev in events:
        if ev[0] == 0:
            _, kind, tid, st, en, name, detail, cat, *more = ev     # more: the sampler's tick count
            if kind == cs and tid in idle:
                continue
            tr = tracks.get(tid)
            if tr is None:
                nm = "main" if tid == main_tid else thread_names.get(tid, "")
                tr = tracks[tid] = b.track(TrackKind.CPU_THREAD, pid=pid, tid=tid, name=f"{nm} ({tid})" if nm else "")
            cols["start_ns"].append(st)
            cols["end_ns"].append(en)
            cols["track"].append(tr)
            cols["kind"].append(kind)
            cols["name"].append(S(name))
            cols["detail"].append(S(detail) if detail else -1)
            cols["cat"].append(S(cat) if cat else -1)
            cols["correlation"].append(more[0] if more and kind == cs else -1)
        else:
            _, metric, dev, ts, val = ev
            key = (metric, dev)
            tr = ctracks.get(key)
            if tr is None:
                tr = ctracks[key] = b.track(TrackKind.COUNTER, pid=pid if dev < 0 else -1, device=dev, name=metric)
            cnt["track"].append(tr)
            cnt["ts_ns"].append(ts)
            cnt["value"].append(val)
    if cols["start_ns"]:
        b.add_spans(**{k: np.asarray(v) for k, v in cols.items()})
    if cnt["ts_ns"]:
        b.add_counters(np.asarray(cnt["track"]), np.asarray(cnt["ts_ns"]), np.asarray(cnt["value"]))
