"""Synchronisation: sync-like host calls, blocked time, and the CPU op that issued them.

Sync-like: device/stream/event synchronize, blocking (non-Async) cudaMemcpy/Memset,
*Async copies from/to pageable memory (they block the host like a synchronous copy),
stream-wait-event (counted; it does not block the host), and tiny D2H reads
(<= thresholds.TINY_D2H_BYTES), the signature of `.item()` / `.cpu()` on a scalar.
"""
from __future__ import annotations

import numpy as np

from .. import thresholds
from ..trace.kinds import CopyKind, SpanKind
from ..trace.model import Trace
from .classify import api_base_name, pageable_copy_launch_mask, stream_wait_mask, sync_api_mask
from .intervals import clip, total
from .links import ancestors_of_kind, launchers_for
from .window import Window


def syncs(trace: Trace, window: Window, top_n: int = 20) -> dict:
    s = trace.spans
    lo, hi = window.start_ns, window.end_ns
    inwin = (s.end_ns > lo) & (s.start_ns < hi)
    m = sync_api_mask(trace) & inwin
    idx = np.flatnonzero(m)
    st, en = clip(s.start_ns[idx], s.end_ns[idx], lo, hi)
    blocked_union_ns = total(st, en)
    dur = np.minimum(s.end_ns[idx], hi) - np.maximum(s.start_ns[idx], lo)
    op = ancestors_of_kind(trace, idx, SpanKind.CPU_OP) if len(idx) else np.zeros(0, dtype=np.int64)
    groups: dict[tuple[str, str], list] = {}
    names = trace.names(idx)
    pg = pageable_copy_launch_mask(trace)[idx]
    for j, (nm, o) in enumerate(zip(names, op.tolist())):
        api = api_base_name(nm) + (" (pageable copy)" if pg[j] else "")
        key = (api, trace.name_of(o) if o >= 0 else "(no enclosing op)")
        g = groups.setdefault(key, [0, 0, 0])
        g[0] += 1
        g[1] += int(dur[j])
        g[2] = max(g[2], int(dur[j]))
    rows = [{"api": k[0], "issued_by": k[1], "count": v[0], "ms": v[1] / 1e6, "max_ms": v[2] / 1e6}
            for k, v in sorted(groups.items(), key=lambda kv: -kv[1][1])]
    by_api: dict[str, list] = {}
    for r in rows:
        a = by_api.setdefault(r["api"], [0, 0.0])
        a[0] += r["count"]
        a[1] += r["ms"]
    waits = stream_wait_mask(trace) & inwin
    # tiny D2H reads: .item()-style
    d2h = (s.kind == SpanKind.MEMCPY) & (s.copy_kind == CopyKind.D2H) & inwin & \
          (s.bytes >= 0) & (s.bytes <= thresholds.TINY_D2H_BYTES)
    didx = np.flatnonzero(d2h)
    lsrc = launchers_for(trace, didx)
    tiny_ops: dict[str, int] = {}
    if len(didx):
        has = lsrc >= 0
        ops = np.full(len(didx), -1, dtype=np.int64)
        if has.any():
            ops[has] = ancestors_of_kind(trace, lsrc[has], SpanKind.CPU_OP)
        for o in ops.tolist():
            nm = trace.name_of(o) if o >= 0 else "(unknown)"
            tiny_ops[nm] = tiny_ops.get(nm, 0) + 1
    return {
        "count": int(len(idx)),
        "blocked_ms": blocked_union_ns / 1e6,
        "blocked_pct": 100.0 * blocked_union_ns / window.dur_ns if window.dur_ns else 0.0,
        "calls_ms": float(dur.sum()) / 1e6,
        "by_api": [{"api": k, "count": v[0], "ms": v[1]} for k, v in sorted(by_api.items(), key=lambda kv: -kv[1][1])],
        "top": rows[:top_n],
        "stream_wait_count": int(waits.sum()),
        "tiny_d2h": {"count": int(len(didx)), "threshold_bytes": thresholds.TINY_D2H_BYTES,
                     "issued_by": [{"op": k, "count": v} for k, v in sorted(tiny_ops.items(), key=lambda kv: -kv[1])][:top_n]},
    }


def sync_table(sy: dict) -> dict:
    cols = ["api", "issued_by", "count", "total_ms", "max_ms"]
    rows = [[r["api"], r["issued_by"], r["count"], round(r["ms"], 6), round(r["max_ms"], 6)] for r in sy.get("top", [])]
    return {"columns": cols, "rows": rows}
