"""Vectorised interval arithmetic on int64 nanosecond arrays (half-open [start, end))."""
from __future__ import annotations

import numpy as np

I64 = np.int64


def clip(starts: np.ndarray, ends: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """Clip intervals to [lo, hi); drop the ones that end up empty."""
    s = np.maximum(starts, lo)
    e = np.minimum(ends, hi)
    keep = e > s
    if keep.all():      # s and e are new arrays already: no second copy
        return s, e
    return s[keep], e[keep]


def union(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merge overlapping/touching intervals into sorted disjoint ones."""
    if len(starts) == 0:
        return np.zeros(0, I64), np.zeros(0, I64)
    if len(starts) > 1 and not bool(np.all(starts[1:] >= starts[:-1])):
        o = np.argsort(starts, kind="stable")
        s = starts[o]
        e = ends[o]
    else:  # spans come start-sorted from the Trace: skip the sort
        s = starts
        e = ends
    run_end = np.maximum.accumulate(e)
    # a new block starts where start > max end so far of all previous intervals
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > run_end[:-1]
    idx = np.flatnonzero(new)
    us = s[idx]
    ue = np.empty(len(idx), dtype=I64)
    ue[:-1] = run_end[idx[1:] - 1]
    ue[-1] = run_end[-1]
    return us, ue


def total(starts: np.ndarray, ends: np.ndarray) -> int:
    """Length of the union of intervals."""
    us, ue = union(starts, ends)
    return int((ue - us).sum())


def active_at(starts: np.ndarray, ends: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Number of intervals covering each point t (start <= t < end)."""
    if len(starts) == 0:
        return np.zeros(len(points), dtype=I64)
    ss = np.sort(starts)
    es = np.sort(ends)
    return np.searchsorted(ss, points, side="right") - np.searchsorted(es, points, side="right")


def active_at_sorted(starts: np.ndarray, ends: np.ndarray, points: np.ndarray) -> np.ndarray:
    """active_at for ascending ``points``: bins the intervals into the points instead of
    searching every point (O(k log n + n) for k intervals, n points; cache friendly)."""
    n = len(points)
    if len(starts) == 0 or n == 0:
        return np.zeros(n, dtype=I64)
    # interval counts at point p if start <= p  <=> first point index >= start
    ps = np.searchsorted(points, starts, side="left")
    pe = np.searchsorted(points, ends, side="left")
    d = np.bincount(ps, minlength=n + 1)[: n + 1].astype(I64) - np.bincount(pe, minlength=n + 1)[: n + 1]
    return np.cumsum(d[:n])


def coverage_on_bounds(us: np.ndarray, ue: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Boolean per elementary segment [bounds[i], bounds[i+1]): inside the disjoint union (us, ue)?

    Every union edge must be one of ``bounds`` (true when bounds were built from these edges).
    Uses int8 marks + cumsum instead of per-segment searches: O(n) time, 1 byte per segment.
    """
    n = len(bounds) - 1
    if n <= 0 or len(us) == 0:
        return np.zeros(max(n, 0), dtype=bool)
    d = np.zeros(n + 1, dtype=np.int8)
    d[np.searchsorted(bounds, us)] = 1
    d[np.searchsorted(bounds, ue)] = -1   # union blocks never touch, so no position gets both
    return np.cumsum(d[:n], dtype=np.int8).astype(bool)


def gaps(us: np.ndarray, ue: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    """Complement of a disjoint sorted union inside [lo, hi)."""
    gs = np.concatenate(([lo], ue))
    ge = np.concatenate((us, [hi]))
    return clip(gs, ge, lo, hi)


def overlap_with_union(starts: np.ndarray, ends: np.ndarray, us: np.ndarray, ue: np.ndarray) -> np.ndarray:
    """For each interval, the length covered by a disjoint sorted union (us, ue)."""
    if len(us) == 0 or len(starts) == 0:
        return np.zeros(len(starts), dtype=I64)
    cum = np.concatenate(([0], np.cumsum(ue - us)))

    def covered_until(t):
        # total union length in (-inf, t)
        i = np.searchsorted(us, t, side="right")  # blocks starting at or before t
        part = np.zeros(len(t), dtype=I64)
        has = i > 0
        j = i[has] - 1
        part[has] = cum[j] + np.clip(t[has] - us[j], 0, ue[j] - us[j])
        return part

    return covered_until(ends) - covered_until(starts)


def summed_until(starts: np.ndarray, ends: np.ndarray, x: np.ndarray) -> np.ndarray:
    """For each point x: the summed length of the (possibly overlapping) intervals before it,
    sum_i clip(x - start_i, 0, end_i - start_i).  Differences over bin edges give each bin's summed
    coverage (two threads in one bin count twice).  Pass times relative to a nearby origin: the sums
    are int64 products of counts and offsets."""
    x = np.asarray(x, dtype=I64)
    if len(starts) == 0:
        return np.zeros(len(x), dtype=I64)
    s, e = np.sort(np.asarray(starts, dtype=I64)), np.sort(np.asarray(ends, dtype=I64))
    cs = np.concatenate(([0], np.cumsum(s)))
    ce = np.concatenate(([0], np.cumsum(e)))
    ks = np.searchsorted(s, x, side="left")
    ke = np.searchsorted(e, x, side="left")
    return (ks * x - cs[ks]) - (ke * x - ce[ke])
