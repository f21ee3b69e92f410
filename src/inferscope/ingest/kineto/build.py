"""Kineto columns -> ``Trace``: phases, exact timestamps, categories and kinds, pids/tids, spans with
their args (devices, streams, bytes, copy kinds, record_shapes details), tracks, instants and
memory counters, flows and metadata; each decoded column is released once used (peak memory)."""
from __future__ import annotations

import numpy as np

from ...errors import InputError
from ...trace.builder import TraceBuilder
from ...trace.kinds import CopyKind, FlowKind, SpanKind, TrackKind
from ...trace.model import Trace, codes_in
from .categories import (_CAT_KIND, _CPU, _DIR, _FLOW_FWDBWD_CATS, _FLOW_LAUNCH_CATS, _GPU, _IGNORED_CATS,
                         _STEP_RE, _parse_memcpy_name)
from .columns import _Cols
from .flows import _fwdbwd_flows, _launch_flows
from .meta import _meta
from .timestamps import _timestamps_ns
from .tracks import _assign_tracks, _memory_counters, _metadata_names


def _build(cols: _Cols, top, warnings: list, name: str, data: bytes | None) -> Trace:
    n = cols.n
    if n == 0:
        raise InputError(f"{name}: empty trace (traceEvents has no events)")
    ph_codes, ph_uniq = cols.pop("ph"), cols.uniq("ph")
    ph_arr = np.array([u if isinstance(u, str) else "" for u in ph_uniq], dtype=object)
    ph_cls = _code_class(ph_codes, ph_uniq, ({"X"}, {"i", "I"}, {"M"}, {"s", "f", "t"}))
    is_X, is_i, is_M, is_flow = (ph_cls == 1), (ph_cls == 2), (ph_cls == 3), (ph_cls == 4)
    del ph_cls
    other_ph = ~(is_X | is_i | is_M | is_flow)
    if other_ph.any():
        kinds_seen = sorted({str(ph_arr[c]) for c in np.unique(ph_codes[other_ph])})
        warnings.append(f"ignored {int(other_ph.sum())} event(s) with unsupported phase(s) {kinds_seen}")

    ts_f = cols.pop("ts_f")
    dur_f = cols.pop("dur_f")
    if cols.insane:
        warnings.append(f"skipped {cols.insane} event(s) with an out-of-range ts or dur")

    # ---- timestamps -> exact int64 ns ---------------------------------------------------
    has_ts = ~np.isnan(ts_f)
    all_ts = bool(has_ts.all())    # then no zeroed column and masked copies (issue 26)
    ts_types = cols.ts_types
    if float not in ts_types and ts_types <= {int, type(None)} and has_ts.any() \
            and _abs_max(ts_f if all_ts else ts_f[has_ts]) < 9.2e15:
        # every ts is written as an integer (epoch-us clocks of older Kineto): exact as is
        if all(x is not None for x in cols.parts["ts_x"]):   # streamed: each batch's exact ns, kept by add()
            x = cols.pop("ts_x")
        else:
            x = cols.pop("ts_i")
            x = (x if all_ts else x[has_ts]) * 1000
        if all_ts:
            ts_ns = x
        else:
            ts_ns = np.zeros(n, dtype=np.int64)
            ts_ns[has_ts] = x
        del x
    else:
        ts_ns = _timestamps_ns(data, ts_f, has_ts, warnings, cols)
    del data, ts_f
    cols.parts["ts_i"] = cols.parts["ts_x"] = []

    # ---- categories and kinds --------------------------------------------------------
    cat_codes, cat_uniq = cols.pop("cat"), cols.uniq("cat")
    ncat = len(cat_uniq)
    cat_kind = np.zeros(ncat, dtype=np.uint8)
    cat_side = np.full(ncat, _CPU, dtype=np.uint8)
    cat_ignored = np.zeros(ncat, dtype=bool)
    cat_flow = np.zeros(ncat, dtype=np.uint8)
    for i, c in enumerate(cat_uniq):
        key = c.strip().lower().replace(" ", "_") if isinstance(c, str) else ""
        if key in _CAT_KIND:
            k, side = _CAT_KIND[key]
            cat_kind[i] = k
            cat_side[i] = side
        if key in _IGNORED_CATS:
            cat_ignored[i] = True
        if key in _FLOW_LAUNCH_CATS:
            cat_flow[i] = FlowKind.LAUNCH
        elif key in _FLOW_FWDBWD_CATS:
            cat_flow[i] = FlowKind.FWDBWD
    name_codes, name_uniq = cols.pop("name"), cols.uniq("name")
    name_str = [u if isinstance(u, str) else ("" if u is None else str(u)) for u in name_uniq]

    b = TraceBuilder()
    strings = b.strings
    name_gid = np.fromiter((strings.intern(s) for s in name_str), dtype=np.int32, count=len(name_str))
    cat_gid = np.fromiter((strings.intern(c if isinstance(c, str) else "") for c in cat_uniq),
                          dtype=np.int32, count=ncat)

    # ---- pids / tids ------------------------------------------------------------------
    pid, pid_named, pid_l = cols.id_col("pid")
    tid, tid_named, tid_l = cols.id_col("tid")

    # ---- duration events ------------------------------------------------------------------
    bad_time = is_X & ~has_ts
    if bad_time.any():
        warnings.append(f"skipped {int(bad_time.sum())} duration event(s) without a numeric ts")
    span_sel = is_X & has_ts & ~cat_ignored[cat_codes]
    sidx = np.flatnonzero(span_sel)
    sc = cat_codes[sidx]      # each span's category and name code, gathered once
    sn = name_codes[sidx]
    skind = cat_kind[sc]
    sside = cat_side[sc]
    # ProfilerStep#N on the host -> STEP
    step_name = np.fromiter((bool(_STEP_RE.match(s)) for s in name_str), dtype=bool, count=len(name_str))
    is_step = step_name[sn] & codes_in(skind, [SpanKind.ANNOTATION, SpanKind.CPU_OP, SpanKind.OTHER]) & (sside == _CPU)
    skind = np.where(is_step, np.uint8(SpanKind.STEP), skind).astype(np.uint8)

    dur_sel = dur_f[sidx]
    del dur_f
    nodur = np.isnan(dur_sel)
    if nodur.any():
        warnings.append(f"{int(nodur.sum())} duration event(s) had no dur (treated as 0)")
    neg = dur_sel < 0
    if neg.any():
        warnings.append(f"{int(neg.sum())} event(s) had a negative dur (clamped to 0)")
    dur_sel = np.where(nodur | neg, 0.0, dur_sel)
    start = ts_ns[sidx]
    end = start + np.rint(dur_sel * 1000.0).astype(np.int64)
    del dur_sel, nodur, neg

    # args columns (only for span events)
    corr = cols.pop("corr")[sidx]
    ext = cols.pop("ext")[sidx]
    adev_all, astr_all = cols.pop("device"), cols.pop("stream")

    gpu = sside == _GPU
    gidx = np.flatnonzero(gpu)
    dev = np.full(len(sidx), -1, dtype=np.int64)
    stream = np.full(len(sidx), -1, dtype=np.int64)
    if len(gidx):
        adev = adev_all[sidx[gidx]]
        astr = astr_all[sidx[gidx]]
        gpid = pid[sidx[gidx]]
        gpid_ok = (gpid >= 0) & (gpid < 4096) & ~pid_named[sidx[gidx]]
        dev[gidx] = np.where(adev >= 0, adev, np.where(gpid_ok, gpid, 0))
        gtid = tid[sidx[gidx]]
        stream[gidx] = np.where(astr >= 0, astr, np.where(gtid >= 0, gtid, 0))
        del adev, astr, gpid, gpid_ok, gtid
    del adev_all, astr_all

    # bytes / copy kinds for memcpy + memset
    nbytes = np.full(len(sidx), -1, dtype=np.int64)
    copy_kind = np.zeros(len(sidx), dtype=np.uint8)
    src_mem = np.zeros(len(sidx), dtype=np.uint8)
    dst_mem = np.zeros(len(sidx), dtype=np.uint8)
    midx = np.flatnonzero((skind == SpanKind.MEMCPY) | (skind == SpanKind.MEMSET))
    bytes_all = cols.pop("bytes")
    if len(midx):
        nbytes[midx] = bytes_all[sidx[midx]]
        cidx = midx[skind[midx] == SpanKind.MEMCPY]
        if len(cidx):
            nc = name_codes[sidx[cidx]]
            u, inv = np.unique(nc, return_inverse=True)
            ck = np.zeros(len(u), np.uint8)
            sm = np.zeros(len(u), np.uint8)
            dm = np.zeros(len(u), np.uint8)
            for j, code in enumerate(u.tolist()):
                ck[j], sm[j], dm[j] = _parse_memcpy_name(name_str[code])
            copy_kind[cidx] = ck[inv]
            src_mem[cidx] = sm[inv]
            dst_mem[cidx] = dm[inv]
            unk = cidx[copy_kind[cidx] == 0]
            if len(unk):  # no direction in the name: args.kind ("HtoD")
                for i in unk.tolist():
                    k = cols.kind.get(int(sidx[i]))
                    copy_kind[i] = _DIR.get(str(k).strip().lower(), CopyKind.UNKNOWN) if k is not None else CopyKind.UNKNOWN

    # ---- tracks --------------------------------------------------------------------------
    spid = pid[sidx]
    stid = tid[sidx]
    named = pid_named[sidx]
    tkind = np.where(gpu, TrackKind.GPU_STREAM, np.where(named, TrackKind.OTHER, TrackKind.CPU_THREAD)).astype(np.uint8)
    tpid = np.where(gpu, -1, spid)
    ttid = np.where(gpu, stream, stid)
    tdev = np.where(gpu, dev, -1)
    meta_names = _metadata_names(is_M, name_codes, name_str, pid, tid, pid_named, cols.margs)
    track_of = _assign_tracks(b, tkind, tpid, ttid, tdev, meta_names, pid_l, tid_l, sidx)

    # ---- instants: marks and memory counters ------------------------------------------------
    iidx = np.flatnonzero(is_i & has_ts)
    mark_rows = None
    if len(iidx):
        iargs = [cols.margs[i] for i in iidx.tolist()]
        mem_name = strings.get("[memory]")
        is_mem = name_gid[name_codes[iidx]] == mem_name if mem_name >= 0 else np.zeros(len(iidx), bool)
        if is_mem.any():
            _memory_counters(b, iidx[is_mem], [a for a, m in zip(iargs, is_mem.tolist()) if m], pid, ts_ns)
        keep = iidx[~is_mem]
        if len(keep):
            kpid = pid[keep]
            knamed = pid_named[keep]
            kk = np.where(knamed, TrackKind.OTHER, TrackKind.CPU_THREAD).astype(np.int64)
            ktr = _assign_tracks(b, kk, kpid, tid[keep], np.full(len(keep), -1, np.int64), meta_names,
                                 pid_l, tid_l, keep)
            mark_rows = (keep, ktr)

    # ---- add spans ---------------------------------------------------------------------------
    if len(sidx) == 0:
        raise InputError(f"{name}: empty trace (no duration events among {n} trace events)")
    scat = cat_gid[sc]
    sname = name_gid[sn]
    del sc, sn
    b.add_spans(start_ns=start, end_ns=end, track=track_of, kind=skind, name=sname, cat=scat,
                correlation=corr, ext_id=ext, bytes=nbytes, copy_kind=copy_kind,
                src_mem=src_mem, dst_mem=dst_mem, detail=_shape_details(b, skind, cols.pop("shape")[sidx], list(cols.shapes)))
    if mark_rows is not None:
        keep, ktr = mark_rows
        kst = ts_ns[keep]
        b.add_spans(start_ns=kst, end_ns=kst, track=ktr, kind=np.uint8(SpanKind.MARK),
                    name=name_gid[name_codes[keep]], cat=cat_gid[cat_codes[keep]])

    # ---- launch flows ----------------------------------------------------------------------
    _launch_flows(b, skind, spid, corr, start, named, warnings)

    # ---- meta ---------------------------------------------------------------------------------
    b.meta.update(_meta(top, name, warnings))
    fidx = np.flatnonzero(is_flow & has_ts & (cat_flow[cat_codes] == FlowKind.FWDBWD))
    # the builder holds the span columns now: drop the per-event and per-span temporaries
    # before finalize() sorts them (peak memory of big traces, issue 13)
    del bytes_all, start, end, corr, ext, dev, stream, nbytes, copy_kind, src_mem, dst_mem, skind, sside, \
        spid, stid, named, tkind, tpid, ttid, tdev, track_of, scat, sname, gpu, sidx, span_sel, \
        cat_codes, name_codes, mark_rows, is_X, is_i, is_M, is_flow, other_ph, has_ts, pid_l, tid_l, \
        pid_named, tid_named
    if not len(fidx):
        del pid, tid, ts_ns, ph_codes
    trace = b.finalize(release=True)
    # fwdbwd flows need final span order (after finalize)
    if len(fidx):
        _fwdbwd_flows(trace, fidx, ph_codes, ph_uniq, cols.ids, pid, tid, ts_ns, warnings)
    return trace


