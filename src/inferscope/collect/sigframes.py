"""The main thread's Python frame at uniform wall-clock moments, without waiting for the GIL.

The sampler thread needs the GIL to read ``sys._current_frames()``: a thread running pure Python
gives it up only at the switch interval or where it releases it itself (a numpy/torch call, I/O).  A
frame read at the moment the sampler got the GIL is therefore biased to release points: in a loop of
pure-Python ``clean_rows`` (1.3-1.5 ms, ~60 % of the loop) and GIL-releasing ``numpy_features``, a tick
that came during the last part of ``clean_rows`` waited for the release in ``numpy_features`` and saw
that (/tmp experiment, 2026-11-25: 34 % clean_rows seen at a 0.5 ms switch interval, 0 % at Python's
5 ms, vs 60-62 % true).

Here a POSIX timer (``timer_create``, CLOCK_MONOTONIC, ``SIGEV_THREAD_ID``: delivered to the main
thread only) raises SIGPROF every sampler interval.  CPython's C handler only sets a flag; the Python
handler runs in the main thread at its next bytecode boundary - within microseconds while it runs
Python, right after the call while it is in native code (whose caller is then the frame: the right
function), after the wait while it waits for the GIL.  The handler walks the frame with the
sampler's own rules and stores ``(t_ns, walk result)``; the sampler takes the function of the latest
record of each tick interval for the main thread (when its domain agrees with the sampler's own walk),
not the class: the class stays the sampler's rule's (taking it too added noise to a Rust tokenizer's
split, bench/README.md).  The same loop then reads 56-77 % clean_rows for 63 % true (3 runs).
Each record's domain is also kept (``recent``) for the perf resolver: an interpreter IP sample takes the
Python class of the signal nearest to it in time, not that of the tick nearer to it (resolve.py) - a tick
interval that waited 106 ms for the GIL had read half of a tokenizer's Python as the user code of the tick
before it.

A handler that runs late is not used: when the signal waited more than ``STALE_NS`` (or the timer
overran), the main thread was in native code all that while and the frame is the first Python code
*after* it - often another function (numpy's ``_methods._sum`` after a page-faulting array write read
45 % "preprocessing" for a phase that is 94 % compute).  The sampler's own frame, taken while the
native call runs and the GIL is free, names the caller there; ``latest`` then holds (t_ns, None).

Installed only when SIGPROF has no handler yet (SIG_DFL: not another profiler's), from the main
thread, on Linux; with SA_RESTART (``siginterrupt(False)``) so that restartable system calls of
native code are not interrupted (Python's own calls retry on EINTR anyway, PEP 475).  Off with
``INFERSCOPE_SIGNAL_FRAMES=0``.  Cost: one signal and one handler call (a frame walk, ~5-10 us) per
interval in the main thread, ~0.1-0.2 % at 200 Hz.
"""
from __future__ import annotations

import collections
import ctypes
import gc
import os
import signal
import sys
import threading
import time

ENV = "INFERSCOPE_SIGNAL_FRAMES"
_CLOCK_MONOTONIC = 1
_SIGEV_THREAD_ID = 4
# a handler that runs later than this after its signal had the main thread in native code (or waiting
# for the GIL) meanwhile: its frame is where that ended, not where the time went.  A handler in
# running Python code runs within microseconds, one delayed by a sampler tick (the GIL held ~50-150 us)
# within ~200 us; the last 250 us of a native call still lend their time to the Python code after it
STALE_NS = 250_000
# signals kept between two ticks of the sampler (a tick waiting 2.5 s for the GIL at 200 Hz)
RECENT_MAX = 512


class _SigEvent(ctypes.Structure):          # struct sigevent (Linux, 64 bytes)
    _fields_ = [("sigev_value", ctypes.c_void_p), ("sigev_signo", ctypes.c_int), ("sigev_notify", ctypes.c_int),
                ("tid", ctypes.c_int), ("pad", ctypes.c_int * 11)]


