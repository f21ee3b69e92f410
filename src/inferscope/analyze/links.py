"""Host-call <-> GPU-activity links from the Trace's LAUNCH flows, as dense arrays; the sampled Python
function at a host call."""
from __future__ import annotations

import numpy as np

from ..trace.kinds import FlowKind, SpanKind
from ..trace.model import Trace


def launchers_for(trace: Trace, idx: np.ndarray) -> np.ndarray:
    """Launching host call of each span in idx (-1 none), without a full-length array."""
    f = trace.flows
    out = np.full(len(idx), -1, dtype=np.int64)
    if not len(f) or not len(idx):
        return out
    dst, src = _launch_links(trace)
    if not len(dst):
        return out
    # idx in dst's int32 (span indices fit): searchsorted would otherwise convert all of dst to int64
    q = idx.astype(dst.dtype) if len(trace.spans) <= np.iinfo(dst.dtype).max else idx
    pos = np.searchsorted(dst, q)
    np.minimum(pos, len(dst) - 1, out=pos)      # past the end: dst[-1] < q, no match
    ok = dst[pos] == q
    del q
    np.copyto(out, src[pos], where=ok)
    return out


def _launch_links(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """(dst, src) of the LAUNCH flows sorted by dst (stable), made once per trace: the analyses ask
    for launchers ~10 times (a Trace is immutable once built; cached like classify._memo)."""
    f = trace.flows
    cache = trace.__dict__.setdefault("_mask_cache", {})
    v = cache.get("launch_links")
    if v is None or v[2] != len(f):
        m = f.kind == FlowKind.LAUNCH
        dst = f.dst[m]
        src = f.src[m]
        if len(dst) > 1 and not bool(np.all(dst[1:] >= dst[:-1])):
            o = np.argsort(dst, kind="stable")
            dst = dst[o]
            src = src[o]
            del o
        v = cache["launch_links"] = (dst, src, len(f))
    return v[0], v[1]


def ancestors_of_kind(trace: Trace, idx: np.ndarray, kind: int, max_depth: int = 64) -> np.ndarray:
    """For each span in idx, the nearest ancestor (parent chain) of the given kind, or -1."""
    s = trace.spans
    cur = s.parent[idx].astype(np.int64)
    out = np.full(len(idx), -1, dtype=np.int64)
    todo = cur >= 0
    for _ in range(max_depth):
        if not todo.any():
            break
        c = cur[todo]
        hit = s.kind[c] == kind
        ti = np.flatnonzero(todo)
        out[ti[hit]] = c[hit]
        nxt = s.parent[c].astype(np.int64)
        nxt[hit] = -1
        cur[ti] = nxt
        todo = cur >= 0
        todo[ti[hit]] = False
    return out


def sampled_function_at(trace: Trace, idx: np.ndarray) -> np.ndarray:
    """For each span in ``idx``: the string id of the function the live sampler saw on the same
    thread at the span's start (the ``detail`` of the CPU_SAMPLE run covering it: "file:func:line"),
    or -1.  Names the Python line that issued a CUDA call when no framework op was recorded (CUPTI
    as the GPU source records API calls, not torch ops)."""
    s = trace.spans
    out = np.full(len(idx), -1, dtype=np.int64)
    if not len(idx):
        return out
    cs = np.flatnonzero((s.kind == int(SpanKind.CPU_SAMPLE)) & (s.detail >= 0))
    if not len(cs):
        return out
    tracks = s.track[idx]
    for tr in np.unique(tracks).tolist():
        c = cs[s.track[cs] == tr]
        if not len(c):
            continue
        c = c[np.argsort(s.start_ns[c], kind="stable")]
        q = np.flatnonzero(tracks == tr)
        t = s.start_ns[idx[q]]
        pos = np.searchsorted(s.start_ns[c], t, side="right") - 1
        ok = pos >= 0
        hit = np.zeros(len(q), dtype=bool)
        hit[ok] = s.end_ns[c[pos[ok]]] >= t[ok]
        out[q[hit]] = s.detail[c[pos[hit]]]
    return out
