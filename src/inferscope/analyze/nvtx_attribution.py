"""NVTX / user-range analysis (seed 004 parity): range summary, phase map, range -> kernel attribution.

Works on any Trace whose user ranges are ANNOTATION spans (nsys NVTX push/pop and start/end,
Kineto record_function) and whose kernels have LAUNCH flows from their host API call.

Attribution rule (seed 004 / NVIDIA "Rename CUDA kernels with NVTX"): a kernel belongs to the
*innermost* push/pop range enclosing its launching runtime/driver call on the launching thread.
The launch link is the (pid, correlation) LAUNCH flow built by the importer, so the match is
per process as well as per correlation id.  Start/end ranges (nsys event type 60) are not
stack-nested per thread and are skipped when looking for the enclosing range.
Coverage = attributed kernel time / kernel time in the window.
"""
from __future__ import annotations

import numpy as np

from .classify import kernel_mask
from .select import clipped_durations, group_sum, in_window, pct_stats_us, window_bounds  # noqa: F401
from .launched import launched_gpu
from .links import launchers_for
from .stats import fast_unique

from .. import thresholds
from ..trace.kinds import SpanKind
from ..trace.model import Trace
from .phases import phase_matcher

_NOT_NESTED_CATS = ("NvtxStartEndRange", "NvtxtStartEndRange")


def nested_range_mask(trace: Trace) -> np.ndarray:
    """ANNOTATION spans usable as enclosing ranges (stack-nested per thread)."""
    s = trace.spans
    m = s.kind == SpanKind.ANNOTATION
    bad = [trace.strings.get(c) for c in _NOT_NESTED_CATS]
    bad = [b for b in bad if b >= 0]
    if bad and m.any():
        m &= ~np.isin(s.cat, bad)
    return m


def enclosing(trace: Trace, q: np.ndarray, accept: np.ndarray) -> np.ndarray:
    """For host spans q: the nearest ancestor (via spans.parent) with accept[ancestor], else -1."""
    parent = trace.spans.parent
    res = np.full(len(q), -1, dtype=parent.dtype)      # ancestors are parent values (int32)
    if len(q) == 0:
        return res
    cur = parent[np.maximum(q, 0)]      # span indices as parent's int32 (half the bytes of int64)
    cur[q < 0] = -1
    active = np.flatnonzero(cur >= 0)
    for _ in range(40000):   # bounded by the nesting depth
        if len(active) == 0:
            break
        c = cur[active]
        hit = accept[c]
        res[active[hit]] = c[hit]
        np.logical_not(hit, out=hit)
        rest = active[hit]
        nxt = parent[c[hit]]
        del c, hit
        cur[rest] = nxt
        active = rest[nxt >= 0]
    return res


