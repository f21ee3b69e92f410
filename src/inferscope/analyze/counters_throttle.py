"""GPU clock-event (throttle) reasons and SM clock drops per GPU, the ``counters.throttle`` rows.

Input: the ``gpu.clock_event_reasons`` and ``gpu.sm_clock_mhz`` counter tracks (live runs: collect/nvml.py), every kept
sample (a sample before the window holds into it).  Rules (exact):
- ``gpu.clock_event_reasons`` is a bitmask (NVML ``nvmlClocksEventReasons``): each sample holds until the next one
  (the last one for the median sample interval), clipped to the window; a reason's share is the held time with its
  bit set / the window;
- an SM clock drop is the held time with the SM clock below CLOCK_DROP_FRACTION x its max in the window.
"""
from __future__ import annotations

import numpy as np

from .. import thresholds as T
from .intervals import union

REASONS_METRIC = "gpu.clock_event_reasons"
# NVML clocks-event reason bits (nvml.h, nvmlClocksEventReason*; formerly ClocksThrottleReason*).
# 0x1 (GPU idle) and 0x2 (application clocks setting) and 0x100 (display clock setting) are not
# slowdowns of a busy GPU and are not counted as throttling.
THROTTLE_BITS = {
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
}
THROTTLE_MASK = sum(THROTTLE_BITS)


def _held_durations(ts: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Time each sample holds inside [lo, hi): until the next sample; the last for the median interval."""
    if len(ts) == 0:
        return np.zeros(0, np.int64)
    step = int(np.median(np.diff(ts))) if len(ts) > 1 else 0
    ends = np.concatenate((ts[1:], [ts[-1] + step]))
    return np.maximum(0, np.minimum(ends, hi) - np.maximum(ts, lo))


def gpu_throttle(per_track: dict, lo: int, hi: int, win_ns: int) -> list[dict]:
    """``per_track``: every sample (a sample before the window holds into it).  Per GPU: NVML clock-event reasons
    (share of the window with a slowdown bit set) and SM clock drops (share of the window with the SM clock below
    CLOCK_DROP_FRACTION x its max in the window)."""
    reasons_by_dev = {dev: (ts, v) for metric, dev, ts, v in per_track.values() if metric == REASONS_METRIC and len(ts)}
    clocks = {dev: (ts, v) for metric, dev, ts, v in per_track.values() if metric == "gpu.sm_clock_mhz" and len(ts)}
    out = []
    for dev in sorted(set(reasons_by_dev) | set(clocks)):
        row = {"device": dev, "samples": 0, "covered_pct": 0.0, "affected_pct": 0.0, "affected_samples": 0, "reasons": [],
               "sm_clock_mhz_throttled": None, "sm_clock_mhz_other": None, "sm_clock_mhz_max": None,
               "clock_drop_pct": None, "intervals": []}
        thr = None
        if dev in reasons_by_dev:
            ts, v = reasons_by_dev[dev]
            held = _held_durations(ts, lo, hi)
            used = held > 0
            ts, v, held = ts[used], v[used], held[used]
            bits = v.astype(np.int64)
            thr = (bits & THROTTLE_MASK) != 0
            reasons = []
            for bit, name in THROTTLE_BITS.items():
                on = (bits & bit) != 0
                if on.any():
                    reasons.append({"reason": name, "bit": bit, "samples": int(on.sum()),
                                    "window_pct": 100.0 * float(held[on].sum()) / win_ns})
            reasons.sort(key=lambda r: -r["window_pct"])
            row.update(samples=int(len(ts)), covered_pct=100.0 * float(held.sum()) / win_ns,
                       affected_pct=100.0 * float(held[thr].sum()) / win_ns, affected_samples=int(thr.sum()), reasons=reasons)
            if thr.any():
                us, ue = union(np.maximum(ts[thr], lo), np.maximum(ts[thr], lo) + held[thr])
                row["intervals"] = [[int(a), int(b)] for a, b in zip(us[:200].tolist(), ue[:200].tolist())]
        if dev in clocks:
            cts, cv = clocks[dev]
            held_c = _held_durations(cts, lo, hi)
            used = held_c > 0
            cts, cv, held_c = cts[used], cv[used], held_c[used]
        if dev in clocks and len(cts):
            cmax = float(cv.max())
            row["sm_clock_mhz_max"] = cmax
            if cmax > 0:
                row["clock_drop_pct"] = 100.0 * float(held_c[cv < T.CLOCK_DROP_FRACTION * cmax].sum()) / win_ns
            if thr is not None and thr.any():
                # the reason sample in force at each clock sample (the last one at or before it)
                k = np.searchsorted(ts, cts, side="right") - 1
                th = np.zeros(len(cts), bool)
                th[k >= 0] = thr[k[k >= 0]]
                if th.any():
                    row["sm_clock_mhz_throttled"] = float(cv[th].mean())
                if (~th).any():
                    row["sm_clock_mhz_other"] = float(cv[~th].mean())
        out.append(row)
    return out
