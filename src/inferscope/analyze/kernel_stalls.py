"""Warp stall reasons of a profiled kernel (Nsight Compute WarpStateStats / SourceCounters; used by kernel_limits).

Per launch (``ingest/ncu.py`` ``la["stalls"]``: one metric family, ``ncu_metrics.STALL_FAMILIES``), each
reason's share = its value / the sum over every state, ``selected`` included: the share of the warp cycles
between two issued instructions (ncu's CPIStall rules word it the same way: "represents about X % of the
total average of Y cycles between issuing two instructions").  ``selected`` (the warp issued) is not a stall
and is never listed.  Per kernel: the duration-weighted mean share over its launches that have stall
metrics; the reasons at >= ``KERNEL_STALL_MIN_SHARE_PCT``, largest first, at most ``STALLS_SHOWN``.
"""
from __future__ import annotations

import numpy as np

from ..wording import stall_text  # noqa: F401  (diagnosis_gpu_efficiency, kernel_limits import it from here)

from .. import thresholds as T

STALLS_SHOWN = 3
# what each state means (Nsight Compute Profiling Guide, "Warp Stall Reasons"), shortened
MEANING = {
    "long_scoreboard": "memory dependency: waiting on L1TEX global/local/texture data",
    "short_scoreboard": "MIO dependency: shared memory or special-math results",
    "wait": "fixed-latency dependency between instructions",
    "barrier": "waiting at a block barrier, __syncthreads",
    "membar": "waiting on a memory barrier",
    "math_pipe_throttle": "math pipe busy: compute-bound on that pipe",
    "mio_throttle": "MIO queue full: shared memory, special math, dynamic branches",
    "lg_throttle": "local/global memory queue full",
    "tex_throttle": "texture unit queue full",
    "branch_resolving": "waiting for a branch target",
    "no_instruction": "instruction cache miss or no instruction fetched",
    "no_instructions": "instruction cache miss or no instruction fetched",
    "imc_miss": "immediate constant cache miss",
    "dispatch_stall": "dispatcher stall",
    "drain": "draining memory stores at exit",
    "not_selected": "eligible, another warp issued: enough parallelism",
    "sleeping": "warp sleeping: nanosleep or yield",
    "misc": "miscellaneous hardware reason",
    "tensor": "waiting on the tensor pipe",
    "gmma": "waiting on warpgroup MMA, Tensor Cores",
}


def kernel_stalls(las: list[dict], w: np.ndarray) -> tuple[list[dict], str | None]:
    """([{reason, share_pct, meaning}], basis) for one kernel's launches, ``w`` their durations (weights)."""
    shares, ws, basis = [], [], None
    for la, wi in zip(las, w.tolist()):
        st = la.get("stalls") or {}
        tot = float(sum(st.values()))
        if tot <= 0:
            continue
        shares.append({r: 100.0 * v / tot for r, v in st.items()})
        ws.append(wi)
        basis = basis or la.get("stall_basis")
    if not shares:
        return [], None
    wa = np.array(ws, dtype=np.float64)
    if wa.sum() <= 0:
        wa = np.ones(len(ws))
    reasons = sorted({r for s in shares for r in s} - {"selected"})
    mean = {r: float(np.dot([s.get(r, 0.0) for s in shares], wa) / wa.sum()) for r in reasons}
    top = sorted((r for r in reasons if mean[r] >= T.KERNEL_STALL_MIN_SHARE_PCT), key=lambda r: (-mean[r], r))
    return [{"reason": r, "share_pct": round(mean[r], 2), "meaning": MEANING.get(r, "")} for r in top[:STALLS_SHOWN]], basis
