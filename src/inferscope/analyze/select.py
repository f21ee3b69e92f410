"""Span selection by window and small grouped sums, shared by kernels, per_pid, nvtx_attribution
and nsys_extras so they select the same spans and time them the same way."""
from __future__ import annotations

import numpy as np

from ..trace.model import Trace
from .stats import fast_unique

I64_MIN, I64_MAX = np.iinfo(np.int64).min, np.iinfo(np.int64).max


def window_bounds(window) -> tuple[int, int]:
    if window is None:
        return I64_MIN, I64_MAX
    lo = getattr(window, "start_ns", None)
    hi = getattr(window, "end_ns", None)
    return (I64_MIN if lo is None else int(lo)), (I64_MAX if hi is None else int(hi))


def clipped_durations(trace: Trace, idx: np.ndarray, window) -> np.ndarray:
    """Duration (ns) of spans idx inside the window (0 when outside)."""
    lo, hi = window_bounds(window)
    s = trace.spans
    st = np.maximum(s.start_ns[idx], lo)
    en = np.minimum(s.end_ns[idx], hi)
    return np.maximum(en - st, 0)


def in_window(trace: Trace, mask: np.ndarray, window) -> np.ndarray:
    """Indices of spans in mask that overlap the window (marks: start inside)."""
    lo, hi = window_bounds(window)
    s = trace.spans
    idx = np.flatnonzero(mask)
    st, en = s.start_ns[idx], s.end_ns[idx]
    keep = (st <= hi) & (en >= lo) & ((en > lo) | (st >= lo))
    return idx[keep]


def pct_stats_us(d_ns: np.ndarray) -> tuple[float, float, float, float]:
    """(avg, p50, p90, max) in us."""
    if len(d_ns) == 0:
        return (0.0, 0.0, 0.0, 0.0)
    d = d_ns.astype(np.float64) / 1e3
    p50, p90 = np.percentile(d, [50, 90])
    return (float(d.mean()), float(p50), float(p90), float(d.max()))


def group_sum(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(unique keys, sums, counts)."""
    if len(keys) == 0:
        return keys, values[:0], np.zeros(0, dtype=np.int64)
    uk, inv = fast_unique(keys, return_inverse=True)
    sums = np.bincount(inv, weights=values.astype(np.float64), minlength=len(uk))
    cnt = np.bincount(inv, minlength=len(uk))
    return uk, sums, cnt


