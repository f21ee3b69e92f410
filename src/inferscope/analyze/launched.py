"""GPU time credited to host calls and host ranges through their launches: the one place that joins GPU
work to its launching host call (LAUNCH flows, ``links.launchers_for``) and measures it.

Two durations per GPU span, named apart:
  * ``whole_ns``   - the span's full duration (end - start), also where it runs past the window's edge;
  * ``clipped_ns`` - its overlap with the window [start_ns, end_ns) (0 outside it).

Which report fields use which:
  * whole, GPU spans STARTING in the window (``select="starts"``: a span counts once, in the window it
    starts in): ``phases`` steps/ranges/phases ``gpu_ms`` and ``gpu_attribution_coverage_pct``,
    ``llm.steps[].gpu_ms`` (and the per-kind sums, ``gpu_span_ms`` from the same spans),
    ``efficiency.kernel_ms`` / ``gemm_kernel_ms`` / ``tables.efficiency_by_op`` ``kernel_ms``,
    ``tables.module_hotspots`` ``gpu_ms`` / ``self_gpu_ms`` / ``pct_of_gpu``; fleet's per-step collectives
    (cross_rank_comm) take their spans from the same selection;
  * clipped, GPU spans OVERLAPPING the window (``select="overlaps"``, ``select.in_window``):
    ``culprits.ops[].device_ms`` (``tables.top_ops``), ``nvtx.attribution`` ``kernel_sum_ms`` /
    ``attributed_ms`` and the nvtx range/phase kernel times, ``per_pid`` kernel times, ``copies`` ``ms``
    (and ``pageable.by_api``; its ``bandwidth_gbps`` divides bytes by the whole durations);
  * whole, GPU spans LAUNCHED BY a host call in the window (``select="launcher_in"``): nsys_extras'
    ``launch_latency.linked_kernel_sum_ms`` / ``tables.launch_latency`` ``kernel_total_ms`` and
    ``memory_ops.pageable_async_ms`` / ``tables.memory_ops_by_api`` ``gpu_time_ms``.
Owners: a host span credited through the innermost marked ancestor of the launching call (``by_owner``
with the caller's owner per GPU span; nvtx/per_pid/copies/nsys_extras group by name or pid), or a host time range credited with the work whose launching call
starts inside it (``in_ranges``: on the range's thread, or any thread).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..trace.model import Trace
from .classify import gpu_work_mask
from .links import launchers_for
from .select import in_window, starts_inside, window_bounds
from .window import Window


class LaunchedGpu(NamedTuple):
    gpu: np.ndarray          # GPU span indices (ascending)
    launcher: np.ndarray     # the host call that launched each (-1: no launch flow)
    whole_ns: np.ndarray     # each GPU span's full duration (int64)
    clipped_ns: np.ndarray   # its overlap with the window (int64, 0 outside)


def launched_gpu(trace: Trace, window: Window | None, *, mask: np.ndarray | None = None,
                 select: str = "starts", launcher_mask: np.ndarray | None = None) -> LaunchedGpu:
    """The GPU spans of ``mask`` (default: all GPU work - kernels, copies, memsets, graph launches) that
    start in the window (``select="starts"``), overlap it (``"overlaps"``), or were launched by a host call
    marked in ``launcher_mask`` (``"launcher_in"``: nsys_extras, the API calls in the window), with their
    launching call and both durations.  Window None: the whole trace."""
    s = trace.spans
    m = gpu_work_mask(trace) if mask is None else mask
    if select == "starts":
        gi = np.flatnonzero(m & starts_inside(s.start_ns, window))
    elif select == "overlaps":
        gi = in_window(trace, m, window)
    elif select == "launcher_in" and launcher_mask is not None:
        gi = np.flatnonzero(m)
        lau = launchers_for(trace, gi)
        ok = lau >= 0
        ok[ok] = launcher_mask[lau[ok]]
        gi, lau = gi[ok], lau[ok]
    else:
        raise ValueError(f"select must be 'starts', 'overlaps' or 'launcher_in' (with launcher_mask), not {select!r}")
    st, en = s.start_ns[gi].astype(np.int64), s.end_ns[gi].astype(np.int64)
    whole = en - st
    lo, hi = window_bounds(window)
    clipped = np.maximum(np.minimum(en, hi) - np.maximum(st, lo), 0)
    return LaunchedGpu(gi, lau if select == "launcher_in" else launchers_for(trace, gi), whole, clipped)


def by_owner(owner: np.ndarray, ns: np.ndarray, n: int) -> np.ndarray:
    """Sum of ``ns`` (one of a LaunchedGpu's durations) per owner index (0..n-1; -1: no owner), int64."""
    ok = owner >= 0
    out = np.zeros(n, dtype=np.int64)
    np.add.at(out, owner[ok], ns[ok])
    return out


class RangeLaunches(NamedTuple):
    order: np.ndarray    # positions into the LaunchedGpu arrays of the launched spans, by (thread,) launch start
    i0: np.ndarray       # per range: its launches are order[i0:i1]
    i1: np.ndarray

    def sum(self, ns: np.ndarray) -> np.ndarray:
        """Per range: the sum of ``ns`` (a LaunchedGpu duration) over its launches, int64."""
        cum = np.concatenate(([0], np.cumsum(ns[self.order], dtype=np.int64)))
        return cum[self.i1] - cum[self.i0]


def in_ranges(trace: Trace, lg: LaunchedGpu, starts: np.ndarray, ends: np.ndarray, tracks: np.ndarray | None = None
              ) -> RangeLaunches:
    """Per host time range [start, end): the launched GPU spans whose launching call starts inside it - on
    the range's thread (``tracks``), or on any thread (tracks None).  Nested ranges each get theirs."""
    s = trace.spans
    pos = np.flatnonzero(lg.launcher >= 0)
    src = lg.launcher[pos]
    lstart = s.start_ns[src]
    starts, ends = np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64)
    if tracks is None:
        o = np.argsort(lstart, kind="stable")
        ls = lstart[o]
        return RangeLaunches(pos[o], np.searchsorted(ls, starts, side="left"), np.searchsorted(ls, ends, side="left"))
    ltrack = s.track[src].astype(np.int64)
    o = np.lexsort((lstart, ltrack))
    lt, ls = ltrack[o], lstart[o]
    tracks = np.asarray(tracks, dtype=np.int64)
    a = np.searchsorted(lt, tracks, side="left")
    b = np.searchsorted(lt, tracks, side="right")
    i0, i1 = a.copy(), a.copy()
    for t in np.unique(tracks).tolist():
        sel = np.flatnonzero(tracks == t)
        lo, hi = int(a[sel[0]]), int(b[sel[0]])
        seg = ls[lo:hi]
        i0[sel] = lo + np.searchsorted(seg, starts[sel], side="left")
        i1[sel] = lo + np.searchsorted(seg, ends[sel], side="left")
    return RangeLaunches(pos[o], i0, i1)
