"""Synchronisation: the host calls that block until the GPU gets somewhere, how long, and the
CPU op that issued them.

The set is exactly the breakdown's ``sync_wait`` source (``classify.sync_api_mask``):
device/stream/event synchronize, blocking (non-Async) cudaMemcpy/Memset, and *Async copies
with a pageable host side (the driver stages them; the call returns when the copy is done).
Stream-wait-event calls are counted apart (a GPU-side wait, the host is not blocked); tiny D2H
reads (<= thresholds.TINY_D2H_BYTES) are the signature of `.item()` / `.cpu()` on a scalar.

Times: ``calls_sum_ms`` sums every call's duration clipped to the window (the sync table's rows
add up to it); ``blocked_ms`` is their union (wall time the host spent blocked; calls on several
threads overlap); the breakdown's ``sync_wait`` is the part of that union with no GPU activity.
"""
from __future__ import annotations

import numpy as np

from .. import thresholds
from ..trace.kinds import CopyKind, SpanKind
from ..trace.model import Trace
from .classify import api_base_name, pageable_copy_launch_mask, stream_wait_mask, sync_api_mask
from .intervals import clip, total
from .links import ancestors_of_kind, launchers_for, sampled_function_at
from .select import in_window
from .stats import fast_unique
from .window import Window


def syncs(trace: Trace, window: Window, top_n: int = 20) -> dict:
    s = trace.spans
    lo, hi = window.start_ns, window.end_ns
    inwin = np.zeros(len(s), dtype=bool)     # the window rule of every section (select.in_window)
    inwin[in_window(trace, np.ones(len(s), dtype=bool), window)] = True
    m = sync_api_mask(trace) & inwin
    idx = np.flatnonzero(m)
    st, en = clip(s.start_ns[idx], s.end_ns[idx], lo, hi)
    blocked_union_ns = total(st, en)
    dur = np.minimum(s.end_ns[idx], hi) - np.maximum(s.start_ns[idx], lo)
    op = ancestors_of_kind(trace, idx, SpanKind.CPU_OP) if len(idx) else np.zeros(0, dtype=np.int64)
    pg = pageable_copy_launch_mask(trace)[idx]
    # group by (API name, pageable?, issuing op name), vectorised over the calls; without a recorded op
    # (CUPTI as the GPU source records no torch ops) the Python line the sampler saw issue the call
    op_name = np.where(op >= 0, s.name[np.maximum(op, 0)], -2).astype(np.int64)
    if (op < 0).any():
        fn = sampled_function_at(trace, idx[op < 0])
        op_name[op < 0] = np.where(fn >= 0, fn, -2)
    key = ((s.name[idx].astype(np.int64) + 2) << 33) | (pg.astype(np.int64) << 32) | (op_name + 2)
    uk, inv = fast_unique(key, return_inverse=True) if len(key) else (key, key)
    g_count = np.bincount(inv, minlength=len(uk))
    g_sum = np.bincount(inv, weights=dur.astype(np.float64), minlength=len(uk))
    g_max = np.zeros(len(uk), dtype=np.int64)
    np.maximum.at(g_max, inv, dur)
    rows = []
    for j in np.argsort(-g_sum, kind="stable").tolist():
        k = int(uk[j])
        nid, is_pg, oid = (k >> 33) - 2, (k >> 32) & 1, (k & 0xFFFFFFFF) - 2
        rows.append({"api": api_base_name(trace.strings[nid] if nid >= 0 else "") + (" (pageable copy)" if is_pg else ""),
                     "issued_by": trace.strings[oid] if oid >= 0 else "(no enclosing op)",
                     "count": int(g_count[j]), "ms": float(g_sum[j]) / 1e6, "max_ms": int(g_max[j]) / 1e6})
    by_api: dict[str, list] = {}
    for r in rows:
        a = by_api.setdefault(r["api"], [0, 0.0])
        a[0] += r["count"]
        a[1] += r["ms"]
    if len(rows) > top_n:   # the table keeps every call: the rest in one row, so its total is calls_sum_ms
        rest = rows[top_n - 1:]
        rows = rows[:top_n - 1] + [{"api": f"({len(rest)} more groups)", "issued_by": "", "count": sum(r["count"] for r in rest),
                                    "ms": sum(r["ms"] for r in rest), "max_ms": max(r["max_ms"] for r in rest)}]
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
        fn = np.full(len(didx), -1, dtype=np.int64)
        no_op = (ops < 0) & has
        if no_op.any():      # no recorded op: the sampled Python line of the launching call
            fn[no_op] = sampled_function_at(trace, lsrc[no_op])
        for o, f in zip(ops.tolist(), fn.tolist()):
            nm = trace.name_of(o) if o >= 0 else (trace.strings[f] if f >= 0 else "(unknown)")
            tiny_ops[nm] = tiny_ops.get(nm, 0) + 1
    return {
        "count": int(len(idx)),
        "blocked_ms": blocked_union_ns / 1e6,
        "blocked_pct": 100.0 * blocked_union_ns / window.dur_ns if window.dur_ns else 0.0,
        "calls_sum_ms": float(dur.sum()) / 1e6,
        "pageable_copy_calls": int(pg.sum()),
        "pageable_copy_calls_sum_ms": float(dur[pg].sum()) / 1e6,
        "by_api": [{"api": k, "count": v[0], "ms": v[1]} for k, v in sorted(by_api.items(), key=lambda kv: -kv[1][1])],
        "top": rows,
        "stream_wait_count": int(waits.sum()),
        "tiny_d2h": {"count": int(len(didx)), "threshold_bytes": thresholds.TINY_D2H_BYTES,
                     "issued_by": [{"op": k, "count": v} for k, v in sorted(tiny_ops.items(), key=lambda kv: -kv[1])][:top_n]},
    }


def sync_table(sy: dict) -> dict:
    cols = ["api", "issued_by", "count", "sum_ms", "max_ms"]
    rows = [[r["api"], r["issued_by"], r["count"], round(r["ms"], 6), round(r["max_ms"], 6)] for r in sy.get("top", [])]
    return {"columns": cols, "rows": rows}
