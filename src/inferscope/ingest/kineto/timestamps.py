"""Kineto timestamps -> exact int64 ns.

Timestamps (``ts``/``dur``, float microseconds with up to ns resolution) become int64 ns
without rounding artefacts:
  * fast path, ``max|ts| < 2**41`` us: ``floor(ts)*1000 + rint(frac*1000)`` is exact;
  * epoch-microsecond clocks (``ts`` ~ 1.7e15) cannot hold the ns digit in a float64
    (ulp 0.25 us).  When every decoded ts is integral and the text has no fractional
    ``"ts"``, the floats are exact integers.  Otherwise the exact decimal text of every
    ``"ts"`` is recovered with one regex pass over the raw bytes, verified against the
    decoded floats (same count, same values within 1 us); if verification fails (e.g. a
    ``"ts"`` key inside ``args``), the bytes are decoded again with ``ts`` as raw JSON text
    and parsed exactly per event (slow but exact).
  * ``end = start + rint(dur*1000)`` (dur is small: float is exact to the ns); negative or
    missing durations become 0.
"""
from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation, ROUND_HALF_EVEN

import numpy as np

from .decode import _Fallback, decode_events

_TS_RE = re.compile(rb'"ts"\s*:\s*(-?\d+)(?:\.(\d*))?(?:[eE]([-+]?\d+))?')
_FAST_TS_LIMIT = float(2 ** 41)
_TS_MAX_US = 4.0e15
_DUR_MAX_US = 1.0e12


def _ts_exact_ns_from_text(ip: list, fp: list, ex: list) -> np.ndarray:
    """Exact ns from the decimal text parts (integer, fraction, exponent)."""
    n = len(ip)
    if not any(ex):
        ipa = np.array(ip, dtype=np.int64) if n else np.zeros(0, np.int64)
        neg = np.array(ip, dtype="S1") == b"-" if n else np.zeros(0, bool)
        d = np.array(fp, dtype="S4").view(np.uint8).reshape(n, 4).astype(np.int64) if n else np.zeros((0, 4), np.int64)
        d = np.where(d == 0, 0, d - 48)  # NUL padding -> 0
        frac3 = d[:, 0] * 100 + d[:, 1] * 10 + d[:, 2] + (d[:, 3] >= 5)  # half-up on the 4th digit
        frac3 = np.where(neg, -frac3, frac3)
        return ipa * 1000 + frac3
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        s = ip[i] + (b"." + fp[i] if fp[i] else b"") + (b"e" + ex[i] if ex[i] else b"")
        out[i] = int((Decimal(s.decode()) * 1000).to_integral_value(ROUND_HALF_EVEN))
    return out


def _raw_ts_ns(raws: list) -> np.ndarray:
    """Slow exact path: ts decoded as raw JSON text per event."""
    out = np.empty(len(raws), dtype=np.int64)
    ok = np.ones(len(raws), dtype=bool)
    for i, r in enumerate(raws):
        try:
            out[i] = int((Decimal(r.decode()) * 1000).to_integral_value(ROUND_HALF_EVEN))
        except (InvalidOperation, ValueError, TypeError, OverflowError):
            out[i] = 0
            ok[i] = False
    return out, ok


def _us_to_ns_fast(x: np.ndarray) -> np.ndarray:
    ip = np.floor(x)
    return ip.astype(np.int64) * 1000 + np.rint((x - ip) * 1000.0).astype(np.int64)


def _ts_from_text(data, tv: np.ndarray):
    """Exact ns of every ``"ts"`` in the text, when their count and values match the decoded
    floats ``tv`` (same count, within 1 us); None otherwise."""
    m = _TS_RE.findall(data)
    if len(m) != len(tv):
        return None
    ip = [x[0] for x in m]
    fp = [x[1] for x in m]
    ex = [x[2] for x in m]
    del m
    try:
        if not any(fp) and not any(ex):  # integer text: no per-event work
            exact = np.array(ip, dtype=np.int64) * 1000
        else:
            exact = _ts_exact_ns_from_text(ip, fp, ex)
        if np.all(np.abs(exact / 1000.0 - tv) <= np.maximum(1.0, np.abs(tv) * 1e-12)):
            return exact
    except (ValueError, OverflowError):
        pass
    return None


def _timestamps_ns(data: bytes | None, ts_f: np.ndarray, has_ts: np.ndarray,
                   warnings: list, cols=None) -> np.ndarray:
    ts_ns = np.zeros(len(ts_f), dtype=np.int64)
    if not has_ts.any():
        return ts_ns
    tv = ts_f[has_ts]
    if not np.isfinite(tv).all():
        bad = ~np.isfinite(ts_f) & has_ts
        warnings.append(f"{int(bad.sum())} event(s) with non-finite ts set to 0")
        tv = np.where(np.isfinite(tv), tv, 0.0)
        ts_f = np.where(np.isfinite(ts_f), ts_f, 0.0)
    amax = float(np.abs(tv).max())
    if amax < _FAST_TS_LIMIT:
        ts_ns[has_ts] = _us_to_ns_fast(tv)
        return ts_ns
    if data is None:  # streamed: the text of each batch was read there (or the whole decode redoes it)
        if cols is None or not cols.exact_ok():
            raise _Fallback
        ts_ns[has_ts] = cols.pop("ts_x")
        return ts_ns
    # exact decimal recovery from the raw text (one regex pass), verified below
    exact = _ts_from_text(data, tv)
    if exact is not None:
        ts_ns[has_ts] = exact
        return ts_ns
    # slow exact fallback: re-decode with ts as raw JSON text
    _top, ev2, _w = decode_events(data, "trace", raw_ts=True)
    raws = [bytes(e.ts) for e in ev2]
    if len(raws) == len(ts_f):
        sel = [r for r in raws if r and r != b"null"]
        exact, ok = _raw_ts_ns(sel)
        if len(exact) == int(has_ts.sum()) and ok.all():
            ts_ns[has_ts] = exact
            return ts_ns
    warnings.append("timestamps rounded to float64 precision (exact decimal recovery failed)")
    ts_ns[has_ts] = np.rint(tv * 1000.0).astype(np.int64)
    return ts_ns
