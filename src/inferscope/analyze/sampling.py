"""How sure the sampled CPU classes are: samples in the window and their binomial error.

Live traces classify CPU time by sampling (collect/sampler.py): each CPU_SAMPLE run covers the
ticks that saw one class.  The number of samples behind the window's CPU classes is estimated as
(time covered by CPU_SAMPLE runs in the window, all threads) x (the sampler's achieved rate
outside imports, from the trace meta).  A class share p estimated from n samples has a standard
error of sqrt(p (1 - p) / n); the 95 % half-width is 1.96 times that (normal approximation, treating
ticks as independent - an estimate, labelled as such in the report).
"""
from __future__ import annotations

import math

import numpy as np

from ..trace.kinds import SpanKind
from .window import Window


def half_width_pts(p: float, n: float) -> float:
    """95 % half-width, in percentage points, of a share p estimated from n samples."""
    return 100.0 * 1.96 * math.sqrt(p * (1.0 - p) / n) if n > 0 else float("nan")


def thread_rates(coll: dict) -> list[dict]:
    """Per thread, the sampler's achieved rate outside imports (live meta ``cpu_sampling_threads``: ticks
    that saw the thread / the time they covered), with ``low``: below half the setting over >= 0.5 s."""
    setting = coll.get("cpu_sampling_hz")
    setting = setting if isinstance(setting, (int, float)) else None
    rows = []
    given = coll.get("cpu_sampling_threads")
    for r in given if isinstance(given, list) else []:
        try:
            hz, ms = r.get("hz"), float(r.get("steady_ms") or 0)
            hz = None if hz is None else float(hz)
            rows.append({"tid": int(r["tid"]), "name": str(r.get("name") or r["tid"]), "ticks": int(r.get("ticks") or 0),
                         "steady_ms": ms, "hz": hz,
                         "low": bool(hz is not None and setting and ms >= 500.0 and hz < 0.5 * float(setting))})
        except (TypeError, ValueError, KeyError, AttributeError):
            continue
    return rows


def cpu_sampling(trace, window: Window) -> dict | None:
    s = trace.spans
    m = s.kind == SpanKind.CPU_SAMPLE
    if not m.any():
        return None
    st = np.maximum(s.start_ns[m], window.start_ns)
    en = np.minimum(s.end_ns[m], window.end_ns)
    covered_ns = int(np.clip(en - st, 0, None).sum())
    coll = trace.meta.get("collection") or {}
    rate = coll.get("cpu_sampling_hz_steady") or coll.get("cpu_sampling_hz_achieved")
    out = {"sampled_ms": round(covered_ns / 1e6, 3), "rate_hz": rate, "samples_est": None,
           "ci95_pts_at_50pct": None, "ci95_pts_at_10pct": None, "threads": thread_rates(coll)}
    if rate:
        n = covered_ns / 1e9 * float(rate)
        out["samples_est"] = round(n, 1)
        if n >= 1:
            out["ci95_pts_at_50pct"] = round(half_width_pts(0.5, n), 2)
            out["ci95_pts_at_10pct"] = round(half_width_pts(0.1, n), 2)
    return out
