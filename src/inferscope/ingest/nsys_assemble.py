"""Launch flows and the final assembly of Nsight Systems parts into a Trace.

``_launch_flows`` joins GPU activities to the runtime/driver rows on ``(pid, correlationId)``
(correlation ids repeat across processes).  ``_assemble`` builds the sorted span table with
bounded memory: one stable argsort of start with ties re-sorted by -end (``_span_order``), every
other column scattered from its part straight into sorted order, flows remapped to sorted
indices, then counters and depth/parent (bench/README.md).
"""
from __future__ import annotations

import numpy as np

from ..trace.builder import TraceBuilder, assemble_counters, compute_depth_parent
from ..trace.kinds import FlowKind, SpanKind
from ..trace.model import SPAN_COLUMNS, SPAN_DEFAULTS, Flows, Spans, Trace, Tracks


def _launch_flows(runtime_part, gpu_parts, sync_parts, all_parts, warnings):
    """(pid, correlation) join of GPU activities to runtime/driver rows.

    Returns (src, dst, kind) in provisional indices (parts concatenated in order), or
    (None, None, None) when there are none.
    """
    offs = {}
    off = 0
    for p in all_parts:
        offs[id(p)] = off
        off += len(p["start_ns"])
    if runtime_part is None or not len(runtime_part["start_ns"]):
        return None, None, None
    rkey = _corr_key(runtime_part["pid"], runtime_part["correlation"])
    valid = np.flatnonzero(rkey >= 0)
    o = valid[np.argsort(rkey[valid], kind="stable")]
    del valid
    rk_sorted = rkey[o]
    del rkey
    dup = int(np.count_nonzero(rk_sorted[1:] == rk_sorted[:-1])) if len(rk_sorted) > 1 else 0
    targets = [(q, FlowKind.LAUNCH) for q in gpu_parts] + [(q, FlowKind.OTHER) for q in sync_parts]
    hits = []
    for p, fk in targets:
        k = _corr_key(p["pid"], p["correlation"])
        if len(rk_sorted):
            pos = np.searchsorted(rk_sorted, k, side="left")
            np.minimum(pos, len(rk_sorted) - 1, out=pos)
            hit = rk_sorted[pos] == k
            hit &= k >= 0
        else:
            pos = np.zeros(len(k), dtype=np.int64)
            hit = np.zeros(len(k), dtype=bool)
        if fk == FlowKind.LAUNCH and len(k):
            miss = int(np.count_nonzero(k >= 0)) - int(np.count_nonzero(hit))
            if miss and p["kind"] is SpanKind.KERNEL:
                warnings.append(f"{miss} of {len(k)} kernels have no matching runtime/driver call on (pid, correlationId)")
        del k
        dst_local = np.flatnonzero(hit)
        src_pos = pos[dst_local]     # positions in rk_sorted
        del pos, hit
        hits.append((p, fk, dst_local, src_pos))
    if dup:
        warnings.append(f"{dup} runtime/driver rows share a (pid, correlationId) with another row; the first is used for launch links")
    del rk_sorted
    # one output array per end, filled part by part (no list of pieces to concatenate)
    nf = sum(len(h[2]) for h in hits)
    src = np.empty(nf, dtype=np.int64)
    dst = np.empty(nf, dtype=np.int64)
    kind = np.empty(nf, dtype=np.uint8)
    i = 0
    r_off = offs[id(runtime_part)]
    while hits:
        p, fk, dst_local, src_pos = hits.pop(0)
        m = len(dst_local)
        np.add(o[src_pos], r_off, out=src[i:i + m])
        del src_pos
        np.add(dst_local, offs[id(p)], out=dst[i:i + m])
        del dst_local
        kind[i:i + m] = int(fk)
        i += m
    return src, dst, kind


def _corr_key(pid: np.ndarray, corr: np.ndarray) -> np.ndarray:
    ok = (pid >= 0) & (corr >= 0) & (corr <= 0xFFFFFFFF)
    return np.where(ok, (pid.astype(np.int64) << 32) | corr.astype(np.int64), -1)