def _shape_details(b: TraceBuilder, skind: np.ndarray, scode: np.ndarray, shapes: list) -> np.ndarray:
    """CPU_OP spans recorded with ``record_shapes``: ``{"dims":..,"types":..,"concrete":..}`` (the raw JSON of
    Input Dims / Input type / Concrete Inputs) as a string id in ``detail``; -1 elsewhere."""
    out = np.full(len(scode), -1, dtype=np.int32)
    if not shapes:
        return out
    intern = b.strings.intern
    sel = np.flatnonzero((skind == SpanKind.CPU_OP) & (scode >= 0))
    if not len(sel):
        return out
    # each distinct detail interned once, in the order of its first span (the string ids of a
    # per-span loop); the codes index ``shapes``, so each one's first span comes from minimum.at, not
    # from np.unique's sort of every op (~40 ms on a 2M-event trace, issue 26)
    c = scode[sel]
    first = np.full(len(shapes), len(c), dtype=np.int64)
    np.minimum.at(first, c, np.arange(len(c), dtype=np.int64))
    seen = np.flatnonzero(first < len(c))
    lut = np.full(len(shapes), -1, dtype=np.int32)
    for j in seen[np.argsort(first[seen], kind="stable")].tolist():
        try:
            lut[j] = intern(shapes[j].decode("utf-8"))
        except UnicodeDecodeError:
            pass
    out[sel] = lut[c]
    return out


def _abs_max(x: np.ndarray) -> float:
    """``float(np.abs(x).max())`` of a non-empty float array without NaN, without the temporary."""
    return max(float(x.max()), -float(x.min()))


def _code_class(codes: np.ndarray, uniq: list, classes: tuple) -> np.ndarray:
    """Per code: 1 + the index of the (disjoint) set in ``classes`` holding its value, 0 for none; one
    gather for all the sets (the phase masks are compares of it)."""
    lut = np.fromiter((next((j + 1 for j, w in enumerate(classes) if u in w), 0) for u in uniq),
                      dtype=np.uint8, count=len(uniq))
    return lut[codes] if len(uniq) else np.zeros(len(codes), np.uint8)
