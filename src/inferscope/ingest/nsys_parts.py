"""Nsight Systems event tables -> span parts (one dict of numpy columns per table).

GPU activities (kernels, memcpy, memset and CUDA graph launches, the LAUNCH-flow targets, and
synchronization) and host-side calls (CUDA runtime/driver, NVTX ranges and marks, OS runtime,
profiler overhead), each table read by ``nsys_reader._Reader`` into one part.  Name columns still
hold nsys StringIds ids (``nsname``) or final string ids (``name``); the enum tables (copy kinds,
memory kinds, sync types) fall back to built-in copies when absent.  ``nsys._load`` turns the
parts into tracks, flows and the Trace.
"""
from __future__ import annotations

import numpy as np

from ..trace.kinds import CopyKind, MemKind, SpanKind
from .nsys_reader import _enum, _gather, _lookup
from .nsys_schema import (GRAPH_TABLE, KERNEL_TABLES, MEMCPY_TABLE, MEMSET_TABLE, NVTX_TABLE, OSRT_TABLE,
                          OVERHEAD_TABLE, RUNTIME_TABLE, SYNC_TABLE)

# NVTX event types (ENUM_NSYS_EVENT_TYPE)
NVTX_MARK, NVTX_PUSHPOP, NVTX_STARTEND, NVTXT_PUSHPOP, NVTXT_STARTEND = 34, 59, 60, 70, 71
_NVTX_CAT = {NVTX_MARK: "NvtxMark", NVTX_PUSHPOP: "NvtxPushPopRange", NVTX_STARTEND: "NvtxStartEndRange",
             NVTXT_PUSHPOP: "NvtxtPushPopRange", NVTXT_STARTEND: "NvtxtStartEndRange"}
DRIVER_EVENT_CLASS = 1   # ENUM_NSYS_EVENT_CLASS: 0 CUDA runtime, 1 CUDA driver

# ENUM_CUDA_MEMCPY_OPER (name suffix after CUDA_MEMCPY_KIND_) -> CopyKind
_COPY_BY_NAME = {"UNKNOWN": CopyKind.UNKNOWN, "HTOD": CopyKind.H2D, "DTOH": CopyKind.D2H,
                 "HTOA": CopyKind.H2D, "ATOH": CopyKind.D2H, "ATOA": CopyKind.D2D, "ATOD": CopyKind.D2D,
                 "DTOA": CopyKind.D2D, "DTOD": CopyKind.D2D, "HTOH": CopyKind.H2H, "PTOP": CopyKind.P2P,
                 "UVM_HTOD": CopyKind.H2D, "UVM_DTOH": CopyKind.D2H, "UVM_DTOD": CopyKind.D2D}
_COPY_FALLBACK = [(0, "UNKNOWN", "Unknown"), (1, "HTOD", "Host-to-Device"), (2, "DTOH", "Device-to-Host"),
                  (3, "HTOA", "Host-to-Array"), (4, "ATOH", "Array-to-Host"), (5, "ATOA", "Array-to-Array"),
                  (6, "ATOD", "Array-to-Device"), (7, "DTOA", "Device-to-Array"), (8, "DTOD", "Device-to-Device"),
                  (9, "HTOH", "Host-to-Host"), (10, "PTOP", "Peer-to-Peer"), (11, "UVM_HTOD", "Unified Host-to-Device"),
                  (12, "UVM_DTOH", "Unified Device-to-Host"), (13, "UVM_DTOD", "Unified Device-to-Device")]
# ENUM_CUDA_MEM_KIND: nsys numbering (0 PAGEABLE, 1 PINNED, 2 DEVICE, 3 ARRAY, 4 MANAGED ...) -> MemKind
_MEM_BY_NAME = {"PAGEABLE": MemKind.PAGEABLE, "PINNED": MemKind.PINNED, "DEVICE": MemKind.DEVICE,
                "ARRAY": MemKind.ARRAY, "MANAGED": MemKind.MANAGED, "DEVICE_STATIC": MemKind.DEVICE,
                "MANAGED_STATIC": MemKind.MANAGED, "UNKNOWN": MemKind.UNKNOWN}
_MEM_FALLBACK = [(0, "PAGEABLE"), (1, "PINNED"), (2, "DEVICE"), (3, "ARRAY"), (4, "MANAGED"),
                 (5, "DEVICE_STATIC"), (6, "MANAGED_STATIC"), (7, "UNKNOWN")]
