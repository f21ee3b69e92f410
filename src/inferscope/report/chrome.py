"""Merged-timeline export: Chrome trace-event JSON (open in ui.perfetto.dev or chrome://tracing).

Layout
  * one process per host pid ("CPU process <pid>"), one thread per CPU thread track;
  * one process per GPU ("GPU <n>: <device name>") with a thread per stream, GPU-side user
    ranges on a sibling "stream N ranges" thread (they overlap kernels, so they must not
    share the kernel thread), device-wide rows on their own threads;
  * counters (``trace.counters``: CPU utilisation, RSS, NVML ...) as 'C' events under their
    process / GPU / a "System counters" process;
  * an "InferScope analysis" process with the analysed window and the largest GPU idle gaps;
  * flow arrows for ``trace.flows`` (CPU launch -> GPU activity).

Timestamps: every ``ts``/``dur`` is in microseconds relative to ``otherData.time_base_ns`` and
written as an exact decimal with 3 digits (ns precision) from integer arithmetic, so no
epoch-scale float rounding.  Flow 's' events carry exactly the ts of their source slice
(Perfetto binds 's' to the deepest slice enclosing ts on that thread: the launch call) and
'f' events carry ``"bp":"e"`` and exactly the ts of the GPU slice they point to.

Written as a stream of pre-formatted chunks through ``atomic_open`` (no full event list in
memory, the output file appears only when complete).
"""
from __future__ import annotations

import json
import math
import re

import numpy as np

from ..version import __version__
from ..trace.kinds import CopyKind, FlowKind, SpanKind, TrackKind
from ..result import Report
from ..trace.model import Trace
from ..util.atomic import atomic_open

GPU_PID_BASE = 1_000_000_000        # GPU n -> pid GPU_PID_BASE + n
SYSTEM_PID = 999_999_001            # counters not owned by a process or device
ANALYSIS_PID = 999_999_002          # InferScope's own annotations
UNKNOWN_HOST_PID = 999_999_000      # host tracks with pid -1
RANGE_TID_OFFSET = 1 << 30          # GPU stream s -> its ranges thread tid s + offset
DEVICE_TID_OFFSET = (1 << 30) + (1 << 29)
OVERLAP_TID_OFFSET = 1 << 32         # improperly nested spans -> sibling "(overlapping)" thread
CHUNK_EVENTS = 20_000

SPAN_CAT = {
    SpanKind.OTHER: "other", SpanKind.KERNEL: "kernel", SpanKind.MEMCPY: "gpu_memcpy",
    SpanKind.MEMSET: "gpu_memset", SpanKind.RUNTIME: "cuda_runtime", SpanKind.DRIVER: "cuda_driver",
    SpanKind.CPU_OP: "cpu_op", SpanKind.PYTHON: "python_function", SpanKind.ANNOTATION: "user_annotation",
    SpanKind.GPU_ANNOTATION: "gpu_user_annotation", SpanKind.STEP: "step", SpanKind.CPU_SAMPLE: "cpu_sample",
    SpanKind.GPU_SYNC: "gpu_sync", SpanKind.MARK: "mark", SpanKind.OS_RUNTIME: "os_runtime",
    SpanKind.OVERHEAD: "overhead", SpanKind.GRAPH_LAUNCH: "cuda_graph",
    SpanKind.GC_PAUSE: "python_gc",
}
FLOW_CAT = {FlowKind.LAUNCH: "launch", FlowKind.FWDBWD: "fwdbwd", FlowKind.OTHER: "flow"}
_SURROGATE = re.compile("[\ud800-\udfff]")


def jstr(s) -> str:
    """JSON string literal; lone surrogates (not encodable as UTF-8) become U+FFFD."""
    s = "" if s is None else str(s)
    return json.dumps(_SURROGATE.sub("\ufffd", s), ensure_ascii=False)


def us(rel_ns: int) -> str:
    """Integer ns -> exact decimal microseconds with 3 digits ('12.345')."""
    q, r = divmod(int(rel_ns), 1000)
    return f"{q}.{r:03d}"


