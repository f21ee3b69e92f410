"""What ``nsys stats`` users expect beside the seed-004 tables.

* launch latency (cuda_kern_exec_sum): per launch API, the API time, the queue time
  (first GPU start of its work - API end, counted only when > 0) and the kernel time;
* memory operations by API: pageable async copies (cudaMemcpy*Async with a pageable side:
  the driver stages them synchronously, nsys rule ``cuda_memcpy_async``), synchronous
  copies and memsets (non-Async APIs block the host);
* a name view of sync-like APIs (seed 004's rule: Synchronize / Wait / Query in the name; it
  includes polls and GPU-side waits that do not block the host, and leaves out blocking copies:
  blocked time is the ``syncs`` section's, with the breakdown's rule).

Pure functions over a Trace; they need LAUNCH flows (nsys correlation / Kineto ac2g).
"""
from __future__ import annotations

import numpy as np

from .stats import fast_unique

from ..trace.kinds import CopyKind, SpanKind
from ..trace.model import Trace, codes_in
from .select import clipped_durations, group_sum, in_window, pct_stats_us
from ..classes import ASYNC_MEMOP_API_RE
from .classify import pageable_copy_mask, sync_like_name_mask
from .launched import launched_gpu

_COPY_NAMES = {int(k): k.name for k in CopyKind}


def _ms(ns) -> float:
    return round(float(ns) / 1e6, 6)


def analyze_nsys_extras(trace: Trace, window=None, options=None) -> dict:
    top_n = int(getattr(options, "top_n", 20) or 20)
    s = trace.spans
    strings = trace.strings.as_list()
    out: dict = {"warnings": [], "tables": {}}
    api_in = np.zeros(len(s), dtype=bool)
    api_in[in_window(trace, codes_in(s.kind, [SpanKind.RUNTIME, SpanKind.DRIVER]), window)] = True
    lg = launched_gpu(trace, window, select="launcher_in", launcher_mask=api_in)   # whole durations
    kflow = codes_in(s.kind[lg.gpu], [SpanKind.KERNEL, SpanKind.GRAPH_LAUNCH])
    out["launch_latency"], out["tables"]["launch_latency"] = _launch_latency(
        trace, lg.launcher[kflow], lg.gpu[kflow], lg.whole_ns[kflow], strings, top_n)
    mflow = ~kflow
    del kflow
    out["memory_ops"], out["tables"]["memory_ops_by_api"] = _memory_ops(
        trace, window, lg.launcher[mflow], lg.gpu[mflow], lg.whole_ns[mflow], strings, out["warnings"])
    del lg, mflow
    sel = np.flatnonzero(api_in & sync_like_name_mask(trace))
    del api_in
    out["sync_like_api_names_calls_sum_ms"], out["tables"]["sync_like_api_names"] = _sync_like_names(trace, window, sel, strings)
    return out


