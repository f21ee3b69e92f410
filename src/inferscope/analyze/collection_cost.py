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
from ..trace.model import codes_in
from .select import overlap
from .window import Window


# source -> (span kinds whose recording costs the program, cost per event (us), measured range (us),
# what they are, the basis sentence); numbers in thresholds.py
_SOURCES = {
    "torch.profiler": ((SpanKind.CPU_OP, SpanKind.RUNTIME, SpanKind.DRIVER), T.PROFILER_COST_PER_HOST_EVENT_US,
                       T.PROFILER_COST_RANGE_US, "ops and CUDA API calls",
                       "recorded CPU ops and CUDA API calls in the window x the per-event cost of torch.profiler "
                       "measured on an H100 host (an estimate; the true cost depends on the host CPU)"),
    "CUPTI": ((SpanKind.KERNEL, SpanKind.MEMCPY, SpanKind.MEMSET), T.CUPTI_COST_PER_GPU_RECORD_US,
              T.CUPTI_COST_RANGE_US, "kernels, copies and memsets",
              "GPU activities CUPTI recorded in the window x the per-record cost of CUPTI tracing measured "
              "on H100 and H200 hosts (an estimate; the true cost depends on the host CPU and driver)"),
}


def collection_cost(trace, window: Window) -> dict | None:
    coll = trace.meta.get("collection") or {}
    if trace.meta.get("source_format") != "inferscope":
        return None
    if coll.get("gpu_source") == "cupti":
        src = "CUPTI"          # its cost is per GPU activity record, on the launching thread
    elif coll.get("torch_profiler") == "on":
        src = "torch.profiler"  # per recorded host event (op or API call)
    else:
        return None
    kinds, per_us, rng, what, basis = _SOURCES[src]
    s = trace.spans
    m = codes_in(s.kind, [int(k) for k in kinds]) & overlap(s.start_ns, s.end_ns, window)
    n = int(m.sum())
    est_ms = n * per_us / 1e3
    pct = 100.0 * est_ms / window.dur_ms if window.dur_ms else 0.0
    return {"profiler_host_events": n, "cost_per_event_us": per_us, "estimated_ms": round(est_ms, 3),
            "estimated_ms_range": [round(n * c / 1e3, 3) for c in rng], "pct_of_window": round(pct, 2),
            "finalize_ms": coll.get("finalize_ms"), "source": src, "what": what, "basis": basis}
