"""Vectorised grouped statistics (sum, count, mean, percentiles) over int64 durations."""
from __future__ import annotations

import numpy as np


def fast_unique(x: np.ndarray, return_inverse: bool = False, return_counts: bool = False):
    """np.unique by sort + dedup.  numpy >= 2.3 routes np.unique through a hash table that is
    several times slower than sorting on millions of int64 values (measured: 6.5 s vs 0.3 s
    for 4M timestamps on this machine)."""
    x = np.asarray(x)
    if x.dtype.kind in "iu" and len(x) >= 1024:
        # small-range integer codes (string ids, kinds): one counting pass instead of a sort
        # (the same sorted distinct values, inverse and counts)
        mn, mx = int(x.min()), int(x.max())
        if mx - mn <= 2 * len(x) + 65536:
            if mn:
                off = x.astype(np.int64)
                off -= mn
            else:
                off = x
            cnt = np.bincount(off, minlength=mx - mn + 1)
            present = cnt > 0
            uk = (np.flatnonzero(present) + mn).astype(x.dtype)
            if not return_inverse and not return_counts:
                return uk
            out = [uk]
            if return_inverse:
                out.append((np.cumsum(present) - 1)[off].astype(np.int64, copy=False))
            if return_counts:
                out.append(cnt[present].astype(np.int64, copy=False))
            return tuple(out)
    if not return_inverse and not return_counts:
        if len(x) == 0:
            return x.copy()
        b = np.sort(x, kind="stable")
        keep = np.empty(len(b), dtype=bool)
        keep[0] = True
        np.not_equal(b[1:], b[:-1], out=keep[1:])
        return b[keep]
    o = np.argsort(x, kind="stable")
    b = x[o]
    keep = np.empty(len(b), dtype=bool)
    if len(b):
        keep[0] = True
        np.not_equal(b[1:], b[:-1], out=keep[1:])
    uk = b[keep]
    del b
    out = [uk]
    if return_inverse:
        inv = np.empty(len(x), dtype=np.int64)
        c = np.cumsum(keep)
        c -= 1
        inv[o] = c
        del c
        out.append(inv)
    if return_counts:
        idx = np.flatnonzero(keep)
        out.append(np.diff(np.append(idx, len(x))))
    return tuple(out)


def grouped_stats(keys: np.ndarray, values: np.ndarray, percentiles=(50, 90)) -> dict[str, np.ndarray]:
    """Per distinct key: count, sum, mean, min, max and linear-interpolated percentiles."""
    if len(keys) == 0:
        z = np.zeros(0)
        return {"key": np.zeros(0, dtype=keys.dtype), "count": z.astype(np.int64), "sum": z, "mean": z,
                "min": z, "max": z, **{f"p{p}": z for p in percentiles}}
    uk, inv = fast_unique(keys, return_inverse=True)
    vmin = int(values.min())
    span = int(values.max()) - vmin + 1
    if span * len(uk) < 2**62 and values.dtype.kind in "iu":
        # one combined int64 key, sorted (not argsorted: ~3x faster again, issue 26); group and value
        # come back from it, the same arrays as values[o] and inv[o] of any order sorting the key
        # (in place: c >= 0, so c // span is the group and c % span the value - vmin)
        c = inv.astype(np.int64, copy=False) * span
        del inv
        c += values.astype(np.int64, copy=False)
        c -= vmin
        c.sort()
        g = c // span
        np.remainder(c, span, out=c)
        c += vmin
        v = c.astype(np.float64)
        del c
    else:
        if span * len(uk) < 2**62:   # one combined int64 key sorts ~3x faster than lexsort
            o = np.argsort(inv.astype(np.int64) * span + (values.astype(np.int64) - vmin))
        else:
            o = np.lexsort((values, inv))
        v = values[o].astype(np.float64)
        g = inv[o]
    count = np.bincount(g, minlength=len(uk))
    starts = np.concatenate(([0], np.cumsum(count)[:-1]))
    sums = np.bincount(g, weights=v, minlength=len(uk))
    out = {"key": uk, "count": count.astype(np.int64), "sum": sums, "mean": sums / count,
           "min": v[starts], "max": v[starts + count - 1]}
    for p in percentiles:
        pos = (count - 1) * (p / 100.0)
        lo = np.floor(pos).astype(np.int64)
        hi = np.minimum(lo + 1, count - 1)
        frac = pos - lo
        out[f"p{p}"] = v[starts + lo] * (1 - frac) + v[starts + hi] * frac
    return out


def percentile(values: np.ndarray, p: float) -> float:
    if len(values) == 0:
        return 0.0
    return float(np.percentile(values.astype(np.float64), p))