def _us_array(rel: np.ndarray) -> list[str]:
    q, r = np.divmod(rel.astype(np.int64), 1000)
    return [f"{a}.{b:03d}" for a, b in zip(q.tolist(), r.tolist())]


def time_base_ns(trace: Trace, report: Report | None = None) -> int:
    cands = []
    if len(trace.spans):
        cands.append(int(trace.spans.start_ns.min()))
    if len(trace.counters):
        cands.append(int(trace.counters.ts_ns.min()))
    if report is not None:
        cands.append(int(report.window.start_ns))
    return min(cands) if cands else 0


def track_ids(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """(pid, tid) used in the export for every track (GPU streams under a GPU pid)."""
    t = trace.tracks
    n = len(t)
    pid = t.pid.astype(np.int64).copy()
    tid = t.tid.astype(np.int64).copy()
    kind = t.kind
    dev = np.maximum(t.device.astype(np.int64), 0)
    gpu = (kind == TrackKind.GPU_STREAM) | (kind == TrackKind.GPU_DEVICE)
    pid[gpu] = GPU_PID_BASE + dev[gpu]
    devw = kind == TrackKind.GPU_DEVICE
    tid[devw] = DEVICE_TID_OFFSET + np.arange(n)[devw]
    host = ~gpu
    pid[host & (pid < 0)] = UNKNOWN_HOST_PID
    bad_tid = tid < 0
    tid[bad_tid] = DEVICE_TID_OFFSET + np.arange(n)[bad_tid]
    ctr = kind == TrackKind.COUNTER
    ctr_dev = ctr & (t.device >= 0)
    pid[ctr_dev] = GPU_PID_BASE + dev[ctr_dev]
    pid[ctr & ~ctr_dev & (t.pid < 0)] = SYSTEM_PID
    return pid, tid


def misnested(trace: Trace, group: np.ndarray | None = None) -> np.ndarray:
    """Mask of spans that overlap an enclosing span on their track without nesting in it.

    Trace viewers require 'X' events on one thread to nest strictly; such spans (clock skew,
    overlapping kernels on a stream) are moved to a sibling "(overlapping)" thread instead of
    being dropped or mis-drawn.
    """
    s = trace.spans
    bad = np.zeros(len(s), dtype=bool)
    if not len(s):
        return bad
    # one stack walk per track, in (start, -end) order (spans are sorted that way already)
    grp = s.track.astype(np.int64) if group is None else np.asarray(group, dtype=np.int64)
    order = np.lexsort((s.start_ns, grp))
    tr = grp[order]
    st = s.start_ns[order]
    en = s.end_ns[order]
    new_track = np.ones(len(order), dtype=bool)
    new_track[1:] = tr[1:] != tr[:-1]
    for lo, hi in zip(np.flatnonzero(new_track).tolist(), (np.append(np.flatnonzero(new_track)[1:], len(order))).tolist()):
        e = en[lo:hi]
        a = st[lo:hi]
        if hi - lo < 2 or np.all(a[1:] >= e[:-1]):
            continue        # no overlaps at all on this track
        stack: list[int] = []
        idx = order[lo:hi].tolist()
        for j, (a0, e0) in enumerate(zip(a.tolist(), e.tolist())):
            while stack and stack[-1] <= a0:
                stack.pop()
            if stack and e0 > stack[-1]:
                bad[idx[j]] = True
                continue
            stack.append(e0)
    return bad


def _meta_event(name: str, pid: int, tid: int | None, args: dict) -> str:
    t = "" if tid is None else f',"tid":{tid}'
    args = {k: _SURROGATE.sub("\ufffd", v) if isinstance(v, str) else v for k, v in args.items()}
    return f'{{"ph":"M","name":"{name}","pid":{pid}{t},"ts":0.000,"args":{json.dumps(args, ensure_ascii=False)}}}'


def iter_events(trace: Trace, report: Report | None = None):
    """Yield chunks (lists of JSON event strings) of the whole export (the analysis rows from ``report``)."""
    base = time_base_ns(trace, report)
    strings = trace.strings.as_list()
    tracks = trace.tracks
    tpid, ttid = track_ids(trace)
    s = trace.spans
    n = len(s)

    # span -> (pid, tid): GPU-side ranges go to their stream's sibling thread
    span_pid = tpid[s.track] if n else np.zeros(0, np.int64)
    span_tid = ttid[s.track].copy() if n else np.zeros(0, np.int64)
    gpu_range = (s.kind == SpanKind.GPU_ANNOTATION) & (tracks.kind[s.track] == TrackKind.GPU_STREAM) if n else np.zeros(0, bool)
    span_tid[gpu_range] += RANGE_TID_OFFSET
    overlap = misnested(trace, s.track.astype(np.int64) * 2 + gpu_range)
    span_tid[overlap] += OVERLAP_TID_OFFSET
    overlap_threads = sorted({(int(p), int(t)) for p, t in zip(span_pid[overlap].tolist(), span_tid[overlap].tolist())})

    # ---- metadata: processes and threads ----
    meta: list[str] = []
    devices = {int(d.get("id", -1)): d for d in (trace.meta.get("devices") or []) if isinstance(d, dict)}
    host_pids = sorted({int(p) for p, k in zip(tpid.tolist(), tracks.kind.tolist())
                        if k not in (TrackKind.GPU_STREAM, TrackKind.GPU_DEVICE) and p not in (SYSTEM_PID,) and p < GPU_PID_BASE})
    for i, p in enumerate(host_pids):
        label = "CPU process (unknown pid)" if p == UNKNOWN_HOST_PID else f"CPU process {p}"
        meta.append(_meta_event("process_name", p, None, {"name": label}))
        meta.append(_meta_event("process_sort_index", p, None, {"sort_index": i}))
    gpu_pids = sorted({int(p) for p in tpid.tolist() if p >= GPU_PID_BASE})
    for p in gpu_pids:
        d = p - GPU_PID_BASE
        dn = devices.get(d, {}).get("name")
        meta.append(_meta_event("process_name", p, None, {"name": f"GPU {d}" + (f": {dn}" if dn else "")}))
        meta.append(_meta_event("process_sort_index", p, None, {"sort_index": 1000 + d}))
    if np.any(tpid == SYSTEM_PID):
        meta.append(_meta_event("process_name", SYSTEM_PID, None, {"name": "System counters"}))
        meta.append(_meta_event("process_sort_index", SYSTEM_PID, None, {"sort_index": 2000}))
    meta.append(_meta_event("process_name", ANALYSIS_PID, None, {"name": "InferScope analysis"}))
    meta.append(_meta_event("process_sort_index", ANALYSIS_PID, None, {"sort_index": -1}))
    has_range = set(np.unique(s.track[gpu_range]).tolist()) if n else set()
    for t in range(len(tracks)):
        k = int(tracks.kind[t])
        if k == TrackKind.COUNTER:
            continue
        p, tid = int(tpid[t]), int(ttid[t])
        label = trace.track_label(t)
        if k == TrackKind.GPU_STREAM:
            stream = int(tracks.tid[t])
            if int(tracks.name[t]) < 0 or not strings[int(tracks.name[t])]:
                label = f"stream {stream}"
            meta.append(_meta_event("thread_name", p, tid, {"name": label}))
            meta.append(_meta_event("thread_sort_index", p, tid, {"sort_index": 2 * max(stream, 0) + 1}))
            if t in has_range:
                meta.append(_meta_event("thread_name", p, tid + RANGE_TID_OFFSET, {"name": f"{label} ranges"}))
                meta.append(_meta_event("thread_sort_index", p, tid + RANGE_TID_OFFSET, {"sort_index": 2 * max(stream, 0)}))
        else:
            meta.append(_meta_event("thread_name", p, tid, {"name": label}))
            if k == TrackKind.GPU_DEVICE:
                meta.append(_meta_event("thread_sort_index", p, tid, {"sort_index": 1 << 20}))
    label_of = {(int(tpid[t]), int(ttid[t])): trace.track_label(t) for t in range(len(tracks))}
    for p, t in overlap_threads:
        base_tid = t - OVERLAP_TID_OFFSET
        base_label = label_of.get((p, base_tid)) or label_of.get((p, base_tid - RANGE_TID_OFFSET), f"thread {base_tid}")
        meta.append(_meta_event("thread_name", p, t, {"name": f"{base_label} (overlapping)"}))
    meta.append(_meta_event("thread_name", ANALYSIS_PID, 1, {"name": "analysis window"}))
    meta.append(_meta_event("thread_name", ANALYSIS_PID, 2, {"name": "largest GPU idle gaps"}))
    yield meta

    # ---- spans ----
    jnames: dict[int, str] = {}

    def jn(i: int) -> str:
        v = jnames.get(i)
        if v is None:
            v = jstr(strings[i] if 0 <= i < len(strings) else "")
            jnames[i] = v
        return v

    cat_json = {int(k): json.dumps(v) for k, v in SPAN_CAT.items()}
    copy_names = {int(k): k.name for k in CopyKind}
    for lo in range(0, n, CHUNK_EVENTS):
        hi = min(n, lo + CHUNK_EVENTS)
        st = s.start_ns[lo:hi]
        ts_l = _us_array(st - base)
        dur_l = _us_array(s.end_ns[lo:hi] - st)
        kind_l = s.kind[lo:hi].tolist()
        name_l = s.name[lo:hi].tolist()
        cat_l = s.cat[lo:hi].tolist()
        corr_l = s.correlation[lo:hi].tolist()
        ext_l = s.ext_id[lo:hi].tolist()
        bytes_l = s.bytes[lo:hi].tolist()
        ck_l = s.copy_kind[lo:hi].tolist()
        det_l = s.detail[lo:hi].tolist()
        pid_l = span_pid[lo:hi].tolist()
        tid_l = span_tid[lo:hi].tolist()
        out = []
        for j in range(hi - lo):
            k = kind_l[j]
            args = []
            if corr_l[j] >= 0:     # a CPU_SAMPLE run keeps its sampler tick count there
                args.append(f'"samples":{corr_l[j]}' if k == SpanKind.CPU_SAMPLE else f'"correlation":{corr_l[j]}')
            if ext_l[j] >= 0:
                args.append(f'"external_id":{ext_l[j]}')
            if bytes_l[j] >= 0:
                args.append(f'"bytes":{bytes_l[j]}')
            if ck_l[j]:
                args.append(f'"copy_kind":"{copy_names.get(ck_l[j], "UNKNOWN")}"')
            if det_l[j] >= 0:
                args.append(f'"detail":{jn(det_l[j])}')
            if cat_l[j] >= 0:
                args.append(f'"source_cat":{jn(cat_l[j])}')
            a = (',"args":{' + ",".join(args) + "}") if args else ""
            if k == SpanKind.MARK:
                out.append(f'{{"ph":"i","s":"t","name":{jn(name_l[j])},"cat":"mark","ts":{ts_l[j]},'
                           f'"pid":{pid_l[j]},"tid":{tid_l[j]}{a}}}')
            else:
                out.append(f'{{"ph":"X","name":{jn(name_l[j])},"cat":{cat_json.get(k, chr(34) + "other" + chr(34))},'
                           f'"ts":{ts_l[j]},"dur":{dur_l[j]},"pid":{pid_l[j]},"tid":{tid_l[j]}{a}}}')
        yield out

    # ---- flows: 's' at the source slice start, 'f' (bp e) at the destination slice start ----
    f = trace.flows
    nf = len(f)
    for lo in range(0, nf, CHUNK_EVENTS):
        hi = min(nf, lo + CHUNK_EVENTS)
        src = f.src[lo:hi].astype(np.int64)
        dst = f.dst[lo:hi].astype(np.int64)
        ts_s = _us_array(s.start_ns[src] - base)
        ts_f = _us_array(s.start_ns[dst] - base)
        ps, ts_, pd, td = span_pid[src].tolist(), span_tid[src].tolist(), span_pid[dst].tolist(), span_tid[dst].tolist()
        kinds = f.kind[lo:hi].tolist()
        out = []
        for j in range(hi - lo):
            fid = lo + j + 1
            cat = FLOW_CAT.get(kinds[j], "flow")
            out.append(f'{{"ph":"s","id":{fid},"name":"{cat}","cat":"{cat}","ts":{ts_s[j]},"pid":{ps[j]},"tid":{ts_[j]}}}')
            out.append(f'{{"ph":"f","bp":"e","id":{fid},"name":"{cat}","cat":"{cat}","ts":{ts_f[j]},"pid":{pd[j]},"tid":{td[j]}}}')
        yield out

    # ---- counters ----
    c = trace.counters
    nc = len(c)
    for lo in range(0, nc, CHUNK_EVENTS):
        hi = min(nc, lo + CHUNK_EVENTS)
        ts_l = _us_array(c.ts_ns[lo:hi] - base)
        tr_l = c.track[lo:hi].tolist()
        v_l = c.value[lo:hi].tolist()
        out = []
        for j in range(hi - lo):
            v = v_l[j]
            if not math.isfinite(v):
                continue
            t = tr_l[j]
            out.append(f'{{"ph":"C","name":{jn(int(tracks.name[t]))},"ts":{ts_l[j]},"pid":{int(tpid[t])},'
                       f'"args":{{"value":{v!r}}}}}')
        yield out

    # ---- InferScope analysis: window and idle gaps ----
    out = []
    win = report.window if report is not None else None
    if win is not None and win.end_ns >= win.start_ns:
        ws, we = win.start_ns, win.end_ns
        label = f"window: {win.label or win.kind or ''}".strip()
        e2e = report.e2e_ms
        args = {"e2e_ms": e2e} if math.isfinite(e2e) else {}
        if report.verdict.title:
            args["verdict"] = _SURROGATE.sub("\ufffd", report.verdict.title)
        out.append(f'{{"ph":"X","name":{jstr(label)},"cat":"inferscope","ts":{us(int(ws) - base)},'
                   f'"dur":{us(int(we) - int(ws))},"pid":{ANALYSIS_PID},"tid":1,"args":{json.dumps(args, ensure_ascii=False)}}}')
    gaps = report.idle_gaps.largest if report is not None and report.idle_gaps is not None else []
    for g in gaps[:200]:
        if g.end_ns >= g.start_ns:
            gs, ge = g.start_ns, g.end_ns
            out.append(f'{{"ph":"X","name":"GPU idle","cat":"inferscope","ts":{us(gs - base)},"dur":{us(ge - gs)},'
                       f'"pid":{ANALYSIS_PID},"tid":2,"args":{{"ms":{(ge - gs) / 1e6!r}}}}}')
    yield out


def other_data(trace: Trace, report: Report | None) -> dict:
    win = report.window if report is not None else None
    return {
        "generator": f"inferscope {__version__}",
        "time_base_ns": time_base_ns(trace, report),
        "ts_unit": "microseconds relative to time_base_ns (exact, 3 decimals = ns)",
        "window_start_ns": win.start_ns if win is not None else None,
        "window_end_ns": win.end_ns if win is not None else None,
        "source_format": trace.meta.get("source_format"),
        "source_file": trace.meta.get("source_file"),
        "gpu_pid_base": GPU_PID_BASE,
    }


def write(trace: Trace, report: Report | None, fh) -> int:
    """Stream the export into a binary file object; returns the number of events (None: no analysis rows)."""
    fh.write(b'{"displayTimeUnit":"ns","otherData":')
    fh.write(json.dumps(other_data(trace, report), ensure_ascii=False, default=str).encode("utf-8"))
    fh.write(b',"traceEvents":[\n')
    first = True
    count = 0
    for chunk in iter_events(trace, report):
        if not chunk:
            continue
        data = ",\n".join(chunk)
        fh.write(((",\n" if not first else "") + data).encode("utf-8"))
        first = False
        count += len(chunk)
    fh.write(b"\n]}\n")
    return count


def render(report: Report, trace: Trace, path) -> None:
    with atomic_open(path, "wb") as fh:
        write(trace, report, fh)