class _TimeSpec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class _ITimerSpec(ctypes.Structure):
    _fields_ = [("it_interval", _TimeSpec), ("it_value", _TimeSpec)]


def available() -> str | None:
    """None when signal frames can be used here, else why not (one line)."""
    if os.environ.get(ENV, "1") == "0":
        return f"{ENV}=0"
    if not sys.platform.startswith("linux"):
        return "not Linux"
    if threading.current_thread() is not threading.main_thread():
        return "not started from the main thread"
    if signal.getsignal(signal.SIGPROF) not in (signal.SIG_DFL, None):
        return "SIGPROF already has a handler (another profiler?)"
    return None


class SignalFrames:
    """``start()`` from the main thread; ``latest`` is None or (t_ns, walk(frame)) of the last signal."""

    def __init__(self, interval_ns: int, walk, clock=time.perf_counter_ns) -> None:
        self.interval_ns = int(interval_ns)
        self._walk = walk
        self._clock = clock
        self.latest = None
        # (t_ns, domain, open) of the recent signals that were not late, oldest first (and of long garbage
        # collections: _gc): the sampler moves them to the main thread's state at each tick; its perf resolver
        # gives each interpreter sample the domain of the record nearest to it (resolve.py), of an open one
        # until the next record
        self.recent: collections.deque = collections.deque(maxlen=RECENT_MAX)
        self.count = 0
        self.active = False
        self.why_not: str | None = None
        self._timer = None
        self._libc = None
        self._t0 = 0
        self.stale = 0
        self.stale_ns = min(STALE_NS, self.interval_ns // 4)
        self._main = threading.main_thread().ident
        self._gc_t = 0
        self._gc_dom = None
        self._in_handler = False
        self.gc_long = 0       # collections in the main thread that took half a signal period or more

    def drain(self, out: list, names) -> None:
        """Move the records of ``recent`` to ``out`` (a thread state's ``sigobs``) as (t_ns, class, open), the
        class by ``names`` (domain -> class name); ``out`` bounded (the resolver prunes it)."""
        q = self.recent
        while q:
            t, d, o = q.popleft()
            out.append((t, names[d], o))
        if len(out) > 2048:
            del out[:1024]

    def _gc(self, phase, info) -> None:
        """gc.callbacks: a collection runs in the thread that allocated, holding the GIL, with no signal handler
        in it (no bytecode boundary) and few sampler ticks (zoo_hf_tokenizer: gen-2 collections of 15-108 ms), its
        perf samples in the interpreter: its time is the Python code's that triggered it (a tokenizer's
        allocations), not the class of the tick before it.  A full collection leaves (start, domain, open) in
        ``recent`` as it starts - the interpreter samples after it take that domain until the next record,
        even where the sampler resolves them before the collection ends (a tick can come in it, at a
        finalizer) - and (end, domain, closed) as it ends; a younger one that took half a signal period or
        more leaves both as it ends.  Walking the stack at every young collection's start would cost more."""
        try:
            if threading.get_ident() != self._main or not self.active or self._in_handler:
                return
            if phase == "start":
                self._gc_t = t0 = self._clock()
                self._gc_dom = None
                if info.get("generation") == 2:
                    self._gc_dom = d = self._walk(sys._getframe(1))[0]
                    self._insert((t0, d, True))    # (a signal handled in the walk is later)
                return
            t1 = self._clock()
            t0, d = self._gc_t, self._gc_dom
            if d is None:
                if not t0 or t1 - t0 < self.interval_ns // 2:
                    return
                d = self._walk(sys._getframe(1))[0]
                self._insert((t0, d, True))     # (a finalizer's signal records may be later than t0: in order)
            if t1 - t0 >= self.interval_ns // 2:
                self.gc_long += 1
            self._insert((t1, d, False))
        except Exception:        # never raise into the program's code
            pass

    def _insert(self, rec) -> None:
        """Append ``rec`` to ``recent`` in time order (the records after it move up; the oldest drops when full)."""
        q = self.recent
        i = len(q)
        while i > 0 and q[i - 1][0] > rec[0]:
            i -= 1
        if i == len(q):
            q.append(rec)
            return
        if len(q) == q.maxlen:
            if i == 0:
                return                      # (older than all of a full ring)
            q.popleft()
            i -= 1
        q.insert(i, rec)

    def _handler(self, signum, frame) -> None:
        if not self.active:
            return
        self._in_handler = True      # (a collection the walk's allocations trigger is ours: _gc leaves it)
        try:
            t = self._clock()
            late = (t - self._t0) % self.interval_ns > self.stale_ns or self._overrun(self._timer) > 0
            if late:
                self.stale += 1
            w = None if late else self._walk(frame)
            self.latest = (t, w)
            if w is not None:
                self._insert((t, w[0], False))
            self.count += 1
        except Exception:        # never raise into the program's code
            pass
        finally:
            self._in_handler = False

    def start(self) -> bool:
        why = available()
        if why is None and self.interval_ns <= 0:
            why = "no interval"
        if why is not None:
            self.why_not = why
            return False
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.timer_create.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
            libc.timer_settime.argtypes = (ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
            libc.timer_delete.argtypes = (ctypes.c_void_p,)
            # called in the handler: through PyDLL, which keeps the GIL.  A CDLL call releases and
            # re-takes it, and a main thread doing that every tick while it runs Python starved a
            # thread waiting for the GIL (the sampler's start, 5 s in a test): the waiter sees a
            # switch each time and never asks for the GIL, and the releasing thread takes it back first
            over = ctypes.PyDLL(None).timer_getoverrun
            over.argtypes = (ctypes.c_void_p,)
            over.restype = ctypes.c_int
            self._overrun = over
            signal.signal(signal.SIGPROF, self._handler)
            signal.siginterrupt(signal.SIGPROF, False)
            ev = _SigEvent()
            ev.sigev_signo = int(signal.SIGPROF)
            ev.sigev_notify = _SIGEV_THREAD_ID
            ev.tid = threading.get_native_id()
            timer = ctypes.c_void_p()
            if libc.timer_create(_CLOCK_MONOTONIC, ctypes.byref(ev), ctypes.byref(timer)) != 0:
                raise OSError(ctypes.get_errno(), "timer_create")
            self._timer, self._libc = timer, libc
            sec, nsec = divmod(self.interval_ns, 1_000_000_000)
            spec = _ITimerSpec(_TimeSpec(sec, nsec), _TimeSpec(sec, nsec))
            self.active = True
            gc.callbacks.append(self._gc)
            self._t0 = self._clock()      # expiries at t0 + k * interval (the same CLOCK_MONOTONIC)
            if libc.timer_settime(timer, 0, ctypes.byref(spec), None) != 0:
                raise OSError(ctypes.get_errno(), "timer_settime")
        except (OSError, ValueError, AttributeError, TypeError) as e:
            self.why_not = f"{type(e).__name__}: {e}"
            self.stop()
            return False
        return True

    def stop(self) -> None:
        """Delete the timer; give SIGPROF back its default action where that is safe (in the main thread,
        nothing pending: SIGPROF's default action ends the process).  Else our handler stays, inert."""
        self.active = False
        try:
            gc.callbacks.remove(self._gc)
        except ValueError:
            pass
        if self._timer is not None and self._libc is not None:
            try:
                self._libc.timer_delete(self._timer)
            except (OSError, ValueError, TypeError):
                pass
            self._timer = None
        if threading.current_thread() is not threading.main_thread():
            return
        try:
            if signal.getsignal(signal.SIGPROF) == self._handler and signal.SIGPROF not in signal.sigpending():
                signal.signal(signal.SIGPROF, signal.SIG_DFL)
        except (OSError, ValueError, AttributeError):
            pass