def _launch_latency(trace: Trace, ks: np.ndarray, kd: np.ndarray, kdur: np.ndarray, strings: list,
                    top_n: int) -> tuple[dict, dict]:
    """Per launch API call ``ks`` and the kernels it launched ``kd`` (whole durations ``kdur``): the summary
    and the per-name table."""
    s = trace.spans
    ll: dict = {"launches": 0, "api_ms": 0.0, "queue_ms": 0.0, "linked_kernel_sum_ms": 0.0, "queued_launches": 0,
                "api_to_kernel_ratio": None}
    rows = []
    if len(ks):
        apis, inv = fast_unique(ks, return_inverse=True)
        del ks
        first = np.full(len(apis), np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(first, inv, s.start_ns[kd])
        del kd
        ktime = np.bincount(inv, weights=kdur.astype(np.float64), minlength=len(apis))
        del inv, kdur
        api_dur = s.end_ns[apis]
        api_dur -= s.start_ns[apis]
        queue = first
        queue -= s.end_ns[apis]
        del first
        queued = queue > 0
        ll.update(launches=int(len(apis)), api_ms=_ms(api_dur.sum()), queue_ms=_ms(queue[queued].sum()),
                  linked_kernel_sum_ms=_ms(ktime.sum()), queued_launches=int(queued.sum()),
                  api_to_kernel_ratio=round(float(api_dur.sum() / ktime.sum()), 4) if ktime.sum() else None)
        nm = s.name[apis]
        un, ninv = fast_unique(nm, return_inverse=True)
        for j in range(len(un)):
            m = ninv == j
            q = queue[m & queued]
            qa, q50, q90, qmax = pct_stats_us(q)
            aa, a50, a90, amax = pct_stats_us(api_dur[m])
            kt = float(ktime[m].sum())
            rows.append([strings[int(un[j])] if un[j] >= 0 else "", int(m.sum()), _ms(api_dur[m].sum()), round(aa, 3),
                         round(a90, 3), int((m & queued).sum()), round(qa, 3), round(q50, 3), round(q90, 3),
                         round(qmax, 3), _ms(kt), round(kt / m.sum() / 1e3, 3)])
        rows.sort(key=lambda r: -r[10])
    return ll, {"columns": ["api_name", "launches", "api_total_ms", "api_avg_us", "api_p90_us", "queued_launches",
                            "queue_avg_us", "queue_p50_us", "queue_p90_us", "queue_max_us", "kernel_total_ms",
                            "kernel_avg_per_launch_us"], "rows": rows[:max(top_n, 50)]}


def _memory_ops(trace: Trace, window, ms_: np.ndarray, md: np.ndarray, gdur: np.ndarray, strings: list,
                warnings: list) -> tuple[dict, dict]:
    """Copies and memsets ``md`` launched by the API calls ``ms_`` (whole durations ``gdur``): the summary and
    the per-API table."""
    s = trace.spans
    is_async = trace.strings.ids_matching(lambda x: ASYNC_MEMOP_API_RE.search(x) is not None, s.name[ms_])
    mem = {"pageable_async_copies": 0, "pageable_async_bytes": 0, "pageable_async_ms": 0.0,
           "sync_copies": 0, "sync_copy_bytes": 0, "sync_copy_api_ms": 0.0,
           "sync_memsets": 0, "sync_memset_api_ms": 0.0, "unlinked_ops": 0}
    mrows = []
    if len(md):
        anm = s.name[ms_]
        asy = np.zeros(len(ms_), dtype=bool)
        okn = anm >= 0
        asy[okn] = is_async[anm[okn]]
        is_cp = s.kind[md] == SpanKind.MEMCPY
        pageable = pageable_copy_mask(trace)[md]     # host side pageable: the rule sync_wait uses
        nbytes = np.maximum(s.bytes[md], 0)
        pa = asy & pageable
        mem["pageable_async_copies"] = int(pa.sum())
        mem["pageable_async_bytes"] = int(nbytes[pa].sum())
        mem["pageable_async_ms"] = _ms(gdur[pa].sum())
        sc = ~asy & is_cp
        sapis = fast_unique(ms_[sc])
        mem["sync_copies"] = int(sc.sum())
        mem["sync_copy_bytes"] = int(nbytes[sc].sum())
        mem["sync_copy_api_ms"] = _ms((s.end_ns[sapis] - s.start_ns[sapis]).sum())
        sm = ~asy & ~is_cp
        mapis = fast_unique(ms_[sm])
        mem["sync_memsets"] = int(sm.sum())
        mem["sync_memset_api_ms"] = _ms((s.end_ns[mapis] - s.start_ns[mapis]).sum())
        op = np.where(is_cp, s.copy_kind[md].astype(np.int64), -1)
        key = (anm.astype(np.int64) << 8) | (op & 0xFF)
        uk, inv = fast_unique(key, return_inverse=True)
        for j in range(len(uk)):
            m = inv == j
            nid, o = int(uk[j]) >> 8, int(uk[j]) & 0xFF
            apis_j = fast_unique(ms_[m])
            mrows.append([strings[nid] if nid >= 0 else "", "memset" if o == 0xFF else _COPY_NAMES.get(o, "UNKNOWN"),
                          not bool(asy[m][0]), int(pageable[m].sum()), int(m.sum()), int(nbytes[m].sum()),
                          _ms(gdur[m].sum()), _ms((s.end_ns[apis_j] - s.start_ns[apis_j]).sum())])
        mrows.sort(key=lambda r: -r[6])
        if mem["pageable_async_copies"]:
            warnings.append(
                f"{mem['pageable_async_copies']} async copies use pageable host memory "
                f"({mem['pageable_async_bytes']} bytes): the driver stages them and they do not overlap; pin the host buffer")
    allm = in_window(trace, codes_in(s.kind, [SpanKind.MEMCPY, SpanKind.MEMSET]), window)
    linked = np.zeros(len(s), dtype=bool)
    linked[md] = True
    mem["unlinked_ops"] = int((~linked[allm]).sum())
    return mem, {"columns": ["api_name", "gpu_op", "synchronous", "pageable_ops", "ops", "bytes", "gpu_time_ms", "api_time_ms"],
                 "rows": mrows}


def _sync_like_names(trace: Trace, window, sel: np.ndarray, strings: list) -> tuple[float, dict]:
    """Sync-like API calls ``sel`` by name (seed 004 name rule; not blocked time): the summed time and the table."""
    s = trace.spans
    srows = []
    if len(sel):
        d = clipped_durations(trace, sel, window)
        uk, ts, tc = group_sum(s.name[sel].astype(np.int64), d)
        for j in np.argsort(-ts, kind="stable").tolist():
            dj = d[s.name[sel] == uk[j]]
            srows.append([strings[int(uk[j])], int(tc[j]), _ms(ts[j]), round(ts[j] / tc[j] / 1e3, 3),
                          round(float(dj.max()) / 1e3, 3)])
    return round(sum(r[2] for r in srows), 6), {"columns": ["api_name", "call_count", "total_time_ms", "avg_duration_us",
                                                          "max_duration_us"], "rows": srows}
