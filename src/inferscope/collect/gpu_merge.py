"""Merging a live session's GPU sources into its trace: CUPTI records (gpu_activity.py ->
gpu_records.py) or torch.profiler's Kineto export (torchprof.py), each onto perf_counter_ns, sharing
the session's event budget; and what each costs the program (the overhead estimate's basis).
``sess``: the collect.session.Session."""
from __future__ import annotations

import time

import numpy as np

from .. import thresholds as T
from ..trace.kinds import SpanKind, TrackKind
from ..trace.model import SPAN_COLUMNS
from .gpu_records import add_to
from .torchprof import SYNC_PREFIX, clock_offset, load_chrome


def merge_cupti(sess, b, n_own: int, meta: dict, warnings: list) -> int:
    """CUPTI records -> spans + flows (gpu_records.py); returns the records dropped."""
    snap = sess.gpu_act.snapshot(rows=False)
    r = add_to(b, snap, room=max(0, sess.buffer.capacity - n_own))
    warnings.extend(r["warnings"])
    st = snap["stats"]
    meta["clock_sync_error_us"] = None if snap["clock_error_us"] is None else round(snap["clock_error_us"], 3)
    # flat keys (trace meta keeps scalars and short lists only)
    meta["gpu_source"] = "cupti"
    meta.update({f"cupti_{k}": v for k, v in st.items()})
    meta.update(cupti_spans=r["spans"], cupti_launch_flows=r["flows"], cupti_host_api_calls=r["host_api_calls"])
    # CUPTI's own cost on the launching thread: per GPU activity record (thresholds.py, measured on an H100)
    n_gpu = sum(len(snap["columns"][k]["start"]) for k in ("kernel", "memcpy", "memset"))
    est_ms = n_gpu * T.CUPTI_COST_PER_GPU_RECORD_US / 1e3
    meta["cupti_estimated_cost_ms"] = round(est_ms, 1)
    _overhead(sess, meta, sess.gpu_act.callback_cpu_ns, est_ms,
              "(CPU time of InferScope's sampler + housekeeping threads + CUPTI buffer callbacks + CUPTI tracing "
              f"estimated as {n_gpu} GPU activity records x {T.CUPTI_COST_PER_GPU_RECORD_US:g} us, measured on "
              "H100 and H200 hosts) / CPU time of the whole process; an estimate: the per-record cost depends on the CPU and driver")
    if sess.gpu_act.error:
        warnings.append(sess.gpu_act.error)
    return r["dropped"] + st["dropped_records"]


def clock_sync_limit_us(duration_ms: float, margin_us: float) -> float:
    """Seed 001's clock-sync rule: the error allowed is CLOCK_SYNC_ERROR_MAX_FRACTION of the collection's
    duration, never below the fixed margin (sync_error_margin_us)."""
    return max(float(margin_us), T.CLOCK_SYNC_ERROR_MAX_FRACTION * float(duration_ms) * 1e3)


def clock_sync_warning(source: str, err_us: float | None, duration_ms: float, margin_us: float) -> str | None:
    """The warning when ``err_us`` exceeds clock_sync_limit_us (both figures named), else None."""
    if err_us is None:
        return None
    limit = clock_sync_limit_us(duration_ms, margin_us)
    if err_us <= limit:
        return None
    pct = 100.0 * err_us / (duration_ms * 1e3) if duration_ms > 0 else float("inf")
    return (f"{source} clock sync error {err_us:.0f} us is {pct:.1f} % of the {duration_ms:.1f} ms collection: "
            f"above the limit of {limit:.0f} us (the larger of {100 * T.CLOCK_SYNC_ERROR_MAX_FRACTION:g} % of the "
            f"collection and INFERSCOPE_SYNC_ERROR_MARGIN_US={margin_us:g} us); GPU times may be misaligned with CPU "
            "samples by that much: check GPU clock stability")


def profiler_cost(sess, meta: dict) -> None:
    """Add torch.profiler's estimated cost (recorded host events x measured cost per event) to
    the overhead estimate: the sampler's own CPU time alone says nothing about it."""
    n = sess._profiler_host_events
    est_ms = n * T.PROFILER_COST_PER_HOST_EVENT_US / 1e3
    meta["profiler_host_events"] = n
    meta["estimated_profiler_overhead_ms"] = round(est_ms, 1)
    _overhead(sess, meta, 0, est_ms,
              "(CPU time of InferScope's sampler + housekeeping threads + torch.profiler estimated as "
              f"{n} recorded ops and CUDA API calls x {T.PROFILER_COST_PER_HOST_EVENT_US:g} us, measured on an H100 "
              "host) / CPU time of the whole process; an estimate: the per-event cost depends on the CPU")


