"""GPU utilisation: busy = union of kernel, memcpy and memset intervals over all streams."""
from __future__ import annotations

import numpy as np

from .stats import fast_unique

from ..trace.kinds import SpanKind
from ..trace.model import Trace
from .classify import gpu_work_mask
from .intervals import clip, total
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

    def kind_total(kinds):
        mk = np.isin(s.kind, [int(x) for x in kinds])
        a, b = clip(s.start_ns[mk], s.end_ns[mk], lo, hi)
        return total(a, b) / 1e6

    out["kernel_ms"] = kind_total([SpanKind.KERNEL, SpanKind.GRAPH_LAUNCH])
    out["copy_ms"] = kind_total([SpanKind.MEMCPY])
    out["memset_ms"] = kind_total([SpanKind.MEMSET])
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
