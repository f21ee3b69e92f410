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
    en -= st            # in place: two span-length arrays alive, not four
    del st
    return np.maximum(en, 0, out=en)


def in_window(trace: Trace, mask: np.ndarray, window) -> np.ndarray:
    """Indices of spans in mask that overlap the window (marks: start inside)."""
    lo, hi = window_bounds(window)
    s = trace.spans
    if not _start_sorted(trace):
        idx = np.flatnonzero(mask)
        st, en = s.start_ns[idx], s.end_ns[idx]
        keep = (st <= hi) & (en >= lo) & ((en > lo) | (st >= lo))
        return idx[keep]
    # spans sorted by start (as the builder leaves them): the ones starting after hi are a suffix, and of
    # the rest only those starting before lo need their end checked (start >= lo: end >= start >= lo)
    idx = np.flatnonzero(mask[:int(np.searchsorted(s.start_ns, hi, side="right"))])
    k = int(np.searchsorted(idx, np.searchsorted(s.start_ns, lo, side="left")))
    if k == 0:
        return idx
    head = idx[:k]
    return np.concatenate((head[s.end_ns[head] > lo], idx[k:]))


def _start_sorted(trace: Trace) -> bool:
    """Are the spans in ascending start order?  Checked once per trace (a Trace is not changed once built)."""
    c = trace.__dict__.setdefault("_mask_cache", {})
    v = c.get("start_sorted")
    st = trace.spans.start_ns
    if v is None or v[1] != len(st):
        v = c["start_sorted"] = (bool(len(st) < 2 or (st[1:] >= st[:-1]).all()), len(st))
    return v[0]


def pct_stats_us(d_ns: np.ndarray) -> tuple[float, float, float, float]:
    """(avg, p50, p90, max) in us."""
    if len(d_ns) == 0:
        return (0.0, 0.0, 0.0, 0.0)
    d = d_ns.astype(np.float64)
    d /= 1e3
    avg, mx = float(d.mean()), float(d.max())
    p50, p90 = np.percentile(d, [50, 90], overwrite_input=True)     # d is ours: partitioned in place
    return (avg, float(p50), float(p90), mx)


def group_sum(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(unique keys, sums, counts)."""
    if len(keys) == 0:
        return keys, values[:0], np.zeros(0, dtype=np.int64)
    uk, inv = fast_unique(keys, return_inverse=True)
    sums = np.bincount(inv, weights=values.astype(np.float64), minlength=len(uk))
    cnt = np.bincount(inv, minlength=len(uk))
    return uk, sums, cnt


