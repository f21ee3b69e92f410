"""Per-process breakdowns (seed 004: kernels_by_pid, sync_by_pid) with PID sanity warnings.

A kernel's pid is the pid of its launching host API call when a LAUNCH flow exists (the most
reliable source: the CPU thread's globalTid), else the pid of its GPU track (nsys globalPid).
"""
from __future__ import annotations

import numpy as np

from ..trace.kinds import TrackKind
from ..trace.model import Trace
from .classify import kernel_mask, sync_api_mask
from .launched import launched_gpu
from .links import launchers_for
from .nvtx_attribution import nvtx_by_pid
from .select import clipped_durations, group_sum, in_window

LINUX_PID_MAX = 1 << 22   # 4194304: pid_max upper bound on Linux
# where each format keeps a kernel's process id (a warning names the fields of the format it read)
_PID_FIELDS = {"nsys": "globalPid/globalTid absent",
               "kineto": "no numeric \"pid\" on the kernel event or on a launching call linked by an \"ac2g\" flow",
               "inferscope": "no process id recorded for the launching thread"}


def _ms(ns) -> float:
    return round(float(ns) / 1e6, 6)


def kernel_pids(trace: Trace, kern: np.ndarray, launcher: np.ndarray | None = None) -> np.ndarray:
    """pid of each kernel's launching call (of the kernel's own track where it has none); looked up for
    these spans only (a full-length pid column is 8 bytes a span).  ``launcher``: the kernels' launching
    calls when known (launched.LaunchedGpu.launcher; modified in place)."""
    launcher = launchers_for(trace, kern) if launcher is None else launcher
    np.copyto(launcher, kern, where=launcher < 0)      # in place (a fresh array)
    return trace.tracks.pid[trace.spans.track[launcher]]


def analyze_per_pid(trace: Trace, window=None, options=None) -> dict:
    top_n = int(getattr(options, "top_n", 20) or 20)
    s = trace.spans
    strings = trace.strings.as_list()
    warnings: list[str] = []
    out: dict = {"pids": [], "warnings": warnings, "tables": {}}

    # ---- kernels by pid ------------------------------------------------------
    lg = launched_gpu(trace, window, mask=kernel_mask(trace), select="overlaps")   # clipped kernel time
    kern, kdur = lg.gpu, lg.clipped_ns
    kpid = kernel_pids(trace, kern, lg.launcher) if len(kern) else np.zeros(0, np.int64)
    del lg
    total = int(kdur.sum())
    rows = []
    if len(kern):
        pids, ptot, pcnt = group_sum(kpid, kdur)
        for p, pt, pc in sorted(zip(pids.tolist(), ptot.tolist(), pcnt.tolist()), key=lambda r: -r[1]):
            m = kpid == p
            out["pids"].append({"pid": int(p), "kernel_sum_ms": _ms(pt), "kernels": int(pc),
                                "pct_of_kernel_time": round(100 * pt / total, 3) if total else 0.0})
            km = kern[m]        # (name << 8 | device) keys for this pid's kernels only
            key = s.name[km].astype(np.int64)
            key <<= 8
            dev = trace.tracks.device[s.track[km]]
            del km
            dev &= 0xFF
            key |= dev
            del dev
            uk, ks, kc = group_sum(key, kdur[m])
            del key
            for j in np.argsort(-ks, kind="stable")[:top_n].tolist():
                nid, d = int(uk[j]) >> 8, int(uk[j]) & 0xFF
                rows.append([int(p), _ms(pt), round(100 * pt / total, 3) if total else 0.0,
                             strings[nid] if nid >= 0 else "", d, int(kc[j]), _ms(ks[j]),
                             round(ks[j] / kc[j] / 1e3, 3), round(100 * ks[j] / pt, 3) if pt else 0.0,
                             round(100 * ks[j] / total, 3) if total else 0.0])
    out["tables"]["kernels_by_pid"] = {
        "columns": ["pid", "pid_total_kernel_time_ms", "pid_pct_of_total_kernel_time", "kernel_name", "device_id",
                    "call_count", "total_time_ms", "avg_duration_us", "pct_of_pid_kernel_time",
                    "pct_of_total_kernel_time"], "rows": rows}

    # ---- sync calls by pid (the breakdown's sync rule, as the syncs table) -------
    sel = in_window(trace, sync_api_mask(trace), window)
    srows = []
    sync_total = 0
    if len(sel):
        d = clipped_durations(trace, sel, window)
        sync_total = int(d.sum())
        key = trace.tracks.pid[s.track[sel]].astype(np.int64)
        key <<= 32
        key |= s.name[sel]
        uk, ts, tc = group_sum(key, d)
        o = np.lexsort((-ts, uk >> 32))
        for j in o.tolist():
            p, nid = int(uk[j]) >> 32, int(uk[j]) & 0xFFFFFFFF
            srows.append([p, strings[nid], int(tc[j]), _ms(ts[j]), round(ts[j] / tc[j] / 1e3, 3)])
    out["sync_calls_sum_ms"] = _ms(sync_total)
    out["tables"]["sync_by_pid"] = {"columns": ["pid", "api_name", "call_count", "total_time_ms", "avg_duration_us"],
                                    "rows": srows}

    # ---- sanity warnings -------------------------------------------------------
    if len(kern):
        unknown = kpid < 0
        if unknown.any():
            warnings.append(f"PID attribution: {int(unknown.sum())} of {len(kern)} kernels have no process id "
                            f"({_PID_FIELDS.get(trace.meta.get('source_format'), 'no process id recorded')}); "
                            "they are grouped under pid -1")
        weird = (kpid == 0) | (kpid > LINUX_PID_MAX)
        if weird.any():
            warnings.append(f"PID attribution looks suspicious: {int(weird.sum())} kernels decode to pid 0 or a pid "
                            f"above {LINUX_PID_MAX} (hardware/VM bits not masked in the export?)")
        # a kernel without a launcher has its own track's pid (kernel_pids): only launched ones can differ
        gpu_pid = trace.tracks.pid[s.track[kern]]
        mismatch = (gpu_pid >= 0) & (gpu_pid != kpid)
        if mismatch.any():
            warnings.append(f"PID attribution: {int(mismatch.sum())} kernels run under a different pid than the "
                            "thread that launched them; the launching pid is used")
    names = _process_names(trace)
    for r in out["pids"]:
        r["name"] = names.get(r["pid"], "")
    if len(out["pids"]) > 1:
        out["multi_process"] = True
    return out


def _process_names(trace: Trace) -> dict[int, str]:
    t = trace.tracks
    out: dict[int, str] = {}
    for i in np.flatnonzero(t.kind == TrackKind.CPU_THREAD).tolist():
        nm = trace.strings[int(t.name[i])]
        if nm and " [" in nm:
            out.setdefault(int(t.pid[i]), nm.split(" [")[0])
    return out


def analyze_pids(trace: Trace, window=None, options=None) -> dict:
    """kernels_by_pid + sync_by_pid + nvtx_by_pid in one result (one pipeline step).  nvtx_by_pid runs
    first: it takes the kernel -> range walk that analyze_nvtx left in the trace's cache out of it."""
    b = nvtx_by_pid(trace, window, options)
    a = analyze_per_pid(trace, window, options)
    a["tables"].update(b["tables"])
    a["warnings"].extend(b["warnings"])
    a["nvtx_by_pid"] = b["pids"]
    return a