_SYNC_FALLBACK = {0: "Unknown", 1: "Event sync", 2: "Stream wait sync", 3: "Stream sync", 4: "Context sync"}


def _host_call_part(rd, t: str, kind: SpanKind, cat: int, name_default: int) -> dict:
    """Rows of a host-call table with (start, end, globalTid, nameId): OSRT_API, PROFILER_OVERHEAD."""
    st, en, gtid, nid = rd.columns(t, [rd.expr(t, "start", 0), "COALESCE([end], [start])" if rd.has(t, "end") else "[start]",
                                       rd.expr(t, "globalTid", -1), rd.expr(t, "nameId", -1)],
                                   [np.int64, np.int64, np.int64, np.int64])
    return dict(start_ns=st, end_ns=en, gtid=gtid, nsname=nid, kind=kind, cat=cat, name_default=name_default)


def _gpu_activity_parts(con, schema, rd, intern, warnings, gpu_parts: list[dict], sync_parts: list[dict]) -> str | None:
    """Append the GPU activity parts to gpu_parts (kernels, memcpy, memset, graph) and
    sync_parts (synchronization); returns the kernel table read, or None."""
    # ---- GPU activities ----------------------------------------------------
    ktab = next((t for t in KERNEL_TABLES if t in schema), None)
    if ktab:
        name_col = "demangledName" if rd.has(ktab, "demangledName") else ("shortName" if rd.has(ktab, "shortName") else None)
        if name_col is None:
            rd.missing.append(f"{ktab}.demangledName")
        st, en, dev, strm, corr, gpid, nm, sn = rd.columns(ktab, [
            rd.expr(ktab, "start", 0), rd.expr(ktab, "end", 0),
            (rd.expr(ktab, "deviceId", 0), rd.expr(ktab, "streamId", 0)),
            rd.expr(ktab, "correlationId", -1), rd.expr(ktab, "globalPid", -1),
            (rd.expr(ktab, name_col, -1, False) if name_col else "-1", rd.expr(ktab, "shortName", -1))],
            [np.int64, np.int64, np.int32, np.int64, np.int64, np.int64, np.int64, np.int64])
        if name_col is None:
            nm = np.full(len(st), -1, dtype=np.int64)
        gpu_parts.append(dict(start_ns=st, end_ns=en, device=dev, stream=strm, correlation=corr, gpid=gpid,
                              nsname=nm, nsdetail=sn, kind=SpanKind.KERNEL, cat=intern(ktab),
                              name_default=intern("kernel")))
        del st, en, dev, strm, corr, gpid, nm, sn   # the part dicts own the arrays now
    else:
        warnings.append("no kernel table (CUPTI_ACTIVITY_KIND_KERNEL): the capture has no CUDA kernels "
                        "(was it taken with --trace=cuda?)")

    if MEMCPY_TABLE in schema:
        t = MEMCPY_TABLE
        st, en, dev, strm, corr, gpid, nbytes, ck, sk, dk = rd.columns(t, [
            rd.expr(t, "start", 0), rd.expr(t, "end", 0), rd.expr(t, "deviceId", 0), rd.expr(t, "streamId", 0),
            rd.expr(t, "correlationId", -1), rd.expr(t, "globalPid", -1), rd.expr(t, "bytes", -1),
            rd.expr(t, "copyKind", 0), rd.expr(t, "srcKind", 7), rd.expr(t, "dstKind", 7)],
            [np.int64, np.int64, np.int32, np.int64, np.int64, np.int64, np.int64, np.int16, np.int16, np.int16])
        rows = _enum(con, schema, "ENUM_CUDA_MEMCPY_OPER") or [(i, "CUDA_MEMCPY_KIND_" + n, lab) for i, n, lab in _COPY_FALLBACK]
        ck_map = _lookup({int(i): int(_COPY_BY_NAME.get(str(n).replace("CUDA_MEMCPY_KIND_", ""), CopyKind.UNKNOWN))
                          for i, n, _ in rows}, 16, int(CopyKind.UNKNOWN))
        ck_name = {int(i): intern(f"[CUDA memcpy {lab}]") for i, _, lab in rows}
        nm_map = _lookup(ck_name, 16, intern("[CUDA memcpy Unknown]"))
        mrows = _enum(con, schema, "ENUM_CUDA_MEM_KIND") or [(i, "CUDA_MEMOPR_MEMORY_KIND_" + n, n) for i, n in _MEM_FALLBACK]
        mk_map = _lookup({int(i): int(_MEM_BY_NAME.get(str(n).replace("CUDA_MEMOPR_MEMORY_KIND_", ""), MemKind.UNKNOWN))
                          for i, n, _ in mrows}, 8, int(MemKind.UNKNOWN))
        gpu_parts.append(dict(start_ns=st, end_ns=en, device=dev, stream=strm, correlation=corr, gpid=gpid,
                              name=_gather(nm_map, ck.astype(np.int64), nm_map[0]).astype(np.int32),
                              bytes=nbytes, kind=SpanKind.MEMCPY, cat=intern(t),
                              copy_kind=_gather(ck_map, ck.astype(np.int64), int(CopyKind.UNKNOWN)).astype(np.uint8),
                              src_mem=_gather(mk_map, sk.astype(np.int64), 0).astype(np.uint8),
                              dst_mem=_gather(mk_map, dk.astype(np.int64), 0).astype(np.uint8)))
        del ck, sk, dk, st, en, dev, strm, corr, gpid, nbytes

    if MEMSET_TABLE in schema:
        t = MEMSET_TABLE
        st, en, dev, strm, corr, gpid, nbytes, mk = rd.columns(t, [
            rd.expr(t, "start", 0), rd.expr(t, "end", 0), rd.expr(t, "deviceId", 0), rd.expr(t, "streamId", 0),
            rd.expr(t, "correlationId", -1), rd.expr(t, "globalPid", -1), rd.expr(t, "bytes", -1),
            rd.expr(t, "memKind", 7)],
            [np.int64, np.int64, np.int32, np.int64, np.int64, np.int64, np.int64, np.int16])
        mrows = _enum(con, schema, "ENUM_CUDA_MEM_KIND") or [(i, "CUDA_MEMOPR_MEMORY_KIND_" + n, n) for i, n in _MEM_FALLBACK]
        mk_map = _lookup({int(i): int(_MEM_BY_NAME.get(str(n).replace("CUDA_MEMOPR_MEMORY_KIND_", ""), MemKind.UNKNOWN))
                          for i, n, _ in mrows}, 8, int(MemKind.UNKNOWN))
        gpu_parts.append(dict(start_ns=st, end_ns=en, device=dev, stream=strm, correlation=corr, gpid=gpid,
                              name=intern("[CUDA memset]"), bytes=nbytes, kind=SpanKind.MEMSET, cat=intern(t),
                              dst_mem=_gather(mk_map, mk.astype(np.int64), 0).astype(np.uint8)))
        del st, en, dev, strm, corr, gpid, nbytes, mk

    if GRAPH_TABLE in schema:
        t = GRAPH_TABLE
        st, en, dev, strm, corr, gpid, gid = rd.columns(t, [
            rd.expr(t, "start", 0), rd.expr(t, "end", 0), rd.expr(t, "deviceId", 0), rd.expr(t, "streamId", 0),
            rd.expr(t, "correlationId", -1), rd.expr(t, "globalPid", -1), rd.expr(t, "graphId", -1)],
            [np.int64, np.int64, np.int32, np.int64, np.int64, np.int64, np.int64])
        ug, inv = np.unique(gid, return_inverse=True)
        gname = np.asarray([intern(f"[CUDA graph {int(g)}]" if g >= 0 else "[CUDA graph]") for g in ug.tolist()],
                           dtype=np.int32)
        gpu_parts.append(dict(start_ns=st, end_ns=en, device=dev, stream=strm, correlation=corr, gpid=gpid,
                              name=gname[inv] if len(ug) else np.zeros(0, np.int32),
                              kind=SpanKind.GRAPH_LAUNCH, cat=intern(t)))
        del st, en, dev, strm, corr, gpid, gid, inv

    if SYNC_TABLE in schema:
        t = SYNC_TABLE
        st, en, dev, strm, corr, gpid, sty = rd.columns(t, [
            rd.expr(t, "start", 0), rd.expr(t, "end", 0), rd.expr(t, "deviceId", 0), rd.expr(t, "streamId", -1),
            rd.expr(t, "correlationId", -1), rd.expr(t, "globalPid", -1), rd.expr(t, "syncType", 0)],
            [np.int64, np.int64, np.int32, np.int64, np.int64, np.int64, np.int16])
        rows = _enum(con, schema, "ENUM_CUPTI_SYNC_TYPE")
        labels = {int(i): lab for i, _, lab in rows} if rows else dict(_SYNC_FALLBACK)
        nm_map = _lookup({k: intern(f"[CUDA {v}]") for k, v in labels.items()}, 8, intern("[CUDA sync]"))
        sync_parts.append(dict(start_ns=st, end_ns=en, device=dev, stream=strm, correlation=corr, gpid=gpid,
                               name=_gather(nm_map, sty.astype(np.int64), nm_map[0]).astype(np.int32),
                               kind=SpanKind.GPU_SYNC, cat=intern(t)))
        del st, en, dev, strm, corr, gpid, sty
    return ktab


