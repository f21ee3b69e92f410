"""GPU utilisation: busy = union of kernel, memcpy and memset intervals over all streams.

Every ``*_busy_ms`` here is a union over streams clipped to the window (wall time, never more
than the window).  Communication (``classes.COMM_KERNEL_RE``) is separated from compute, and the
compute/communication overlap is reported as HTA does: the share of communication time during
which a compute kernel also runs.
"""
from __future__ import annotations

import numpy as np

from .stats import fast_unique

from ..trace.kinds import SpanKind
from ..trace.model import Trace
from .classify import comm_kernel_mask, compute_kernel_mask, gpu_work_mask
from .intervals import clip, overlap_with_union, total, union
from .window import Window


def gpu_utilisation(trace: Trace, window: Window) -> dict | None:
    """Busy/idle over the window and over the GPU-active span (first to last GPU activity,
    as HTA reports it).  None when the trace has no GPU activity."""
    s = trace.spans
    m = gpu_work_mask(trace)
    if not m.any():
        return None
    lo, hi = window.start_ns, window.end_ns
    st, en = clip(s.start_ns[m], s.end_ns[m], lo, hi)
    busy = total(st, en)
    win = window.dur_ns
    out = {
        "busy_ns": busy, "busy_ms": busy / 1e6,
        "idle_ms": (win - busy) / 1e6,
        "idle_pct": 100.0 * (win - busy) / win if win else 0.0,
        "busy_pct": 100.0 * busy / win if win else 0.0,
    }
    if len(st):
        a0, a1 = int(st.min()), int(en.max())
        act = a1 - a0
        out.update({"active_start_ns": a0, "active_end_ns": a1, "active_span_ms": act / 1e6,
                    "idle_pct_active_span": 100.0 * (act - busy) / act if act else 0.0})
    else:
        out.update({"active_start_ns": None, "active_end_ns": None, "active_span_ms": 0.0,
                    "idle_pct_active_span": None})

    def union_of(mk):
        return union(*clip(s.start_ns[mk], s.end_ns[mk], lo, hi))

    comp = union_of(compute_kernel_mask(trace))
    comm = union_of(comm_kernel_mask(trace))
    comm_ns = int((comm[1] - comm[0]).sum())
    both_ns = int(overlap_with_union(comm[0], comm[1], *comp).sum()) if comm_ns else 0
    out["compute_kernel_busy_ms"] = int((comp[1] - comp[0]).sum()) / 1e6
    out["comm_kernel_busy_ms"] = comm_ns / 1e6
    out["compute_comm_overlap_ms"] = both_ns / 1e6
    out["compute_comm_overlap_pct"] = 100.0 * both_ns / comm_ns if comm_ns else None   # of communication time
    out["kernel_busy_ms"] = total(np.concatenate((comp[0], comm[0])), np.concatenate((comp[1], comm[1]))) / 1e6
    out["copy_busy_ms"] = total(*union_of(s.kind == SpanKind.MEMCPY)) / 1e6
    out["memset_busy_ms"] = total(*union_of(s.kind == SpanKind.MEMSET)) / 1e6
    tr = s.track[m]
    out["streams"] = int(len(fast_unique(tr)))
    dev = trace.tracks.device[tr]
    devices = []
    for d in fast_unique(dev).tolist():
        md = m.copy()
        md[m] = dev == d
        a, b = clip(s.start_ns[md], s.end_ns[md], lo, hi)
        bd = total(a, b)
        devices.append({"device": int(d), "busy_ms": bd / 1e6,
                        "idle_pct": 100.0 * (win - bd) / win if win else 0.0,
                        "streams": int(len(fast_unique(s.track[md])))})
    out["devices"] = devices
    return out
