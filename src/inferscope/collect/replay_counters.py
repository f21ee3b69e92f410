"""The counters the rules make (kernel_time.RULE_COUNTERS), re-derived by a replay of recorded facts (replay.py).

The live sampler adds to one process-wide ``kernel_time.Totals`` while its rules decide (page-fault and I/O kernel
time, the native tokenizer's CPU time) and flushes it as cumulative counter samples at each perf drain
(sampler_loop._drain, at that tick's time) and at its stop.  The replay gives each replayed drain (an "R" event) a
``Totals`` of its own, stamps it with the time the live sampler flushed it, sums them in time order and flushes at
each of those times with ``Totals.flush`` - so with the rules unchanged the counters are the recorded ones, sample
for sample, and with a rule changed they follow its decisions.

When a drain's totals were flushed: the facts hold no clock reading of the drain (its tick's time), only the thread's
own tick times ("B": each thread's time is read after the tick's, before the next tick's).  A drain that ran at the
thread's last observed tick was flushed in (the thread's previous tick, that tick]; one that ran at the thread's end
(``_finish``, "F") at the next drain or the sampler's stop, after it.  Such a flush of the recording is taken as the
flush time (the recorded sample times of RULE_COUNTERS are the drains that added something: observations of the
clock, not products of the rules); where the recording has none there (the replayed rules added where the live ones
did not), the thread's tick time (up to the tick's per-thread lag, tens of us, after the live drain) or, at the
thread's end, the end its last interval was laid to.  Residual: the last drain of a thread that its log cannot
place (its last tick was no drain tick in the recording, or was one that added nothing) goes with the next recorded
flush.
"""
from __future__ import annotations

import numpy as np

from ..trace.kinds import TrackKind
from . import kernel_time as K

# where an "R" event sits in its thread's log (its flush time: ``flush_time``)
TICK, TAIL, END = 0, 1, 2      # observed ticks follow it; after the thread's last observed tick; after its end ("F")


def flush_time(ts: np.ndarray, prev_t: int, t: int, where: int, fallback: int) -> int:
    """When the live sampler flushed the totals of a drain replayed after the thread's tick at ``t`` (its previous tick
    at ``prev_t``): ``ts``, the recording's flush times (sorted)."""
    i = int(np.searchsorted(ts, prev_t, side="right"))
    if where != END and i < len(ts) and ts[i] <= t:
        return int(ts[i])
    if where == TICK:
        return int(t)
    j = int(np.searchsorted(ts, t, side="right"))
    return int(ts[j]) if j < len(ts) else int(fallback)


def rule_tracks(trace, pid: int) -> np.ndarray:
    """Per track of ``trace``: it is one of the process's RULE_COUNTERS."""
    tk = trace.tracks
    ids = [trace.strings.get(m) for m in K.RULE_COUNTERS]
    return (tk.kind == int(TrackKind.COUNTER)) & (tk.pid == pid) & np.isin(tk.name, [i for i in ids if i >= 0])


def recorded_flush_times(trace, on: np.ndarray) -> np.ndarray:
    """The sample times of the tracks ``on`` (rule_tracks) in ``trace``: the drains that added something (sorted)."""
    c = trace.counters
    return np.unique(c.ts_ns[on[c.track]]).astype(np.int64) if len(c) else np.zeros(0, np.int64)


def counter_samples(drains: list, ts: np.ndarray) -> list:
    """[(metric, ts_ns, value)]: the replayed drains' totals ``drains`` [(prev_t, t, where, fallback, Totals)] summed
    in the order of their flush times and flushed at each (kernel_time.Totals.flush, as the live sampler does)."""
    stamped = sorted(((flush_time(ts, p, t, w, fb), k) for k, (p, t, w, fb, _) in enumerate(drains)))
    out: list = []
    total = K.Totals()
    for n, (at, k) in enumerate(stamped):
        total.merge(drains[k][4])
        if n + 1 == len(stamped) or stamped[n + 1][0] != at:
            total.flush(out.append, at)
    return [(m, ts_, v) for _, m, _, ts_, v in out]
