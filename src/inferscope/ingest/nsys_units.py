"""Are an Nsight Systems export's timestamps nanoseconds? (seed 004: a unit sanity check.)

nsys writes every ``start`` / ``end`` as integer ns since the session start.  A file that was rewritten
or produced by another tool in another unit reads as a run 1000x too long or too short, and every number
of the report with it.  Two signs, each one warning line naming what looked wrong (never an error: the
trace is still analysed as ns):
  * the extent of the events (or ``ANALYSIS_DETAILS.duration``) is longer than
    ``thresholds.NSYS_MAX_SESSION_NS`` (ps- or fs-scaled timestamps: an hour reads as 42 days);
  * the median GPU kernel is shorter than ``thresholds.NSYS_MIN_MEDIAN_KERNEL_NS`` (us-scaled timestamps:
    a 10 us kernel reads as 10 ns; CUPTI never records a kernel much under 1 us).
"""
from __future__ import annotations

import numpy as np

from .. import thresholds as T
from ..trace.kinds import SpanKind


def unit_warnings(all_parts: list[dict], session: dict | None) -> list[str]:
    """One warning line (or none) naming what did not look like ns; ``all_parts``: the importer's span parts
    (``start_ns`` / ``end_ns`` arrays, ``kind`` a SpanKind for GPU parts), ``session`` from ANALYSIS_DETAILS."""
    why = []
    day = 86_400e9
    parts = [p for p in all_parts if len(p["start_ns"])]
    if parts:
        lo = min(int(p["start_ns"].min()) for p in parts)
        hi = max(int(p["end_ns"].max()) for p in parts)
        if hi - lo > T.NSYS_MAX_SESSION_NS:
            why.append(f"the events span {hi - lo:,} ns ({(hi - lo) / day:,.1f} days)")
    if session and session.get("duration_ns", 0) > T.NSYS_MAX_SESSION_NS:
        d = session["duration_ns"]
        why.append(f"ANALYSIS_DETAILS.duration is {d:,} ns ({d / day:,.1f} days)")
    if why:
        why[-1] += f", more than the {T.NSYS_MAX_SESSION_NS / day:g} day a capture plausibly lasts"
    kern = [p["end_ns"] - p["start_ns"] for p in parts if isinstance(p.get("kind"), SpanKind) and p["kind"] == SpanKind.KERNEL]
    if kern:
        dur = np.concatenate(kern)
        med = float(np.median(dur))
        if med < T.NSYS_MIN_MEDIAN_KERNEL_NS:
            why.append(f"the median of {len(dur):,} GPU kernels lasts {med:g} ns (longest {int(dur.max()):,} ns; "
                       f"CUPTI records no kernel much under 1 us)")
    if not why:
        return []
    return ["nsys timestamps may not be nanoseconds: " + "; ".join(why) +
            ": every time in this report may be off by a factor of 1000 or more"]
