"""The boundary check every Trace passes before analysis (importers, .iscope files, live runs).

Analyses assume the invariants of ARCHITECTURE.md ("Trace schema"); a hostile or damaged
input must not break them.  ``check(trace, name)``:
  * columns are 1-D (a 2-D column is a corrupt file, not a trace);
  * times lie within +-TIME_LIMIT_NS (so that any difference of two times and the window
    length fit in int64), durations are >= 0 and <= MAX_DUR_NS; other rows are dropped;
  * span/track/counter kinds and copy/memory kinds are known values (unknown -> OTHER/0);
  * track, name, cat, detail ids point into their tables (spans otherwise dropped/-1);
  * spans are sorted by (start, -end) (re-sorted otherwise) and every parent precedes its
    child (re-computed otherwise), so a parent walk always terminates;
  * flows point at spans, counters at tracks (others dropped), counters sorted;
  * strings longer than MAX_NAME_CHARS are cut with an ellipsis (one 1 MB name must not
    become a 300 MB timeline).
Dropped or repaired rows are counted in ``meta["warnings"]``; when nothing usable is left
the input is rejected with InputError.  Cost: a few vectorised passes over each column.
"""
from __future__ import annotations

import numpy as np

from ..errors import InputError
from .builder import compute_depth_parent
from .kinds import CopyKind, FlowKind, MemKind, SpanKind, TrackKind
from .model import Counters, Flows, Spans, Trace, Tracks

TIME_LIMIT_NS = 1 << 61          # +-73 years around the clock's zero (epoch-ns clocks fit)
MAX_DUR_NS = 1 << 53             # 104 days: longer spans are damage, not a profile
MAX_NAME_CHARS = 4096            # names carried into outputs (C++ kernel names stay whole)
_MAX_SPAN_KIND = max(SpanKind)
_BLOCK = 1 << 22
_MAX_TRACK_KIND = max(TrackKind)


def _warn(trace: Trace, msg: str) -> None:
    trace.meta.setdefault("warnings", []).append(msg)


def _set(table, col: str, where: np.ndarray, value) -> None:
    """table.col[where] = value without writing into the column (it may be a read-only view of the file)."""
    a = getattr(table, col)
    setattr(table, col, np.where(where, np.asarray(value, dtype=a.dtype), a).astype(a.dtype, copy=False))


def _cap_strings(trace: Trace) -> None:
    st = trace.strings
    lst = st.as_list()
    long_ = [i for i, s in enumerate(lst) if len(s) > MAX_NAME_CHARS]
    if not long_:
        return
    for i in long_:
        lst[i] = lst[i][: MAX_NAME_CHARS - 1] + "…"
    st._index = {}
    for i, s in enumerate(lst):
        st._index.setdefault(s, i)
    _warn(trace, f"{len(long_)} name(s) longer than {MAX_NAME_CHARS} characters were shortened")


def _scalar(v, text: int = 256):
    """A JSON scalar safe to format (finite numbers, short strings), else None."""
    if v is None or isinstance(v, bool):
        return v
    if isinstance(v, int):
        return v if -(1 << 63) <= v < (1 << 63) else None
    if isinstance(v, float):
        return v if v == v and abs(v) != float("inf") else None
    if isinstance(v, str):
        return v[:text]
    return None