def _span_order(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Permutation sorting spans by (start, -end), stable: exactly ``np.lexsort((-ends, starts))``.

    One stable argsort of start (timsort: the parts are each nearly sorted, so this is a
    merge of long runs, ~10x cheaper than lexsort at 20M rows), then only the runs of equal
    starts are re-sorted by -end.
    """
    o = np.argsort(starts, kind="stable")
    if len(o) < 2:
        return o
    s = starts[o]
    eq = s[1:] == s[:-1]
    if eq.any():
        member = np.zeros(len(o), dtype=bool)
        member[1:] = eq
        member[:-1] |= eq
        tp = np.flatnonzero(member)
        del member
        sub = np.lexsort((-ends[o[tp]], s[tp]))   # stable: provisional order kept on full ties
        o[tp] = o[tp][sub]
    return o


def _assemble(b: TraceBuilder, parts: list[dict], flows: list) -> Trace:
    """Build the sorted span columns from the parts with bounded memory.

    Only start/end are ever concatenated; every other column is scattered from the parts
    straight into its sorted position (one preallocated output, each part's column dropped
    as soon as it is placed), so an unsorted full-length copy of a column never exists.
    ``parts`` and ``flows`` ([src, dst, kind] in provisional indices) are emptied, so the
    caller's references do not keep anything alive.
    """
    fsrc, fdst, fkind = flows
    flows.clear()
    n = sum(len(p["start_ns"]) for p in parts)
    tracks = Tracks(**{k: np.asarray(v) for k, v in b.track_rows().items()}) if b.n_tracks else Tracks.empty()
    sizes = [len(p["start_ns"]) for p in parts]
    offs = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64).tolist()

    def concat(key, dtype):
        out = np.empty(n, dtype=dtype)
        for p, a, z in zip(parts, offs[:-1], offs[1:]):
            out[a:z] = p.pop(key)
        return out

    starts = concat("start_ns", np.int64)
    ends = concat("end_ns", np.int64)
    np.maximum(ends, starts, out=ends)  # never a negative duration
    order = _span_order(starts, ends)
    cols = {"start_ns": starts[order]}
    del starts
    cols["end_ns"] = ends[order]
    del ends
    # inverse permutation: provisional index -> sorted position (int32 halves its size)
    idt = np.int32 if n < (1 << 31) else np.int64
    inv = np.empty(n, dtype=idt)
    inv[order] = np.arange(n, dtype=idt)
    del order
    for k, dtype in SPAN_COLUMNS.items():
        if k in cols:
            continue
        if k in ("depth", "parent"):
            # never set by parts; compute_depth_parent (below) replaces both with fresh arrays.
            # np.zeros is calloc'd: the placeholder costs no resident memory.
            cols[k] = np.zeros(n, dtype=dtype)
            for p in parts:
                p.pop(k, None)
            continue
        col = np.empty(n, dtype=dtype)
        for p, a, z in zip(parts, offs[:-1], offs[1:]):
            v = p.pop(k, None)
            if v is None:
                v = SPAN_DEFAULTS.get(k, -1)
            if np.ndim(v) == 0:
                col[inv[a:z]] = int(v)
            else:
                col[inv[a:z]] = np.asarray(v, dtype=dtype)
            del v
        cols[k] = col
        del col
    spans = Spans(**cols)
    del cols
    if fsrc is not None and len(fsrc):
        fl = Flows(src=inv[fsrc], dst=inv[fdst], kind=fkind)
    else:
        fl = Flows.empty()
    del inv, fsrc, fdst, fkind
    ctr = assemble_counters(b._counter_chunks)      # GPU_METRICS
    trace = Trace(strings=b.strings, tracks=tracks, spans=spans, flows=fl,
                  counters=ctr, meta=dict(b.meta))
    compute_depth_parent(trace)
    return trace
