"""Merge traces recorded on the same clock (a live run and its followed child processes) into one."""
from __future__ import annotations

import numpy as np

from .builder import TraceBuilder
from .kinds import TrackKind
from .model import SPAN_COLUMNS, Trace

_STRING_COLS = ("name", "cat", "detail")


def merge_traces(main: Trace, others: list[Trace]) -> Trace:
    """One trace holding every track, span, flow and counter of ``main`` and ``others`` (strings
    re-interned, nesting recomputed); meta is main's.  Tracks are keyed by (kind, pid, tid,
    device, name), so processes stay apart by pid."""
    if not others:
        return main
    b = TraceBuilder()
    b.meta = dict(main.meta)
    for t in [main] + list(others):
        sid = b.strings.intern_many(t.strings.as_list())
        names = t.strings.as_list()

        def remap(col, sid=sid):
            col = np.asarray(col, dtype=np.int64)
            out = np.full(len(col), -1, dtype=np.int32)
            ok = col >= 0
            out[ok] = sid[col[ok]]
            return out

        tr = t.tracks
        tmap = np.array([b.track(TrackKind(int(tr.kind[i])), int(tr.pid[i]), int(tr.tid[i]), int(tr.device[i]),
                                 names[int(tr.name[i])] if tr.name[i] >= 0 else "") for i in range(len(tr))], dtype=np.int32)
        s = t.spans
        if len(s):
            cols = {k: getattr(s, k) for k in SPAN_COLUMNS if k not in ("depth", "parent")}
            for k in _STRING_COLS:
                cols[k] = remap(cols[k])
            cols["track"] = tmap[s.track]
            base = b.add_spans(**cols)[0]
            f = t.flows
            if len(f):
                b.add_flows(f.src.astype(np.int64) + base, f.dst.astype(np.int64) + base, f.kind)
        c = t.counters
        if len(c):
            b.add_counters(tmap[c.track], c.ts_ns, c.value)
    out = b.finalize(compute_nesting=True)
    out.facts = main.facts      # the main process's recorded sampler facts (children's are not kept)
    return out
