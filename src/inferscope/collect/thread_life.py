"""The first and last readings of every Python thread: when its ``run()`` began and ended, on the trace's
clock, with its CPU time then (``time.thread_time_ns``).

The sampler reads each thread's CPU clock at its ticks only; starved of the GIL beside busy Python
threads it ticks at 9-30 Hz, so a thread started between two ticks lost its CPU time up to the next one,
and a thread that ended lost everything since its last tick - its CPU clock cannot be read once it is
gone (zoo_gil: the three spinning threads' 70 % of a core read 0-25 ms of 150 ms, 1 run in 3 nothing).
``threading.Thread._bootstrap_inner`` (the frame every Python thread runs in, since Python 2) is wrapped
once per process: two clock reads at a thread's start and end, nothing per tick.  The sampler pops the
readings of the threads it follows (``started`` / ``ended``); a thread that began and ended between two ticks
is laid out at the stop from both readings, at the class of the function it ran (``targets``).  Each table
keeps at most MAX_KEPT entries.
"""
from __future__ import annotations

import threading
import time

MAX_KEPT = 4096       # readings kept per table at most (a program starting threads in a loop: bounded memory)

started: dict[int, tuple[int, int]] = {}    # native tid -> (clock ns, thread CPU ns) when run() began
ended: dict[int, tuple[int, int]] = {}      # native tid -> (clock ns, thread CPU ns) when run() returned
targets: dict[int, object] = {}             # native tid -> the code object its run() calls (target, or run itself)
_orig = None
_clock = time.perf_counter_ns


def _note(table: dict, tid: int) -> None:
    if len(table) >= MAX_KEPT:
        try:
            del table[next(iter(table))]          # the oldest
        except (StopIteration, KeyError, RuntimeError):
            return
    table[tid] = (_clock(), time.thread_time_ns())


def install(clock=None) -> None:
    """Wrap Thread._bootstrap_inner (idempotent); ``clock``: the trace's clock (perf_counter_ns)."""
    global _orig, _clock
    if clock is not None:
        _clock = clock
    if _orig is not None:
        return
    orig = getattr(threading.Thread, "_bootstrap_inner", None)
    if orig is None:
        return

    def _bootstrap_inner(self):
        tid = None
        try:
            tid = threading.get_native_id()
            _note(started, tid)
            f = getattr(self, "_target", None) or type(self).run
            code = getattr(getattr(f, "__func__", f), "__code__", None)
            if code is not None:
                if len(targets) >= MAX_KEPT:
                    targets.clear()
                targets[tid] = code
        except Exception:
            pass
        try:
            orig(self)
        finally:
            if tid is not None:
                try:
                    _note(ended, tid)
                except Exception:
                    pass

    _bootstrap_inner.__wrapped__ = orig
    threading.Thread._bootstrap_inner = _bootstrap_inner
    _orig = orig


def uninstall() -> None:
    global _orig
    if _orig is not None and getattr(threading.Thread._bootstrap_inner, "__wrapped__", None) is _orig:
        threading.Thread._bootstrap_inner = _orig
    _orig = None
    started.clear()
    ended.clear()
    targets.clear()