def _clean_meta(meta: dict) -> None:
    """Meta from a file (an .iscope header) has the types analyses and renderers format."""
    for k in ("source_format", "source_file"):
        if k in meta and not isinstance(meta[k], str):
            meta[k] = None if meta[k] is None else str(_scalar(meta[k]))
    w = meta.get("warnings", [])
    meta["warnings"] = [str(x)[:1000] for x in w[:1000]] if isinstance(w, list) else []
    m = meta.get("missing", [])
    meta["missing"] = [str(x)[:200] for x in m[:1000]] if isinstance(m, list) else []
    tv = meta.get("tool_versions", {})
    meta["tool_versions"] = {str(k)[:64]: _scalar(v, 64) for k, v in list(tv.items())[:64]} if isinstance(tv, dict) else {}
    devs = meta.get("devices", [])
    out = []
    for d in devs[:64] if isinstance(devs, list) else []:
        if not isinstance(d, dict):
            continue
        did = d.get("id")
        out.append({"id": did if isinstance(did, int) and not isinstance(did, bool) and -1 <= did < (1 << 31) else len(out),
                    "name": _scalar(d.get("name")) if isinstance(d.get("name"), str) else None,
                    "total_memory_bytes": d.get("total_memory_bytes") if isinstance(d.get("total_memory_bytes"), int)
                    and not isinstance(d.get("total_memory_bytes"), bool) and 0 <= d["total_memory_bytes"] < (1 << 62) else None,
                    "sm_count": d.get("sm_count") if isinstance(d.get("sm_count"), int) and not isinstance(d.get("sm_count"), bool)
                    and 0 <= d["sm_count"] < (1 << 31) else None,
                    "compute_capability": _scalar(d.get("compute_capability"), 16) if isinstance(d.get("compute_capability"), str) else None})
    meta["devices"] = out
    for k in ("collection", "session", "profiler_config"):
        v = meta.get(k)
        if v is None:
            continue
        if not isinstance(v, dict):
            meta.pop(k)
            continue
        clean = {}
        for kk, vv in list(v.items())[:256]:
            if isinstance(vv, list):      # short lists of scalars (clock_sources) or flat records (cpu_sampling_threads)
                items = [{str(a)[:64]: _scalar(b) for a, b in list(x.items())[:16]} if isinstance(x, dict) else _scalar(x)
                         for x in vv[:64]]
                clean[str(kk)[:64]] = [x for x in items if x is not None]
                continue
            sv = _scalar(vv)
            if sv is not None or vv is None:
                clean[str(kk)[:64]] = sv
        # keys analyses use as numbers must be numbers
        for kk in ("cpu_sampling_hz_steady", "cpu_sampling_hz_achieved", "duration_ms", "trace_size_mb",
                   "start_ns", "end_ns", "duration_ns"):
            if kk in clean and (isinstance(clean[kk], (str, bool)) or clean[kk] is None):
                clean.pop(kk)
        meta[k] = clean