def kernel_ranges(trace: Trace, kern: np.ndarray, window, launcher: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """(innermost nested range enclosing each kernel's launching call, -1 none; how many kernels have a
    launch link) for the window's kernels ``kern``.  Walked once for analyze_nvtx and nvtx_by_pid: kept
    in the trace's cache (int32) until ``drop_kernel_ranges``.  ``launcher``: the kernels' launching calls
    when known (launched.LaunchedGpu.launcher)."""
    cache = trace.__dict__.setdefault("_mask_cache", {})
    key = (len(trace.spans), window_bounds(window), len(kern))
    v = cache.get("kernel_ranges")
    if v is not None and v[0] == key:
        return v[1], v[2]
    if launcher is None:
        launcher = launchers_for(trace, kern)
    has = launcher >= 0
    n_linked = int(has.sum())
    q = launcher[has]
    del launcher
    rng = np.full(len(kern), -1, dtype=trace.spans.parent.dtype)
    rng[has] = enclosing(trace, q, nested_range_mask(trace))
    del q, has
    cache["kernel_ranges"] = (key, rng, n_linked)
    return rng, n_linked


def drop_kernel_ranges(trace: Trace) -> None:
    trace.__dict__.get("_mask_cache", {}).pop("kernel_ranges", None)


def phase_of_names(trace: Trace, phase_map: dict | None) -> tuple[np.ndarray, list[str]]:
    """Per string id: phase index (into the returned list) or -1, by ``phases.phase_matcher``
    (whole-word patterns of ``--phase-map``; only when a map is given)."""
    phases = list(phase_map or {})
    lst = trace.strings.as_list()
    out = np.full(len(lst), -1, dtype=np.int32)
    if not phases:
        return out, phases
    match = phase_matcher(phase_map)
    for i, name in enumerate(lst):
        m = match(name)
        if m is not None:
            out[i] = phases.index(m[0])
    return out, phases


def _ms(ns) -> float:
    return round(float(ns) / 1e6, 6)


def _union_ns(st: np.ndarray, en: np.ndarray) -> int:
    if len(st) == 0:
        return 0
    o = np.argsort(st, kind="stable")
    st, en = st[o], en[o]
    run_end = np.maximum.accumulate(en)
    new = np.ones(len(st), dtype=bool)
    new[1:] = st[1:] > run_end[:-1]
    grp = np.cumsum(new) - 1
    gs = st[new]
    ge = np.zeros(len(gs), dtype=np.int64)
    np.maximum.at(ge, grp, en)
    return int((ge - gs).sum())


# ---------------------------------------------------------------------------
# the analysis
# ---------------------------------------------------------------------------
def analyze_nvtx(trace: Trace, window=None, options=None) -> dict:
    """NVTX ranges summary, phase map and range -> kernel attribution with coverage."""
    thr = getattr(options, "nvtx_coverage_warn_threshold", thresholds.NVTX_COVERAGE_WARN_THRESHOLD)
    do_map = getattr(options, "nvtx_kernel_map", True)
    phase_map = getattr(options, "phase_map", None)
    top_n = int(getattr(options, "top_n", 20) or 20)
    s = trace.spans
    strings = trace.strings.as_list()
    warnings: list[str] = []
    ann = in_window(trace, s.kind == SpanKind.ANNOTATION, window)
    result: dict = {"available": bool(len(ann)), "ranges": int(len(ann)), "distinct_names": 0,
                    "attribution": None, "phases": None, "warnings": warnings, "tables": {}}
    if len(ann) == 0:
        return result

    dur = clipped_durations(trace, ann, window)
    names = s.name[ann]
    uk, tot, cnt = group_sum(names, dur)
    result["distinct_names"] = int(len(uk))
    order = np.argsort(-tot, kind="stable")
    # per-name percentiles
    o = np.argsort(names, kind="stable")
    sorted_names, sorted_dur = names[o], dur[o]
    bounds = np.searchsorted(sorted_names, uk)
    ends = np.append(bounds[1:], len(sorted_names))
    phase_idx, phases = phase_of_names(trace, phase_map)

    # ---- attribution -------------------------------------------------------
    lg = launched_gpu(trace, window, mask=kernel_mask(trace), select="overlaps")   # clipped kernel time
    kern, kdur = lg.gpu, lg.clipped_ns
    k_total = int(kdur.sum())
    attributed_by_name: dict[int, tuple[float, int]] = {}
    if do_map and len(kern):
        rng, n_linked = kernel_ranges(trace, kern, window, lg.launcher)
        ok = rng >= 0
        att = int(kdur[ok].sum())
        ak, asum, acnt = group_sum(s.name[rng[ok]], kdur[ok])
        attributed_by_name = {int(k): (float(v), int(c)) for k, v, c in zip(ak.tolist(), asum.tolist(), acnt.tolist())}
        cov = (att / k_total) if k_total else None
        result["attribution"] = {
            "enabled": True, "kernel_sum_ms": _ms(k_total), "attributed_ms": _ms(att),
            "kernels": int(len(kern)), "attributed_kernels": int(ok.sum()),
            "kernels_with_launch_link": n_linked,
            "coverage_pct": None if cov is None else round(100.0 * cov, 3),
            "warn_threshold_pct": round(100.0 * thr, 3),
            "rule": "innermost push/pop range enclosing the launching API call on its thread, matched on (pid, correlation)",
        }
        if cov is not None and cov < thr:
            warnings.append(
                f"NVTX-attributed GPU kernel time is best-effort (range -> launching API -> kernel). "
                f"Coverage is {100 * cov:.1f}% (< {100 * thr:.1f}%). Low coverage: interpret per-range kernel time cautiously.")
        if k_total and n_linked == 0:
            warnings.append("no kernel has a launch link to a host API call (correlation ids missing?): "
                            "NVTX -> kernel attribution is not possible")
    else:
        result["attribution"] = {"enabled": bool(do_map), "kernel_sum_ms": _ms(k_total), "attributed_ms": None,
                                 "coverage_pct": None, "warn_threshold_pct": round(100.0 * thr, 3)}

    rows = []
    for j in order[:max(top_n, 50)].tolist():
        seg = sorted_dur[bounds[j]:ends[j]]
        avg, p50, p90, mx = pct_stats_us(seg)
        nid = int(uk[j])
        a = attributed_by_name.get(nid)
        ph = phase_idx[nid] if nid >= 0 else -1
        rows.append([strings[nid] if nid >= 0 else "", int(cnt[j]), _ms(tot[j]), round(avg, 3), round(p50, 3),
                     round(p90, 3), round(mx, 3), None if a is None else _ms(a[0]), 0 if a is None else a[1],
                     phases[ph] if ph >= 0 else ""])
    result["tables"]["nvtx_ranges"] = {
        "columns": ["range_name", "count", "total_time_ms", "avg_duration_us", "p50_us", "p90_us", "max_us",
                    "attributed_kernel_time_ms", "attributed_kernel_count", "phase"],
        "rows": rows}
    if attributed_by_name:
        kt = sorted(attributed_by_name.items(), key=lambda kv: -kv[1][0])
        result["tables"]["nvtx_kernel_time"] = {
            "columns": ["range_name", "attributed_kernel_time_ms", "attributed_kernel_count", "pct_of_kernel_time"],
            "rows": [[strings[k], _ms(v), c, round(100.0 * v / k_total, 3) if k_total else 0.0]
                     for k, (v, c) in kt[:max(top_n, 50)]]}

    # ---- phases ------------------------------------------------------------
    if phases:
        ph_of_ann = phase_idx[names]
        ph_rows = []
        k_ph = np.full(len(kern), -1, dtype=np.int64)
        if do_map and len(kern):
            launcher = lg.launcher
            has = launcher >= 0
            acc = nested_range_mask(trace)
            pm = np.zeros(len(s), dtype=bool)
            named = s.name >= 0
            pm[named] = phase_idx[s.name[named]] >= 0
            encl = np.full(len(kern), -1, dtype=np.int64)
            encl[has] = enclosing(trace, launcher[has], acc & pm)
            ok = encl >= 0
            k_ph[ok] = phase_idx[s.name[encl[ok]]]
        lo, hi = window_bounds(window)
        phase_out = {}
        for j, ph in enumerate(phases):
            sel = ann[ph_of_ann == j]
            st = np.maximum(s.start_ns[sel], lo)
            en = np.minimum(s.end_ns[sel], hi)
            wall = _union_ns(st, np.maximum(en, st))
            kms = int(kdur[k_ph == j].sum())
            phase_out[ph] = {"ranges": int(len(sel)), "wall_ms": _ms(wall),
                             "kernel_sum_ms": _ms(kms) if do_map else None,
                             "kernel_pct": round(100.0 * kms / k_total, 3) if (do_map and k_total) else None}
            ph_rows.append([ph, int(len(sel)), _ms(wall), _ms(kms) if do_map else None,
                            round(100.0 * kms / k_total, 3) if (do_map and k_total) else None])
        un = int(kdur[k_ph < 0].sum())
        ph_rows.append(["(unmapped)", int((ph_of_ann < 0).sum()), None, _ms(un) if do_map else None,
                        round(100.0 * un / k_total, 3) if (do_map and k_total) else None])
        result["phases"] = phase_out
        result["tables"]["nvtx_phases"] = {"columns": ["phase", "ranges", "wall_ms", "kernel_time_ms", "pct_of_kernel_time"],
                                           "rows": ph_rows}
    return result


def nvtx_by_pid(trace: Trace, window=None, options=None) -> dict:
    """Seed 004 nvtx_by_pid: per (pid, range name) count, wall time, attributed kernel time, pid coverage."""
    thr = getattr(options, "nvtx_coverage_warn_threshold", thresholds.NVTX_COVERAGE_WARN_THRESHOLD)
    do_map = getattr(options, "nvtx_kernel_map", True)
    s = trace.spans
    strings = trace.strings.as_list()
    warnings: list[str] = []
    ann = in_window(trace, s.kind == SpanKind.ANNOTATION, window)
    out = {"pids": {}, "warnings": warnings, "tables": {}}
    if len(ann) == 0:
        return out
    tpid = trace.tracks.pid
    apid = tpid[s.track[ann]]         # per range (not per span: a full-length pid column is 8 bytes a span)
    dur = clipped_durations(trace, ann, window)
    lg = launched_gpu(trace, window, mask=kernel_mask(trace), select="overlaps")   # clipped kernel time
    kern, kdur, launcher = lg.gpu, lg.clipped_ns, lg.launcher
    del lg
    np.copyto(launcher, kern, where=launcher < 0)       # the pid of the launching call, else the kernel's own
    kpid = tpid[s.track[launcher]]
    del launcher
    if do_map and len(kern):
        rng = kernel_ranges(trace, kern, window)[0]
        drop_kernel_ranges(trace)       # analyze_nvtx walked it first; nothing after this step reads it
    else:
        rng = np.full(len(kern), -1, dtype=np.int64)
    # (pid, name) keys
    key_a = apid.astype(np.int64)
    key_a <<= 32
    key_a |= s.name[ann]
    uk, tot, cnt = group_sum(key_a, dur)
    ok = rng >= 0
    key_k = kpid[ok].astype(np.int64)
    key_k <<= 32
    key_k |= s.name[rng[ok]]
    kk, ksum, kcnt = group_sum(key_k, kdur[ok])
    kmap = {int(k): (float(v), int(c)) for k, v, c in zip(kk.tolist(), ksum.tolist(), kcnt.tolist())}
    pids = fast_unique(apid)
    cov_by_pid = {}
    for p in pids.tolist():
        ktot = int(kdur[kpid == p].sum())
        katt = int(kdur[ok & (kpid == p)].sum()) if do_map else 0
        cov = (katt / ktot) if (ktot and do_map) else None
        cov_by_pid[p] = cov
        out["pids"][int(p)] = {"ranges": int((apid == p).sum()), "kernel_sum_ms": _ms(ktot),
                               "attributed_ms": _ms(katt) if do_map else None,
                               "coverage_pct": None if cov is None else round(100 * cov, 3)}
    rows = []
    o = np.lexsort((-tot, uk >> 32))
    for j in o.tolist():
        k = int(uk[j])
        p, nid = k >> 32, k & 0xFFFFFFFF
        a = kmap.get(k)
        cov = cov_by_pid.get(p)
        rows.append([p, strings[nid] if nid < len(strings) else "", int(cnt[j]), _ms(tot[j]),
                     _ms(a[0]) if a else 0.0, a[1] if a else 0,
                     round(100 * cov, 3) if (cov is not None and a) else None])
    out["tables"]["nvtx_by_pid"] = {
        "columns": ["pid", "range_name", "nvtx_count", "nvtx_total_time_ms", "attributed_kernel_time_ms",
                    "attributed_kernel_count", "pid_attribution_coverage_pct"], "rows": rows}
    low = {p: c for p, c in cov_by_pid.items() if c is not None and c < thr}
    if low and do_map:
        worst = min(low, key=low.get)
        warnings.append(f"Per-PID NVTX-attributed GPU time has low coverage for {len(low)} PID(s) "
                        f"(worst PID {worst}: {100 * low[worst]:.1f}% < {100 * thr:.1f}%). "
                        "Interpret per-phase/per-PID attribution cautiously.")
    return out