def _host_api_parts(schema, rd, strings, intern, warnings, ktab, include_osrt, include_overhead,
                    host_parts: list[dict]):
    """Append the host-side parts to host_parts (runtime/driver, NVTX, OS runtime, overhead);
    returns (the runtime/driver part or None, the number of NVTX ranges never ended)."""
    # ---- host-side -------------------------------------------------------
    runtime_part = None
    if RUNTIME_TABLE in schema:
        t = RUNTIME_TABLE
        st, en, ecl, nid, gtid, corr = rd.columns(t, [
            rd.expr(t, "start", 0), "COALESCE([end], [start])" if rd.has(t, "end") else rd.expr(t, "start", 0),
            (rd.expr(t, "eventClass", 0), rd.expr(t, "nameId", -1)), rd.expr(t, "globalTid", -1),
            rd.expr(t, "correlationId", -1)],
            [np.int64, np.int64, np.int16, np.int64, np.int64, np.int64])
        kind = np.where(ecl == DRIVER_EVENT_CLASS, np.uint8(SpanKind.DRIVER), np.uint8(SpanKind.RUNTIME)).astype(np.uint8)
        del ecl
        runtime_part = dict(start_ns=st, end_ns=en, gtid=gtid, correlation=corr, nsname=nid, kind=kind,
                            cat=intern(t), name_default=intern("cuda_api"))
        host_parts.append(runtime_part)
        del st, en, gtid, corr, nid, kind
    elif ktab:
        warnings.append("no CUPTI_ACTIVITY_KIND_RUNTIME table: kernels cannot be linked to their launching API calls")

    nvtx_unclosed = 0
    if NVTX_TABLE in schema:
        t = NVTX_TABLE
        types = (NVTX_MARK, NVTX_PUSHPOP, NVTX_STARTEND, NVTXT_PUSHPOP, NVTXT_STARTEND)
        where = f"[eventType] IN ({','.join(map(str, types))})" if rd.has(t, "eventType") else "1"
        has_text = rd.has(t, "text")
        st, en, ety, gtid, tid_, has_t = rd.columns(t, [
            rd.expr(t, "start", 0), rd.expr(t, "end", -(1 << 62)), rd.expr(t, "eventType", NVTX_PUSHPOP),
            rd.expr(t, "globalTid", -1), rd.expr(t, "textId", -1),
            "([text] IS NOT NULL)" if has_text else "0"], [np.int64, np.int64, np.int16, np.int64, np.int64, np.bool_],
            where=where)
        if not has_text and not rd.has(t, "textId"):
            rd.missing.append(f"{t}.text")
        name = np.full(len(st), -1, dtype=np.int64)   # final ids for text rows; nsys ids otherwise
        if has_text and has_t.any():
            name[has_t] = rd.texts(t, "text", where, strings)
        is_mark = ety == NVTX_MARK
        open_ = (en == -(1 << 62)) & ~is_mark
        nvtx_unclosed = int(open_.sum())
        en = np.where(is_mark, st, en)
        kind = np.where(is_mark, np.uint8(SpanKind.MARK), np.uint8(SpanKind.ANNOTATION)).astype(np.uint8)
        cat_map = {k: intern(v) for k, v in _NVTX_CAT.items()}
        cat = np.full(len(st), intern("NVTX"), dtype=np.int32)
        for k, v in cat_map.items():
            cat[ety == k] = v
        host_parts.append(dict(start_ns=st, end_ns=en, gtid=gtid, final_name=name, textid=tid_, has_text=has_t,
                               kind=kind, cat=cat, open=open_, name_default=intern("(unnamed range)")))
        del st, en, ety, gtid, tid_, has_t, name, is_mark, open_, kind, cat

    for t, wanted, kind, default in ((OSRT_TABLE, include_osrt, SpanKind.OS_RUNTIME, "osrt"),
                                     (OVERHEAD_TABLE, include_overhead, SpanKind.OVERHEAD, "profiler overhead")):
        if wanted and t in schema:
            host_parts.append(_host_call_part(rd, t, kind, intern(t), intern(default)))
    return runtime_part, nvtx_unclosed
