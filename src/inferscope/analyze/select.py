"""The one window API of analyze/ (and fleet/, compare/): which intervals a window holds, and how
they are cut to it; plus small grouped sums.

A window is a ``window.Window`` (never a dict) or None (the whole trace).  It is the half-open
[start_ns, end_ns); an interval is [start, end).  The rules (numpy boolean masks, int64 ns):

- ``overlap(starts, ends, w)``:  start < w.end_ns and end > w.start_ns   (some of it inside; a zero-length
  interval counts when start_ns < t < end_ns, not at t == start_ns)
- ``starts_inside(starts, w)``:  w.start_ns <= start < w.end_ns          (``include_end=True``: also start ==
  w.end_ns, the closed window kept by the counter/serving readings that always used it)
- ``inside(starts, ends, w)``:   start >= w.start_ns and end <= w.end_ns  (all of it inside; a zero-length
  interval at t counts for start_ns <= t <= end_ns)
- ``clip(starts, ends, w)``:     (max(start, w.start_ns), min(end, w.end_ns)), the end never before the start

``in_window`` (indices of spans of a mask: the closed-edge rule kernels, per_pid, nvtx_attribution,
nsys_extras, copies, culprits, ... share) and ``clipped_durations`` are the section-level forms.
No module of analyze/ writes its own window comparison (tests/test_window_api.py scans for one).
"""
from __future__ import annotations

import numpy as np

from ..trace.model import Trace
from .stats import fast_unique
from .window import Window

I64_MIN, I64_MAX = np.iinfo(np.int64).min, np.iinfo(np.int64).max


def window_bounds(window: Window | None) -> tuple[int, int]:
    """(start_ns, end_ns) of a Window; None: the whole int64 range.  Anything else is a TypeError
    (a dict or a look-alike once silently meant "whole trace")."""
    if window is None:
        return I64_MIN, I64_MAX
    if not isinstance(window, Window):
        raise TypeError(f"window must be a Window or None, not {type(window).__name__}")
    return int(window.start_ns), int(window.end_ns)


def overlap(starts: np.ndarray, ends: np.ndarray, w: Window | None) -> np.ndarray:
    """Mask: the interval [start, end) has a part inside [w.start_ns, w.end_ns)."""
    lo, hi = window_bounds(w)
    return (np.asarray(starts) < hi) & (np.asarray(ends) > lo)


def starts_inside(starts: np.ndarray, w: Window | None, *, include_end: bool = False) -> np.ndarray:
    """Mask: w.start_ns <= start < w.end_ns (<= w.end_ns with include_end)."""
    lo, hi = window_bounds(w)
    st = np.asarray(starts)
    return (st >= lo) & ((st <= hi) if include_end else (st < hi))


def inside(starts: np.ndarray, ends: np.ndarray, w: Window | None) -> np.ndarray:
    """Mask: the whole interval lies in the window (start >= w.start_ns and end <= w.end_ns)."""
    lo, hi = window_bounds(w)
    return (np.asarray(starts) >= lo) & (np.asarray(ends) <= hi)


def clip(starts: np.ndarray, ends: np.ndarray, w: Window | None) -> tuple[np.ndarray, np.ndarray]:
    """The intervals cut to the window, same length and order: (max(start, lo), min(end, hi)), an
    interval outside the window left empty (end == start).  ``intervals.clip`` drops the empty ones."""
    lo, hi = window_bounds(w)
    st = np.maximum(starts, lo)
    en = np.minimum(ends, hi)
    return st, np.maximum(en, st, out=en)


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