def _overhead(sess, meta: dict, extra_cpu_ns: int, est_ms: float, basis: str) -> None:
    """The overhead estimate with a GPU source: the share of the process's CPU time spent on collection
    (the sampler's and housekeeping threads' CPU + ``extra_cpu_ns`` measured + ``est_ms`` estimated)."""
    proc_ms = (time.process_time_ns() - sess.cpu_start_ns) / 1e6
    own_ms = (sess.thread_cpu_ns() + extra_cpu_ns) / 1e6
    if proc_ms > 0:
        meta["estimated_overhead_pct"] = round(min(100.0, 100.0 * (own_ms + est_ms) / proc_ms), 2)
    meta["overhead_basis"] = basis


def merge_kineto(sess, b, path: str, n_own: int, warnings: list, devices: list) -> tuple[int, float | None]:
    try:
        kt = load_chrome(path)
    except Exception as e:
        warnings.append(f"could not read the torch profiler trace ({type(e).__name__}: {e}); torch ops not merged")
        return 0, None
    strs = kt.strings.as_list()
    s = kt.spans
    ann = (s.kind == int(SpanKind.ANNOTATION)) | (s.kind == int(SpanKind.OTHER))
    starts = {}
    for i in np.flatnonzero(ann):
        nm = strs[s.name[i]] if s.name[i] >= 0 else ""
        if nm.startswith(SYNC_PREFIX):
            starts.setdefault(nm, int(s.start_ns[i]))
    off, err_us, _ = clock_offset(starts, sess.torch.markers)
    if off is None:
        warnings.append("torch profiler trace has no clock-sync markers; torch ops not merged")
        return 0, None
    drop_names = {i for i, x in enumerate(strs) if x.startswith("inferscope::") or x in sess.scope_names}
    keep = ~(ann & np.isin(s.name, np.fromiter(drop_names, dtype=np.int64, count=len(drop_names))))
    # bounded memory: torch events share the buffer budget; drop the oldest beyond it
    room = max(0, sess.buffer.capacity - n_own)
    kept_idx = np.flatnonzero(keep)
    dropped = 0
    if len(kept_idx) > room:
        dropped = len(kept_idx) - room
        kept_idx = kept_idx[dropped:]  # spans are sorted by start: drop the oldest
    if not len(kept_idx):
        return dropped, err_us
    smap = np.asarray([b.strings.intern(x) for x in strs] or [0], dtype=np.int32)
    tk = kt.tracks
    tmap = np.asarray([b.track(TrackKind(int(tk.kind[t])), pid=int(tk.pid[t]), tid=int(tk.tid[t]),
                               device=int(tk.device[t]),
                               name=strs[tk.name[t]] if tk.name[t] >= 0 and int(tk.kind[t]) == int(TrackKind.COUNTER) else "")
                       for t in range(len(tk))] or [0], dtype=np.int32)
    kk = s.kind[np.flatnonzero(keep)]
    sess._profiler_host_events = int(np.isin(kk, [int(SpanKind.CPU_OP), int(SpanKind.RUNTIME), int(SpanKind.DRIVER)]).sum())
    cols = {}
    for k in SPAN_COLUMNS:
        v = getattr(s, k)[kept_idx]
        if k in ("name", "cat", "detail"):
            v = np.where(v >= 0, smap[np.maximum(v, 0)], -1)
        elif k == "track":
            v = tmap[v]
        elif k in ("start_ns", "end_ns"):
            v = v - off
        elif k in ("depth", "parent"):
            continue
        cols[k] = v
    prov = b.add_spans(**cols)
    if len(kt.flows):
        pos = np.full(len(s), -1, dtype=np.int64)
        pos[kept_idx] = prov
        src, dst = pos[kt.flows.src], pos[kt.flows.dst]
        ok = (src >= 0) & (dst >= 0)
        if ok.any():
            b.add_flows(src[ok], dst[ok], kt.flows.kind[ok])
    if len(kt.counters):
        b.add_counters(tmap[kt.counters.track], kt.counters.ts_ns - off, kt.counters.value)
    if not devices and kt.meta.get("devices"):
        devices.extend(kt.meta["devices"])
    for w in kt.meta.get("warnings", []) or []:
        warnings.append(f"torch profiler trace: {w}")
    return dropped, err_us