def check(trace: Trace, name: str = "trace") -> Trace:
    meta = trace.meta
    if not isinstance(meta, dict):
        raise InputError(f"{name}: corrupt trace (metadata is not an object)")
    _clean_meta(meta)
    for table in (trace.tracks, trace.spans, trace.flows, trace.counters):
        for col, a in table.columns().items():
            if a.ndim != 1:
                raise InputError(f"{name}: corrupt trace ({type(table).__name__.lower()}.{col} is not a 1-D column)")
    _cap_strings(trace)
    ns = len(trace.strings)
    tr = trace.tracks
    nt = len(tr)
    badk = tr.kind > _MAX_TRACK_KIND
    if badk.any():
        _set(tr, "kind", badk, TrackKind.OTHER)
        _warn(trace, f"{int(badk.sum())} track(s) of unknown kind treated as other")
    bn = (tr.name < -1) | (tr.name >= ns)
    if bn.any():
        _set(tr, "name", bn, -1)

    s = trace.spans
    n = len(s)
    keep = ((s.start_ns >= -TIME_LIMIT_NS) & (s.start_ns <= TIME_LIMIT_NS)
            & (s.end_ns >= -TIME_LIMIT_NS) & (s.end_ns <= TIME_LIMIT_NS))
    nt_bad = n - int(keep.sum())
    neg = keep & (s.end_ns < s.start_ns)
    long_ = np.zeros(n, dtype=bool)
    for a in range(0, n, _BLOCK):   # in blocks: no full-length int64 temporaries
        b = a + _BLOCK
        k = keep[a:b]
        long_[a:b] = k & ((np.where(k, s.end_ns[a:b], 0) - np.where(k, s.start_ns[a:b], 0)) > MAX_DUR_NS)
    keep &= ~neg & ~long_
    keep &= (s.track >= 0) & (s.track < nt)
    n_track = n - nt_bad - int(neg.sum()) - int(long_.sum()) - int(keep.sum())
    keep &= (s.name >= -1) & (s.name < ns)
    n_name = n - int(keep.sum()) - nt_bad - int(neg.sum()) - int(long_.sum()) - n_track
    dropped = n - int(keep.sum())
    if dropped:
        parts = []
        if nt_bad:
            parts.append(f"{nt_bad} with a time beyond +-{TIME_LIMIT_NS:.2e} ns")
        if neg.any():
            parts.append(f"{int(neg.sum())} ending before they start")
        if long_.any():
            parts.append(f"{int(long_.sum())} longer than {MAX_DUR_NS / 864e11:.0f} days")
        if n_track:
            parts.append(f"{n_track} on a missing track")
        if n_name:
            parts.append(f"{n_name} with a missing name")
        _warn(trace, f"skipped {dropped} span(s): " + ", ".join(parts))
    if dropped and n and dropped == n:
        raise InputError(f"{name}: no usable events ({'; '.join(trace.meta['warnings'][-1:])})")
    resort = dropped > 0
    if dropped:
        old_to_new = np.full(n, -1, dtype=np.int64)
        kidx = np.flatnonzero(keep)
        old_to_new[kidx] = np.arange(len(kidx))
        s = trace.spans = s.take(kidx)
        trace.flows = _remap_flows(trace.flows, old_to_new)
        del old_to_new, kidx
    del keep, neg, long_
    n = len(s)
    for col in ("cat", "detail"):
        a = getattr(s, col)
        b = (a < -1) | (a >= ns)
        if b.any():
            _set(s, col, b, -1)
    bk = s.kind > _MAX_SPAN_KIND
    if bk.any():
        _set(s, "kind", bk, SpanKind.OTHER)
        _warn(trace, f"{int(bk.sum())} span(s) of unknown kind treated as other")
    for col, mx in (("copy_kind", max(CopyKind)), ("src_mem", max(MemKind)), ("dst_mem", max(MemKind))):
        b = getattr(s, col) > mx
        if b.any():
            _set(s, col, b, 0)
    if n > 1 and not resort:
        st, en = s.start_ns, s.end_ns
        for a in range(0, n - 1, _BLOCK):
            b = min(n - 1, a + _BLOCK)
            s0, s1 = st[a:b], st[a + 1:b + 1]
            if (s1 < s0).any() or ((s1 == s0) & (en[a + 1:b + 1] > en[a:b])).any():
                resort = True
                break
        if resort:
            _warn(trace, "spans were not in time order; re-sorted")
    if resort and n:
        order = np.lexsort((-s.end_ns, s.start_ns))
        trace.spans = s = s.take(order)
        inv = np.empty(n, dtype=np.int64)
        inv[order] = np.arange(n)
        trace.flows = _remap_flows(trace.flows, inv)
    # parents must precede their children (and sit on the same track): a parent walk ends
    nbadp = 0
    p = s.parent
    for a in range(0, n, _BLOCK):
        b = min(n, a + _BLOCK)
        pb = p[a:b]
        idx = np.arange(a, b, dtype=np.int64)
        pc = np.clip(pb, 0, max(n - 1, 0))
        nbadp += int(((pb != -1) & ((pb < 0) | (pb >= idx) | (s.track[pc] != s.track[a:b]))).sum())
    if resort or nbadp or (s.depth < 0).any():
        if nbadp and not resort:
            _warn(trace, f"{nbadp} span(s) with an impossible parent; nesting recomputed")
        compute_depth_parent(trace)

    fl = trace.flows
    okf = (fl.src >= 0) & (fl.src < n) & (fl.dst >= 0) & (fl.dst < n)
    badfk = fl.kind > max(FlowKind)
    if badfk.any():
        _set(fl, "kind", badfk, FlowKind.OTHER)
    if not okf.all():
        _warn(trace, f"skipped {int((~okf).sum())} flow(s) pointing outside the spans")
        trace.flows = fl.take(np.flatnonzero(okf))

    c = trace.counters
    okc = (c.track >= 0) & (c.track < nt) & (c.ts_ns >= -TIME_LIMIT_NS) & (c.ts_ns <= TIME_LIMIT_NS)
    if not okc.all():
        _warn(trace, f"skipped {int((~okc).sum())} counter sample(s) with a missing track or time out of range")
        c = trace.counters = c.take(np.flatnonzero(okc))
    if len(c) > 1:
        dt = np.diff(c.track.astype(np.int64))
        if (dt < 0).any() or ((dt == 0) & (c.ts_ns[1:] < c.ts_ns[:-1])).any():
            trace.counters = c.take(np.lexsort((c.ts_ns, c.track)))
    return trace


def _remap_flows(fl: Flows, old_to_new: np.ndarray) -> Flows:
    if not len(fl):
        return fl
    n = len(old_to_new)
    ok = (fl.src >= 0) & (fl.src < n) & (fl.dst >= 0) & (fl.dst < n)
    src = np.where(ok, old_to_new[np.clip(fl.src, 0, max(n - 1, 0))], -1) if n else np.full(len(fl), -1)
    dst = np.where(ok, old_to_new[np.clip(fl.dst, 0, max(n - 1, 0))], -1) if n else np.full(len(fl), -1)
    keep = (src >= 0) & (dst >= 0)
    return Flows(src=src[keep], dst=dst[keep], kind=fl.kind[keep])


__all__ = ["check", "TIME_LIMIT_NS", "MAX_DUR_NS", "MAX_NAME_CHARS", "Counters", "Spans", "Tracks"]
