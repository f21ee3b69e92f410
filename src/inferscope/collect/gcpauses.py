"""Python garbage-collection pauses: a ``gc.callbacks`` entry for the session's duration.

CPython calls every ``gc.callbacks`` entry with ("start", info) before a collection and ("stop",
info) after it, on the thread that triggered it, holding the GIL: a collection stops every Python
thread of the process.  One collection runs at a time (``gcstate->collecting``: an automatic or
explicit collection requested during one does nothing), so one start slot serves every thread.

Per collection (it runs at every one: young collections come by the thousand per second) the
callback reads ``time.perf_counter_ns`` (the session's clock, CLOCK_MONOTONIC) twice and updates
two counters of the generation; a collection of at least thresholds.GC_PAUSE_RECORD_MIN_NS is also
appended to the ring buffer as a span (SpanKind.GC_PAUSE, cat ``python.gc``, name ``gc gen<g>``,
detail ``{"generation", "collected", "uncollectable"}``) on the calling thread's track, at most
thresholds.GC_PAUSE_MAX_RECORDS of them (the rest are counted).  The counters of all collections
(whole run) go to the trace's ``meta.collection`` (``gc_*`` keys).

Installed by session.Session.start when ``gc_pauses`` is on (INFERSCOPE_GC_PAUSES=0 turns it off),
removed by Session.stop_collectors; other callbacks are left alone.  A forked child drops the
parent's entry (os.register_at_fork).  Measured cost: ~0.5 us per collection (two clock reads, a
tuple of three dict lookups), i.e. < 0.1 % of a core at 1,000 collections/s.
"""
from __future__ import annotations

import gc
import os
import threading
import time

from .. import thresholds as T

GC_PAUSE = 17   # SpanKind.GC_PAUSE (no trace import here: the profiled process stays light)
CAT = "python.gc"
NAMES = ("gc gen0", "gc gen1", "gc gen2")


def collector_off() -> bool:
    """Turn the garbage collector off in this (InferScope's own) thread's work; True when it was on (give that to
    ``collector_on``).  Whichever thread allocates past the threshold runs a collection, holding the GIL: run by a
    profiler thread it is a pause of the program charged to the profiler, and the program's threads blocked for
    the GIL read as 'waiting' (collect/sampler_loop.py does the same around its ticks).  Deferred, the collection
    runs at the program's next allocation, in its thread.  No allocation here (a context-manager object would be
    one - and could itself start the collection).  A gc.disable() the program makes in another thread meanwhile
    (only while this one is in a system call) is undone by collector_on."""
    if gc.isenabled():
        gc.disable()
        return True
    return False


def collector_on(was_on: bool) -> None:
    if was_on:
        gc.enable()


class GcPauses:
    """The callback and its counters; ``append``: the ring buffer's append."""

    def __init__(self, append, min_ns: int = T.GC_PAUSE_RECORD_MIN_NS, max_records: int = T.GC_PAUSE_MAX_RECORDS):
        self.min_ns = int(min_ns)
        self.max_records = int(max_records)
        self.counts = [0, 0, 0]          # collections per generation (all, whole run)
        self.total_ns = [0, 0, 0]        # their time per generation
        self.long_counts = [0, 0, 0]     # collections >= min_ns per generation
        self.recorded = 0
        self.over_cap = 0                # long collections not recorded (cap reached)
        self.over_cap_ns = 0
        self.longest_ns = 0
        self.installed = False
        self._cb = self._make(append)
        self._pid = os.getpid()

    def _make(self, append):
        clock = time.perf_counter_ns
        tid = threading.get_native_id
        counts, total, longc = self.counts, self.total_ns, self.long_counts
        min_ns = self.min_ns
        t0 = [0]
        me = self

        def cb(phase, info):
            if phase == "start":
                t0[0] = clock()
                return
            start = t0[0]
            if not start:           # installed during a collection
                return
            t1 = clock()
            t0[0] = 0
            d = t1 - start
            g = info.get("generation", 2)
            if g > 2 or g < 0:
                g = 2
            counts[g] += 1
            total[g] += d
            if d < min_ns:
                return
            longc[g] += 1
            if d > me.longest_ns:
                me.longest_ns = d
            if me.recorded >= me.max_records:
                me.over_cap += 1
                me.over_cap_ns += d
                return
            me.recorded += 1
            append((0, GC_PAUSE, tid(), start, t1, NAMES[g],
                    '{"generation":%d,"collected":%d,"uncollectable":%d}'
                    % (g, info.get("collected", 0), info.get("uncollectable", 0)), CAT))
        return cb

    def start(self) -> bool:
        if self.installed:
            return True
        gc.callbacks.append(self._cb)
        self.installed = True
        try:
            os.register_at_fork(after_in_child=self._after_fork)
        except Exception:
            pass
        return True

    def _after_fork(self) -> None:
        if os.getpid() != self._pid:
            self.stop()

    def stop(self) -> None:
        """Remove our entry (by identity; other callbacks stay).  Idempotent."""
        if not self.installed:
            return
        self.installed = False
        cbs = gc.callbacks
        for i in range(len(cbs) - 1, -1, -1):
            if cbs[i] is self._cb:
                del cbs[i]

    def meta(self) -> dict:
        """The whole run's counters, flat keys of meta.collection (validate.py keeps scalars and lists only)."""
        return {"gc_pauses": True, "gc_record_min_ns": self.min_ns, "gc_max_records": self.max_records,
                "gc_collections": list(self.counts), "gc_total_ns": list(self.total_ns),
                "gc_long_collections": list(self.long_counts), "gc_recorded": self.recorded,
                "gc_not_recorded": self.over_cap, "gc_not_recorded_ns": self.over_cap_ns, "gc_longest_ns": self.longest_ns,
                "gc_thresholds": list(gc.get_threshold()), "gc_frozen": gc.get_freeze_count(),
                "gc_auto_enabled": gc.isenabled()}
