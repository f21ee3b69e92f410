"""What live collection itself added to the window (the observer effect), as an estimate.

With CUPTI (the default GPU source) the cost is per recorded GPU activity on the launching thread
(thresholds.CUPTI_COST_PER_GPU_RECORD_US); with torch.profiler, per recorded host event:

In a live run with torch.profiler on, every recorded CPU op and CUDA runtime/driver call costs the
profiled thread extra host time (thresholds.PROFILER_COST_PER_HOST_EVENT_US, measured on an H100
host).  Recorded host events overlapping the window x that cost, over the window, is how much of
the window's host-side time (framework ops, launch API) the collection probably added.  GPU kernel
durations are not inflated (measured: kernel medians equal a plain torch.profiler run's within the
run-to-run spread, tests/test_gpu.py), but a launch-bound loop is stretched by this much.
"""
from __future__ import annotations

import numpy as np

from .. import thresholds as T
from ..trace.kinds import SpanKind
from .window import Window


def collection_cost(trace, window: Window) -> dict | None:
    coll = trace.meta.get("collection") or {}
    if trace.meta.get("source_format") != "inferscope":
        return None
    if coll.get("gpu_source") == "cupti":
        return _cupti_cost(trace, window, coll)
    if coll.get("torch_profiler") != "on":
        return None
    s = trace.spans
    m = np.isin(s.kind, [int(SpanKind.CPU_OP), int(SpanKind.RUNTIME), int(SpanKind.DRIVER)]) & \
        (s.end_ns > window.start_ns) & (s.start_ns < window.end_ns)
    n = int(m.sum())
    est_ms = n * T.PROFILER_COST_PER_HOST_EVENT_US / 1e3
    pct = 100.0 * est_ms / window.dur_ms if window.dur_ms else 0.0
    return {"profiler_host_events": n, "cost_per_event_us": T.PROFILER_COST_PER_HOST_EVENT_US,
            "estimated_ms": round(est_ms, 3),
            "estimated_ms_range": [round(n * c / 1e3, 3) for c in T.PROFILER_COST_RANGE_US],
            "pct_of_window": round(pct, 2),
            "finalize_ms": coll.get("finalize_ms"),
            "source": "torch.profiler", "what": "ops and CUDA API calls",
            "basis": "recorded CPU ops and CUDA API calls in the window x the per-event cost of torch.profiler "
                     "measured on an H100 host (an estimate; the true cost depends on the host CPU)"}


def _cupti_cost(trace, window: Window, coll: dict) -> dict:
    """CUPTI: its cost is per GPU activity record (kernel, copy, memset), on the launching thread."""
    s = trace.spans
    m = np.isin(s.kind, [int(SpanKind.KERNEL), int(SpanKind.MEMCPY), int(SpanKind.MEMSET)]) & \
        (s.end_ns > window.start_ns) & (s.start_ns < window.end_ns)
    n = int(m.sum())
    est_ms = n * T.CUPTI_COST_PER_GPU_RECORD_US / 1e3
    pct = 100.0 * est_ms / window.dur_ms if window.dur_ms else 0.0
    return {"profiler_host_events": n, "cost_per_event_us": T.CUPTI_COST_PER_GPU_RECORD_US,
            "estimated_ms": round(est_ms, 3),
            "estimated_ms_range": [round(n * c / 1e3, 3) for c in T.CUPTI_COST_RANGE_US],
            "pct_of_window": round(pct, 2),
            "finalize_ms": coll.get("finalize_ms"),
            "source": "CUPTI", "what": "kernels, copies and memsets",
            "basis": "GPU activities CUPTI recorded in the window x the per-record cost of CUPTI tracing measured "
                     "on an H100 host (an estimate; the true cost depends on the host CPU and driver)"}
