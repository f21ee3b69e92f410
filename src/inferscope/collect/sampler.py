"""CPU/Python sampler: one daemon thread, ``sys._current_frames()`` at 200 Hz by default (cpu_sampling_frequency_hz).

Per sample and thread:
  on/off CPU   the thread's CPU clock (pthread_getcpuclockid) plus its run-queue delay from
               /proc/self/task/<tid>/schedstat (runnable but descheduled is CPU contention, not a
               wait; one pread of a kept-open fd, read only when the CPU clock fell short) say how
               much of the interval since its previous sample it was off-CPU -> ``waiting`` (sleep,
               I/O, locks, GIL).  Between SPLIT_MIN_FRACTION and 1 - SPLIT_MIN_FRACTION the interval
               is split: the off-CPU part first when the thread is mostly on-CPU (it runs at the
               tick), last when it is mostly off-CPU (it ran, then blocked); the rest is classified.
  domain       walk the stack from the innermost frame outwards; the innermost frame that is
               not transparent (stdlib, unknown libraries, InferScope) decides (classify.py).
               A user-code frame defers to an enclosing tokenization/preprocessing frame or
               an enclosing scope() whose name says so.  A thread that owns one of importlib's
               module locks is importing: ``framework`` (library loading), labelled with the
               innermost module being imported, and the stack is not walked.
  cpu_compute  an on-CPU thread whose domain is framework or user code and which is executing
  / native     native code: decided by Linux perf_event task-clock sampling of the thread's
  tokenizers   instruction pointer (perfip.py; 1 sample per 4 ms of the thread's CPU time, user
               space only, unprivileged at perf_event_paranoid <= 2), by the role of the shared
               object each IP falls in (perfip.role_of): the fractions of the IP samples taken
               between the previous tick and this one in numeric libraries (torch, any BLAS/OpenMP,
               numpy's/scipy's compiled loops, JIT code) and in native tokenizers (HF tokenizers'
               Rust extension, sentencepiece, tiktoken) split that interval into cpu_compute,
               tokenization and the stack's class; samples in libc/other extensions follow the mix
               of the classified ones; an interval with no classified sample keeps the thread's last
               fractions.  With perf this applies without torch too (numpy-only programs).  Such ticks wait in a per-thread queue and are decided in
               order when the perf ring is drained (every RESOLVE_NS), with the samples'
               CLOCK_MONOTONIC timestamps placing each sample between two ticks.
               Fallback when perf_event is unavailable: the GIL heuristic - the sampler woke on
               time (no thread held the GIL), so the thread runs native code that released the
               GIL, as torch ops do.  The fallback is biased (measured on the demo's generate():
               87 % cpu_compute vs 64 % inside ops by the torch profiler) because the main thread
               hands the GIL over at the next op entry.
  kernel       kernel-mode CPU (no IP sample: perf samples user space) is not inherited from the
               previous verdict: kernel_time.py reads the thread's page faults and stime per tick;
               an interval with faults is the memory work of the code that faulted (native ->
               cpu_compute, the interpreter -> the stack's class; the on-CPU time its user samples
               leave uncovered is that work), the kernel CPU of a blocking call is ``waiting``.
Cost (bench/README.md): with cold caches on a VM one tick holds the GIL ~90-120 us and costs the
sampler thread ~200-250 us of CPU including the kernel's wake-ups; while a module import runs the
rate drops by IMPORT_RATE_DIVISOR.  System counters (system.py) are read on the same ticks.
Sampling instants: a tick whose timing did not depend on what the thread was doing classifies - it
got the GIL at once (the thread was in native code or blocked) or after the switch interval forced
a hand-over.  A tick that got the GIL after a short wait got it because the thread released it
voluntarily (a blocking call, a torch op); an isolated one keeps the thread's current class,
consecutive ones classify (known limit: a thread that releases the GIL more often than the switch
interval is only ever observed at its release points).  A class change between two ticks is
placed at the midpoint of their interval.
Consecutive samples of one class on one thread are merged into one CPU_SAMPLE span covering
the wall time between samples (spans tile the thread's observed time); its detail is the most
frequent innermost function ("file:func").
"""
from __future__ import annotations

import sys
import threading
import time

from .. import thresholds as T
from . import classify as C
from . import kernel_time as K
from . import thread_ends, thread_life
from .layout import LONG_INTERVAL_TICKS, SPLIT_MIN_NS, _pieces, _split_at_marks, owed_run_queue
from .perfip import COMPUTE, OTHER, TOKENIZER
from .rawio import ProcFile
from .thread_state import (CLS_COMPUTE, CLS_FRAMEWORK, CLS_RUNQ, CLS_TOKENIZATION, CLS_WAITING, KEEP,  # noqa: F401
                           _ThreadState)

CPU_SAMPLE = 11   # SpanKind.CPU_SAMPLE
GIL_WAIT_NS = 250_000
# The interpreter's switch interval while one thread of the program is on CPU (with more, the
# program's own: they would hand the GIL to each other ten times as often; restored at stop;
# INFERSCOPE_SWITCH_INTERVAL_US overrides, 0 leaves it alone).  A tick waits for the GIL until the
# running thread releases it (a numpy/torch call, I/O) or the switch interval forces a hand-over:
# at Python's 5 ms the frame seen is nearly always the next release point, so pure Python between
# GIL-releasing calls was never named (issue 24 item 1).
SWITCH_INTERVAL_S = 0.0005
# Sampling rate divisor while a module import is in progress (start-up is reported as one bucket
# plus its slowest imports; 50 Hz at the default rate still gives ~200 samples over the demo's 4 s
# of imports).  Every tick takes the GIL from the importing thread.
IMPORT_RATE_DIVISOR = 4
# One IP sample per 4 ms of a thread's CPU time (~1 per tick at 200 Hz; each sample is a timer
# interrupt in the sampled thread: kernel cost measured at 1.4 % for 1 ms, 0.4 % for 4 ms).
# Sampling is switched off (ioctl) while a module import runs: import ticks are "framework"
# whatever the IP says, and start-up is most of a short inference script's life.
PERF_PERIOD_NS = 4_000_000
# Overhead budget: the sampler may hold the GIL at most this fraction of the wall time on average
# (its tick interval is stretched beyond 1/cpu_sampling_frequency_hz when ticks are expensive).
# Measured on the 2-vCPU VM (bench/README.md): a tick holds the GIL ~20-120 us (more with cold
# caches, many threads or deep stacks); the budget only binds when ticks are that slow.  The
# larger cost of a tick is waiting for the GIL (up to the 5 ms switch interval), which a thread
# that releases the GIL often (torch ops) pays as extra wake-ups: hence the modest default rate.
GIL_BUDGET = 0.015
# The budget is paced by the sampler's own CPU time per tick, not its wall time, and one-off
# setup ticks (a new thread registered: its CPU clock, schedstat file and perf_event opened; perf
# adopted for the threads already seen) do not feed it.  With wall time, a sampler descheduled
# while holding the GIL on a loaded host, or one 30 ms perf_event_open, stretched the interval to
# 100+ ms for the next second (issue 16: 14.6 Hz instead of 200 Hz; in test_collect a 150 ms
# scope("tokenize") got no tick at all).
# Pending ticks are decided from the perf ring every RESOLVE_NS (a drain costs ~50 us with cold
# caches, mostly fixed: per tick it was a third of the sampler's time holding the GIL).  The
# ring (PAGES in perfip.py) holds ~1300 samples = 2.6 s of one thread's CPU time.
RESOLVE_NS = 100_000_000
# An interval whose thread CPU time (+ run-queue delay) covers less than 1 - SPLIT_MIN_FRACTION of it
# and more than SPLIT_MIN_FRACTION is split into an off-CPU ('waiting') part and an on-CPU part of
# the measured lengths, instead of all-or-nothing at 25 % (issue 16 item 3): a 2.6 ms model step
# between 30 ms waits on Rayon threads read as 5-12 ms cpu_compute (a whole 5 ms tick interval or
# a delayed one), 2x the truth.  Below 10 % the part is noise (GIL hand-overs to the sampler).
SPLIT_MIN_FRACTION = 0.1


def _runq_ns(tid: int) -> int:
    """Time the thread spent runnable on a run queue (ns), from /proc (Linux schedstats); -1 n/a."""
    try:
        with open(f"/proc/self/task/{tid}/schedstat", "rb") as f:
            return int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return -1


def _decides(co) -> bool:
    """The code object is not transparent to the stack walk (not stdlib/unknown library/InferScope/import)."""
    e = C.CODE_CACHE.get(id(co))
    if e is None or e[0] is not co:
        e = C.code_entry(co)
    return bool(e[1]) and e[1] != C.IMPORT


def _close(st) -> None:
    if st.perf is not None:
        st.perf.close()
        st.perf = None
    if st.rq_t is not None:
        st.rq_t.close()
        st.rq_t = None
    if st.kst is not None:
        st.kst.close()
        st.kst = None


def perf_kernel_share(cpu_ns: float, samples: float) -> float:
    """A thread's kernel share of its CPU time from its user-space perf IP samples (each stands for
    PERF_PERIOD_NS of user time) over ``cpu_ns`` of its CPU time, with thresholds.KERNEL_PERF_SHARE_PRIOR
    samples of user time as a prior (the rule: thresholds.KERNEL_PERF_SHARE_CPU_NS)."""
    a = T.KERNEL_PERF_SHARE_PRIOR
    return max(0.0, 1.0 - (samples + a) * PERF_PERIOD_NS / (cpu_ns + a * PERF_PERIOD_NS))


def _import_probe(module_locks):
    """f(thread ident) -> name of the innermost module that thread is importing, or None.

    An import holds importlib's per-module lock (``_module_locks``: name -> weakref to a lock
    whose ``owner`` is the importing thread's ident) for its whole duration; the last such entry
    owned by the thread is the innermost import.  Scanning the handful of live locks replaces
    walking the whole stack looking for importlib frames.
    """
    def importing_module(ident):
        name = None
        try:
            for k, wr in list(module_locks.items()):
                lock = wr()
                if lock is not None and getattr(lock, "owner", None) == ident:
                    name = k
        except (AttributeError, TypeError):
            return None
        return name
    return importing_module


def _switch_interval_s() -> float:
    """The switch interval to use while one Python thread runs (SWITCH_INTERVAL_S, or
    INFERSCOPE_SWITCH_INTERVAL_US; 0 = never change the program's)."""
    import os
    try:
        us = float(os.environ.get("INFERSCOPE_SWITCH_INTERVAL_US", SWITCH_INTERVAL_S * 1e6))
    except ValueError:
        us = SWITCH_INTERVAL_S * 1e6
    return max(0.0, us / 1e6)


class Sampler:
    def __init__(self, buffer, hz: float, scope_stacks: dict, skip_idents: set, *, clock=None, sleep=None,
                 frames=None, cputime=None, getclk=None) -> None:
        """``clock`` (ns), ``sleep`` (s), ``frames`` (-> {ident: frame}), ``cputime`` (clk -> ns) and
        ``getclk`` (ident -> clk) default to time.perf_counter_ns, time.sleep, sys._current_frames,
        time.clock_gettime_ns and time.pthread_getcpuclockid; tests inject fakes to drive ticks
        deterministically."""
        self.buffer = buffer
        self._switch = None     # (the program's switch interval, ours) while the sampler has set ours
        self._live = frames is None     # the real interpreter (tests inject fakes: leave its switch interval)
        self._clock = clock or time.perf_counter_ns
        self._sleep = sleep or time.sleep
        self._frames = frames or sys._current_frames
        self._cputime = cputime or time.clock_gettime_ns
        self._getclk = getclk or time.pthread_getcpuclockid
        self.interval_ns = int(1e9 / hz) if hz > 0 else 0
        self.scope_stacks = scope_stacks
        self.cpu_marks: dict = {}     # ident -> [(t_ns, thread CPU ns)] at scope edges (session's; api._cpu_mark)
        self.starved_at = None        # the last tick that came late (LONG_INTERVAL_TICKS): the sampler starved of the GIL
        self.last_tick_ns = None      # the last tick (a scope edge long after it: the sampler starves now)
        self.skip = skip_idents
        self.class_totals: dict | None = None   # set by the live metrics exporter
        self.threads: dict[int, _ThreadState] = {}
        self.oncpu_by_tid: dict[int, int] = {}
        # tid -> [ticks that saw it outside imports, wall ns those ticks covered]: its achieved rate
        self.thread_ticks: dict[int, list[int]] = {}
        self.main_tid = threading.main_thread().native_id
        self._stop = threading.Event()
        self._running = threading.Event()   # cleared by pause(): the thread blocks, no GIL traffic
        self._running.set()
        self._thread: threading.Thread | None = None
        self._perf_thread: threading.Thread | None = None   # the short-lived perf set-up thread
        self.samples = 0
        self.ticks = 0
        self.busy_ns = 0         # wall time spent in ticks (holding the GIL), sleeps excluded
        self.steady_ticks = 0    # ticks outside imports, and the wall time between them (ns)
        self.steady_ns = 0
        self.cpu_ns = 0          # the sampler thread's own CPU time
        self.started_ns = 0
        self.torch_seen = False
        self.use_perf = True
        self.perf_active = False
        self.periodic = None     # (fn(t_ns), period_ns): system counters, called between ticks
        self.per_tick = None     # fn(t_ns): cheap counters read on every tick (page faults)
        self.follow_native = True   # native (non-Python) threads by perf role (native_threads.py)
        self.native_threads = None
        self.probe_blocking = True  # name the syscall/file/frame of off-CPU threads (blocking.py)
        # classify kernel-mode CPU on its own (kernel_time.py; INFERSCOPE_KERNEL_TIME=0: off, the A/B switch)
        self.kernel_time = __import__("os").environ.get("INFERSCOPE_KERNEL_TIME", "1") != "0"
        self.kernel_totals = K.Totals()
        self.blocking = None
        self.signal_frames = True   # the main thread's frame from a timer signal (sigframes.py)
        self._sig = None
        self._pre = None   # (main ident, its CPU clock ns, clock ns, run-queue ns or -1) read by start()
        self._stop_at = 0  # when stop() was called (the program's end): the final tick's time

    # ---------------------------------------------------------------------
    def start(self) -> None:
        if not self.interval_ns:
            return
        # perf_event is set up in a side thread the sampler starts (_setup_perf): the first
        # perf_event_open of a process costs the kernel 20-35 ms here (it enables the scheduler's
        # perf hooks); there it runs while the workload goes on instead of delaying its start.
        self._perf_maps = self._PerfIP = None
        self._perf_main = None
        if self._live and self.signal_frames:
            # the main thread's frame at a timer signal (sigframes.py); needs the main thread here
            from .sigframes import SignalFrames
            ss, ident = self.scope_stacks, threading.main_thread().ident
            self._sig = SignalFrames(self.interval_ns, lambda frame: C.walk(frame, ss.get(ident)), self._clock)
            self._sig.start()
        if self._live:
            thread_life.install(self._clock)
        self._thread = threading.Thread(target=self._run, name="inferscope-sampler", daemon=True)
        self._thread.start()
        # the main thread's CPU clock and run-queue delay, read here (the session's start, on the calling
        # thread, once the sampler thread runs: waiting for it to start is InferScope's start-up, off-CPU)
        # for the sampler's first tick: the sampler thread's own start-up (its imports, the perf set-up
        # thread) competes for the GIL and the CPUs with the program, and ran 144 ms into a loaded
        # zoo_disk_io's scope once (that much of its window read 'other', issue 25)
        try:
            self._pre = (threading.main_thread().ident,
                         self._cputime(self._getclk(threading.main_thread().ident)), self._clock(),
                         _runq_ns(self.main_tid) if self._live else -1)
        except Exception:      # noqa: BLE001 - the sampler thread's own reading holds
            pass

    def pause(self) -> None:
        """Stop taking samples until resume() (the thread blocks; runs stay open)."""
        self._running.clear()

    def resume(self) -> None:
        self._running.set()

    def stop(self) -> None:
        self._stop_at = self._clock()
        if self._sig is not None:
            self._sig.stop()
        self._stop.set()
        self._running.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        self._close_all()
        if self._live:
            thread_life.uninstall()
        if self.blocking is not None:
            self.blocking.close()
        if self._perf_main is not None:    # opened but the main thread was never sampled
            self._perf_main.close()
            self._perf_main = None

    @property
    def achieved_hz(self) -> float:
        dur = (self._clock() - self.started_ns) / 1e9 if self.started_ns else 0
        return self.ticks / dur if dur > 0 else 0.0

    # ---------------------------------------------------------------------
    def _native_ids(self) -> dict:
        return {t.ident: t.native_id for t in threading.enumerate()}

    @staticmethod
    def _detail(st: _ThreadState):
        """The run's function as "file:func:line" (its most frequent line), "file:func" without one."""
        if st.label is None:
            return None
        if st.lines:
            return f"{st.label}:{max(st.lines, key=st.lines.get)}"
        return st.label

    def _emit(self, st: _ThreadState) -> None:
        if st.cls is None or st.end <= st.start:
            return
        # 9th field: the ticks that named the run's function (the trace's correlation column of CPU_SAMPLE spans)
        self.buffer.append((0, CPU_SAMPLE, st.tid, st.start, st.end, st.cls, self._detail(st), "sample", st.n))
        ct = self.class_totals
        if ct is not None:     # live /metrics (exporter.py): ns per class, summed over threads
            ct[st.cls] = ct.get(st.cls, 0) + (st.end - st.start)

    def open_runs(self) -> list:
        """Spans for the runs still open (used by snapshots; not appended to the buffer)."""
        out = []
        for st in list(self.threads.values()):
            cls, start, t = st.cls, st.start, st.end
            if cls is not None and t > start:
                out.append((0, CPU_SAMPLE, st.tid, start, t, cls, self._detail(st), "sample", st.n))
        return out

    def _restore_switch(self) -> None:
        sw = getattr(self, "_switch", None)
        if sw is not None and sys.getswitchinterval() == sw[1]:   # the program did not set its own meanwhile
            sys.setswitchinterval(sw[0])
        self._switch = None

    def _close_all(self) -> None:
        self._restore_switch()
        if self.native_threads is not None:
            if self._perf_maps is not None and self.follow_native:
                try:                       # their last period
                    self.native_threads.tick(self._clock(), self._perf_maps)
                except Exception:
                    pass
            self.native_threads.close()
        if self._live and self.started_ns:
            self._adopt_unseen()
        for ident, st in list(self.threads.items()):
            self._finish(st, self.cpu_marks.get(ident), alive=True)
            self._emit(st)
            st.cls = None
            _close(st)
        if self._live and self.started_ns:
            for st in self._ended_unseen():
                self._finish(st)
                self._emit(st)
        self.threads.clear()
        self.kernel_totals.flush(self.buffer.append, self._clock())

    def idle_tids(self) -> set:
        """Threads never seen on CPU (the main thread is always kept)."""
        return {tid for tid, n in self.oncpu_by_tid.items() if n == 0 and tid != self.main_tid}

    def _apply(self, st: _ThreadState, t: int, cls: str, label, exact: bool = False, tick: bool = True) -> None:
        """Add one classified tick to the thread's current run (a new run when the class or the
        function changes: a run names one function, so the functions table sums each function's own
        runs - a run of one class used to give all its time to its most frequent function).
        ``label``: (function "file:func", line) of the tick, or None (no frame named: off-CPU parts,
        kept ticks).

        The tick says what the thread does at ``t``; when that differs from the previous tick the
        change happened somewhere in between, so the interval is split at its midpoint (the
        unbiased choice for a uniformly placed change; giving the whole interval to the new class
        turned one delayed tick - the sampler waiting for the GIL or descheduled - into a long
        run of the wrong class).  ``exact``: the caller knows the boundary (the perf split).
        """
        fn = label[0] if label is not None else None
        if cls is not CLS_WAITING and cls is not CLS_RUNQ:
            st.on_cls = cls
            if label is not None:
                st.on_label = label
        if cls is not st.cls or (fn is not None and st.label is not None and fn != st.label):
            if st.cls is not None and not exact and t > st.end:
                st.end = (st.end + t) // 2
            self._emit(st)
            st.cls = cls
            st.start = st.end
            st.label, st.n, st.lines = None, 0, {}
        if fn is not None:
            st.label = fn
            if tick:          # a tick split by class counts in each part (the ticks whose interval holds
                st.n += 1     # this class of the function; a part without one read "0 samples" beside its ms)
            ln = label[1]
            if ln:
                st.lines[ln] = st.lines.get(ln, 0) + 1
        st.end = t

    def _adopt_unseen(self) -> None:
        thread_ends.adopt_unseen(self)

    def _ended_unseen(self) -> list:
        return thread_ends.ended_unseen(self)

    def _finish(self, st: _ThreadState, marks=None, alive: bool = False) -> None:
        thread_ends.finish(self, st, marks, alive)

    def _owed_open_run(self, st: _ThreadState, ns: int) -> None:
        """The last ``ns`` of the thread's open 'waiting' run were a run-queue wait (layout.owed_run_queue): that
        run ends there, a run_queue run takes the rest up to the previous tick."""
        m = min(ns, st.end - st.start)
        if m <= 0:
            return
        end = st.end
        st.end = end - m
        self._emit(st)
        st.cls, st.start, st.end = CLS_RUNQ, end - m, end
        st.label, st.n, st.lines = None, 0, {}

    def _resolve(self, st: _ThreadState) -> None:
        """Decide the pending ticks of one thread from its perf IP samples, in order.

        A tick whose class needs the native verdict (cls None) covers the interval since the
        previous tick; the fraction f of the IP samples taken in it that fell in torch's libraries
        splits it: the first f of the interval is cpu_compute, the rest framework.  Splitting (not
        a majority vote) keeps the estimate unbiased: a vote turns a 70 % native interval into
        100 %, and the more samples per tick the stronger that pull (measured on the demo's
        generate(): 65 % -> 87 % cpu_compute as the perf period went from 1 per tick to 5 per
        tick).  With no sample in the interval the thread's last fraction holds; without perf,
        the GIL heuristic (gil_free) decides the whole interval.
        """
        pend = st.pending
        if not pend:
            return
        st.pending = []
        samples = []
        if st.perf is not None and self._perf_maps is not None:
            try:
                samples = st.perf.read(self._perf_maps)
            except (OSError, ValueError, IndexError):   # a closed/unmapped ring: no verdicts
                samples = []
        i, n = 0, len(samples)
        prev = st.end
        for t, cls, label, fallback, gil_free, off, *more in pend:
            while i < n and samples[i][0] <= prev:
                i += 1
            if cls is KEEP:
                cls = st.cls or CLS_FRAMEWORK     # (a pending KEEP always follows a decided tick)
            # the off-CPU part of the interval: first (off > 0) or last (off < 0); then the run-queue
            # part (more[0] ns, runnable: waiting for a CPU); the on-CPU part [prev, end] is
            # classified below, with exact boundaries
            end = t
            if off > 0:
                prev = prev + off
                self._apply(st, prev, CLS_WAITING, None, exact=True)
            elif off < 0:
                end = t + off
            rq = more[0] if more else 0
            if 0 < rq < end - prev:
                prev = prev + rq
                self._apply(st, prev, CLS_RUNQ, None, exact=True)
            kf = more[1] if len(more) > 1 else 0     # page faults of the interval (kernel_time.py)
            kns = more[2] if len(more) > 2 else 0    # its kernel-mode CPU time (stime carry)
            kx = False                               # a kernel part was placed: exact boundaries
            kb = more[3] if len(more) > 3 else 0      # blocked in this interval or the previous one (2: in I/O)
            pc = more[4] if len(more) > 4 else -1     # its CPU time, where perf sampled all of the interval
            tk = more[5] if len(more) > 5 else True   # the tick's function counts (the last of _pieces only)
            pz = len(more) > 6 and more[6]            # a piece of a long interval (_pieces)
            if pc >= 0 and st.perf is not None:
                j = i
                while j < n and samples[j][0] <= t:
                    j += 1
                d = 1.0 - min(1.0, pc / T.KERNEL_PERF_SHARE_CPU_NS)
                st.pcpu = st.pcpu * d + pc
                st.pn = st.pn * d + (j - i)
            # blocked in an I/O call (the probe saw it), or blocked with no user-space IP sample in the interval (perf
            # saw no user code run: its kernel CPU is the blocking call's - an O_DIRECT read of ~90 us the probe's
            # tick missed, with one fault and the GIL free, read as cpu_compute: 2-8 % of zoo_disk_io's window in 8
            # of 16 runs): a few faults are the call's buffer's (thresholds.KERNEL_FAULTS_BLOCKED_MIN) - unless its last
            # samples were native code (a Rust tokenizer's allocations: their kernel CPU is the tokenizer's)
            j = i
            while j < n and samples[j][0] <= t:
                j += 1
            kio = kb == 2 or (bool(kb) and st.perf is not None and j == i and not (
                st.native_fresh and ((st.native or 0) >= 0.5 or (st.native_tok or 0) >= 0.5)))
            kr = K.kernel_class(kf, bool(kb), False, fallback, CLS_COMPUTE, CLS_WAITING, kio)
            if kr is not None and kr[1] == K.IO and end > prev and st.perf is not None:
                # the on-CPU time the interval's user-space IP samples leave uncovered (each stands for
                # PERF_PERIOD_NS) is kernel time too - all of it when the thread's blocking call was an
                # I/O call (blocking.py probe), else at its recent kernel share (thresholds.
                # KERNEL_SHARE_DECAY): a system call's CPU (openat O_CREAT, a write's submission) is
                # often all of a short on-CPU part, before stime reports it
                j = i
                while j < n and samples[j][0] <= t:
                    j += 1
                share = 1.0 if kb == 2 else max(st.kst.kernel_share() if st.kst is not None else 0.0,
                                                perf_kernel_share(st.pcpu, st.pn))
                if pz:
                    # a piece: its expected value - per piece the uncovered time is mostly all of its CPU (no sample
                    # in a ~1 ms part) or none, and only the positive ones counted: zoo_gil lost 20-40 % of its
                    # loop's CPU to 'waiting' this way
                    kns = max(kns, int((end - prev) * share * share))
                else:
                    kns = max(kns, int((end - prev - (j - i) * PERF_PERIOD_NS) * share))
            if kr is not None and kr[1] == K.IO and end > prev and kns > 0:
                # blocked, no faults: the kernel CPU of the call it waited in is part of the I/O wait
                # (thresholds.KERNEL_*), next to the off-CPU part - after it (off > 0), or before it
                # (off < 0: the tail below)
                k = min(kns, end - prev)
                self.kernel_totals.add(K.IO, k, 0)
                if off < 0:
                    end -= k
                else:
                    prev += k
                    self._apply(st, prev, CLS_WAITING, None, exact=True)
                if end <= prev:
                    if t > prev:
                        self._apply(st, t, CLS_WAITING, None, exact=True)
                    prev = t
                    continue
            if cls is None:
                # samples in libc / the loader / unknown extensions (OTHER) are helpers of whatever
                # runs (a Rust tokenizer's malloc/memcpy: 316 of 1011 samples measured): they follow
                # the mix of the classified ones (compute, tokenizer, interpreter) of the interval
                nc = nk = tot = no = 0
                while i < n and samples[i][0] <= t:
                    k = samples[i][1]
                    if k == COMPUTE:
                        nc += 1
                    elif k == TOKENIZER:
                        nk += 1
                    elif k == OTHER:
                        no += 1
                        tot -= 1
                    tot += 1
                    i += 1
                kc = None
                if kf and st.perf is not None:
                    # each user-space IP sample stands for PERF_PERIOD_NS of user time: the on-CPU time
                    # they leave uncovered is kernel time too (unbiased on average; per interval the
                    # larger of the two estimates - faults x cost comes from a learnt mean cost)
                    kns = max(kns, end - prev - (tot + no) * PERF_PERIOD_NS)
                if kf and (not tot or kns > 0):
                    # page faults: the kernel's memory work for the code that faulted (kernel_time.kernel_class,
                    # thresholds.KERNEL_*), not the previous verdict.  Native code faulted when the interval
                    # or the thread's next user-space sample (drained with it) is in numeric libraries, the
                    # GIL was free at the tick, or its last verdict was compute
                    native = (nc > 0 or gil_free or (i < n and samples[i][1] == COMPUTE)
                              or (st.native_fresh and (st.native or 0) >= 0.5))
                    kc = K.kernel_class(kf, bool(kb), native, fallback, CLS_COMPUTE, CLS_WAITING, kio)
                    if kc is not None and kc[1] != K.FAULTS:
                        kc = None                      # (the I/O part was placed above)
                    elif kc is not None and kc[0] == CLS_COMPUTE and (
                            nk > nc or (i < n and samples[i][1] == TOKENIZER)
                            or (not nc and st.native_fresh and (st.native_tok or 0) >= 0.5)
                            or (not nc and not nk and self._native_role() == TOKENIZER)):
                        # the native code that faulted is a tokenizer's (a Rust tokenizer runs with the GIL
                        # free): its memory work is tokenization (zoo_tokenizers serial read 75-79 % vs 91 %
                        # true when it went to cpu_compute)
                        kc = (CLS_TOKENIZATION, kc[1])
                    if tot and kc is not None:
                        # user-space samples too: the kernel part (stime carry) first, by the rule; the
                        # rest below by the samples
                        k = min(kns, end - prev)
                        self.kernel_totals.add(kc[1], k, kf)
                        if k > 0:
                            prev += k
                            kx = True
                            self._apply(st, prev, kc[0], label, exact=True, tick=tk)
                        kc = None
                if kc is not None:
                    self.kernel_totals.add(kc[1], end - prev, kf)
                    # (the rule's class: native memory work is compute, or a tokenizer's - that one read as the
                    # stack's class, user code: 9 of 24 ms of zoo_tokenizers' misread user code)
                    frac, ftok = (1.0 if kc[0] == CLS_COMPUTE else 0.0), (1.0 if kc[0] == CLS_TOKENIZATION else 0.0)
                elif tot:
                    frac, ftok = nc / tot, nk / tot
                    st.native, st.native_tok = frac, ftok
                    st.native_fresh = True
                elif no:
                    # only libc / unknown-library samples: the helpers of the previous interval's mix
                    # when it had classified samples (a tokenizer's malloc), else the stack's class
                    # (hashlib in libcrypto after a tokenizer phase is user code, not what came before).
                    # While the process's native threads run a native tokenizer (Rayon's encode_batch),
                    # the thread that waits for them spends its on-CPU moments in libc on the same work:
                    # tokenization, not the mix of the model step before it (zoo_tokenizers --parallel:
                    # 32 ms of the main thread read cpu_compute, +15 points)
                    if self._native_role() == TOKENIZER:
                        frac, ftok = 0.0, 1.0
                    elif st.native_fresh and st.native is not None:
                        frac, ftok = st.native, st.native_tok
                    else:
                        frac, ftok = 0.0, 0.0
                    st.native_fresh = False
                elif st.native is not None:
                    frac, ftok = st.native, st.native_tok   # no new IP sample: keep the last fractions
                elif st.perf is not None:
                    # perf is on and has never sampled this thread in user space: its CPU so far went to
                    # the kernel (I/O system calls) or was too short for a sample - not native compute
                    # (the GIL heuristic read a disk-I/O loop's post-syscall time as 31-56 % cpu_compute)
                    frac, ftok = 0.0, 0.0
                else:
                    frac, ftok = (1.0 if gil_free else 0.0), 0.0
                if frac >= 1.0:
                    cls = CLS_COMPUTE
                elif ftok >= 1.0:
                    cls = CLS_TOKENIZATION
                elif frac <= 0.0 and ftok <= 0.0:
                    cls = fallback
                else:
                    # compute first, then native tokenization, then the stack's class; each part
                    # names the tick's function (its time is the function's, whatever the class)
                    dt = end - prev
                    a = prev + int(dt * frac)
                    b = a + int(dt * ftok)
                    if a > prev:
                        self._apply(st, a, CLS_COMPUTE, label, exact=True, tick=tk)
                    if b > a:
                        self._apply(st, b, CLS_TOKENIZATION, label, exact=True, tick=tk)
                    if end > b:
                        self._apply(st, end, fallback, label, exact=True, tick=tk)
                    if t > end:
                        self._apply(st, t, CLS_WAITING, None, exact=True)
                    prev = t
                    continue
            # (exact also next to an off-CPU interval: pending, a tick off CPU for all of it is known so by the
            # thread's CPU clock - the midpoint gave half of it to the class before, as in the tick loop)
            self._apply(st, end, cls, label, exact=bool(off) or rq > 0 or kx or (st.clk is not None and (
                        cls is CLS_WAITING or st.cls is CLS_WAITING or st.cls is CLS_RUNQ)), tick=tk)
            if t > end:
                self._apply(st, t, CLS_WAITING, None, exact=True)
            prev = t

    def _setup_perf(self) -> None:
        """Open the main thread's perf IP sampler (own short-lived thread; the sampler adopts it
        at its next tick and meanwhile decides by the GIL heuristic, so sampling starts at once)."""
        self.skip.add(threading.get_ident())
        try:
            from .perfip import Maps, PerfIP
            main = PerfIP.open(self.main_tid, PERF_PERIOD_NS)   # the system call releases the GIL
            if main is not None:
                maps = Maps()
                self._perf_main = main
                self._PerfIP = PerfIP
                self._perf_maps = maps        # set last: the sampler adopts perf when it appears
        except Exception:
            self._perf_maps = self._perf_main = None
        self.perf_active = self._perf_maps is not None

    def _perf_enable(self, on: bool) -> None:
        for st in self.threads.values():
            if st.perf is not None:
                try:
                    st.perf.enable(on)
                except OSError:
                    pass

    def _open_perf(self, st: _ThreadState, off: bool) -> None:
        """Give a thread its perf IP sampler: the main thread's pre-opened one, else a new one."""
        if self._perf_main is not None and st.tid == self.main_tid:
            st.perf, self._perf_main = self._perf_main, None
        else:
            try:
                st.perf = self._PerfIP.open(st.tid, PERF_PERIOD_NS)
            except Exception:
                st.perf = None
        if st.perf is not None and off:
            try:
                st.perf.enable(False)
            except OSError:
                pass
        if st.perf is not None and st.kst is not None:
            try:                          # its page faults from a perf counter from now on (kernel_time.py)
                st.kst.add_counter(st.tid)
            except (OSError, ValueError, IndexError):
                pass

    def _adopt_perf(self, off: bool) -> None:
        """perf became available: open it for the threads already being sampled."""
        for st in self.threads.values():
            if st.perf is None:
                self._open_perf(st, off)

    def _native_role(self):
        nt = self.native_threads
        return nt.active_role if nt is not None else None

    # ---------------------------------------------------------------------
    def _run(self) -> None:
        if self.use_perf:
            th = self._perf_thread = threading.Thread(target=self._setup_perf, name="inferscope-perf-setup", daemon=True)
            th.start()
            self.skip.add(th.ident)
        my_clk = self.my_clk = self._getclk(threading.get_ident())
        self.skip.add(threading.get_ident())
        getframes = self._frames
        clock = self._clock
        cputime = self._cputime
        getclk = self._getclk
        walk = C.walk
        sig = self._sig if (self._sig is not None and self._sig.active) else None
        main_ident = threading.main_thread().ident
        threads = self.threads
        oncpu_by_tid = self.oncpu_by_tid
        thread_ticks = self.thread_ticks
        scope_stacks = self.scope_stacks
        skip = self.skip
        idmap = self._native_ids()
        stop = self._stop
        sleep = self._sleep
        self.started_ns = clock()
        USER, FW = C.USER, C.FW
        names = C.DOMAIN_NAMES
        schedstat = _runq_ns(threading.get_native_id()) >= 0
        periodic, period_ns = self.periodic or (None, 0)
        probe = None
        main_tid = self.main_tid
        if self.probe_blocking:
            try:
                from .blocking import Probe
                self.blocking = Probe(self.buffer.append, _decides)
                probe = self.blocking.probe
            except Exception:
                probe = None
        next_periodic = 0
        per_tick = self.per_tick
        perf_maps = None        # set when the side thread has perf ready (_adopt_perf)
        try:
            import importlib._bootstrap as _bs
            module_locks = _bs._module_locks      # non-empty while a module import is in progress
        except (ImportError, AttributeError):
            module_locks = None
        importing_module = _import_probe(module_locks)
        ema_busy = 0.0          # moving average of the sampler CPU time per tick (ns), setup ticks excluded
        perf_off = False        # perf sampling switched off (while importing)
        last_tick = 0
        forced_ns = int(sys.getswitchinterval() * 1e9 * 0.9)
        short_s = _switch_interval_s()
        manage_switch = self._live and 0 < short_s < sys.getswitchinterval()
        next_resolve = 0
        kgate_fn = K.Gate() if (self.kernel_time and schedstat) else None
        next_native, native_period = 0, 0
        setup_thread = self._perf_thread
        active_get = threading._active.get     # ident -> Thread (its native id tells a reused ident)
        # the main thread's CPU clock read now: its first tick then classifies the interval since the
        # sampler started (a thread met at a tick is otherwise only registered there); the first tick can
        # come tens of ms late while start-up imports run, and a short program's window began in that gap
        # (zoo_disk_io at 6 iterations: 7-15 ms of a 42 ms window read 'other')
        # (start() reads it again once this thread runs: that reading is used when it came before the tick)
        perf_on_at = None       # when perf sampling last came on (adopted, or enabled after an import)
        pre = {}
        try:
            mclk = getclk(main_ident)
            pre[main_ident] = (cputime(mclk), clock(), -1)
        except Exception:      # noqa: BLE001 - no CPU clock for it: registered at its first tick as any thread
            pass
        ticked = False
        # (at least one tick: a program that ends before the first one - a 60 ms script on a loaded host,
        # the sampler thread's start-up still running - has its interval since start() classified then)
        # (and a final tick that began after stop(): a tick that was under way when stop() came - one that waited
        # 100+ ms for the GIL beside 3 spinning threads - must not be the last, or every thread's interval since
        # its previous tick is lost: zoo_gil read 100 % 'other' in 1 run of 3)
        final = False
        while not stop.is_set() or not ticked or (self._stop_at and not final):
            if not self._running.is_set():      # paused
                self._running.wait()
                if stop.is_set():
                    break
            # never catch up on missed ticks: always release the GIL for a full interval,
            # otherwise a late sampler would hold the GIL back-to-back and starve the workload.
            # While a module import runs (start-up, reported as one bucket) sample less often:
            # every tick takes the GIL from an import-heavy main thread.  Overhead budget: never
            # hold the GIL more than GIL_BUDGET of the wall time on average.
            interval = self.interval_ns
            iv = max(interval * IMPORT_RATE_DIVISOR if module_locks else interval, int(ema_busy / GIL_BUDGET))
            target = clock() + iv
            if not stop.is_set():
                sleep(iv / 1e9)
            t = clock()
            try:
                cpu0 = cputime(my_clk)
            except OSError:
                cpu0 = None
            setup = False       # this tick did one-off setup work: it does not pace the budget
            gil_free = (t - target) < GIL_WAIT_NS
            # Got the GIL after a short wait: a thread released it voluntarily (a blocking call, a
            # torch op) before the switch interval forced it to.  What that thread is doing now is
            # not a fair sample - the moment was chosen by its state (in the zoo's tokenizer loop,
            # ticks piled up on the model step: 15-20 % "user_code" for 2 % of the time).  An
            # isolated such tick keeps the thread's current class; immediate (gil_free) and forced
            # ticks, whose timing does not depend on what the thread runs, classify, and so do
            # consecutive voluntary ones (else a thread releasing the GIL every few ms would keep
            # its first class for ever).
            voluntary = not gil_free and (t - target) < forced_ns
            if self._stop_at and stop.is_set():
                final = True
                # the final tick, which stop() waits for: its intervals end when stop() was called (the
                # program's end), not after the sleep - the main thread waited in that join up to a tick
                # interval, read as 'waiting' at the end of the whole-run window (zoo_short60: 12 % of a
                # 100 ms window, truth 0)
                t = max(last_tick, min(t, self._stop_at))
                # (the GIL free at once says nothing then: the main thread waits in that join - read as
                # native code by the GIL heuristic while perf was still being set up, zoo_short60 read
                # 19 % cpu_compute for its pure-Python work once)
                gil_free = voluntary = False
            self.ticks += 1
            ticked = True
            if not module_locks and last_tick:   # steady-state rate (imports run slower on purpose)
                self.steady_ticks += 1
                self.steady_ns += t - last_tick
            if last_tick and t - last_tick > LONG_INTERVAL_TICKS * self.interval_ns:
                self.starved_at = t     # scope() edges then read every thread's CPU clock (api._cpu_mark)
            last_tick = self.last_tick_ns = t
            if perf_maps is None and self._perf_maps is not None:
                perf_maps = self._perf_maps
                self._adopt_perf(perf_off)
                setup = True
                perf_on_at = t
            if perf_maps is not None and bool(module_locks) != perf_off:
                perf_off = not perf_off
                self._perf_enable(not perf_off)
                perf_on_at = t
            if setup_thread is not None and not setup_thread.is_alive():
                # glibc gives a finished thread's pthread_t (= its Python ident) to the next thread
                # created: left in the skip set, the workload's next thread would never be sampled
                skip.discard(setup_thread.ident)
                setup_thread = None
            # perf still being set up (its first perf_event_open takes 20-35 ms, longer on a loaded
            # host): user code is judged by the GIL heuristic meanwhile, as it will be by perf (a
            # numpy-only program's BLAS ran 56 % unclassified before perf came, measured under load)
            perf_pending = perf_maps is None and setup_thread is not None
            torch_seen = self.torch_seen or ("torch" in sys.modules)
            self.torch_seen = torch_seen
            frames = getframes()
            seen = 0
            running = 0         # the program's threads on CPU in this tick's interval
            kgate = kgate_fn is not None and kgate_fn()
            t_tick = t
            for ident, frame in frames.items():
                t = t_tick
                if ident in skip:
                    continue
                seen += 1
                first_iv = False        # this tick classifies the main thread's interval since the sampler started
                st = threads.get(ident)
                tho = active_get(ident)
                if st is not None and tho is not None and tho._native_id not in (None, st.tid):
                    # the thread behind this ident ended and a new one reuses it (glibc reuses a
                    # finished thread's pthread_t): close the old one's run, register the new one
                    threads.pop(ident)
                    self._finish(st)
                    self._emit(st)
                    _close(st)
                    if self.blocking is not None:
                        self.blocking.forget(st.tid)
                    st = None
                if st is None:
                    tid = tho._native_id if tho is not None else None
                    if tid is None:
                        tid = idmap.get(ident)
                    if tid is None:
                        idmap = self._native_ids()
                        tid = idmap.get(ident, ident)
                    try:
                        clk = getclk(ident)
                        cpu = cputime(clk)
                    except (OSError, OverflowError):
                        clk, cpu = None, 0
                    p0 = pre.pop(ident, None) if clk is not None else None
                    if p0 is not None and self._pre is not None and self._pre[0] == ident:
                        p0 = self._pre[1:]       # read by start() (usually before this first tick)
                    born = thread_life.started.pop(tid, None) if p0 is None and clk is not None else None
                    if born is not None and not (self.started_ns <= born[0] <= t and born[1] <= cpu):
                        born = None       # began before the sampler (its CPU then is not in the run)
                    if born is not None:
                        # a thread begun since the sampler's previous tick: its interval from its run()'s start
                        # (thread_life), not from this tick - the CPU it ran before its first tick counts
                        st = threads[ident] = _ThreadState(tid, clk, born[1], born[0])
                    else:
                        st = threads[ident] = _ThreadState(tid, clk, p0[0], p0[1]) if p0 else _ThreadState(tid, clk, cpu, t)
                    if schedstat:
                        try:
                            st.rq_t = ProcFile(f"/proc/self/task/{tid}/schedstat", 128)
                            st.rq, st.rq_at = int(st.rq_t.read().split()[1]), t
                            if born is not None:
                                st.rq, st.rq_at = 0, born[0]   # all its run-queue delay is since its start
                            if p0 is not None and p0[2] >= 0:
                                # its run-queue delay at the sampler's start too: the first interval's
                                # runnable time is CPU contention, not a wait (zoo_short60 under load: 19 ms
                                # of run queue in its work read off-CPU)
                                st.rq, st.rq_at = p0[2], p0[1]
                        except (OSError, ValueError, IndexError):
                            _close(st)
                    if kgate_fn is not None:
                        try:
                            st.kst = K.ThreadStat(tid)
                        except (OSError, ValueError, IndexError):
                            st.kst = None
                    if perf_maps is not None:
                        self._open_perf(st, perf_off)
                    oncpu_by_tid.setdefault(tid, 0)
                    thread_ticks.setdefault(tid, [0, 0])
                    setup = True
                    if p0 is None:
                        # what its stack says it runs, for an interval no later tick classifies (_finish: the
                        # sampler starved of the GIL ticked once in a spinning thread's life, 1 run in 2)
                        try:
                            dom0, st.on_label = walk(frame, scope_stacks.get(ident))
                            st.on_cls = names[dom0]
                        except Exception:
                            pass
                        continue
                    # (the main thread read at the sampler's start: this tick classifies its interval)
                    if module_locks and importing_module(ident) is not None:
                        # but not from inside an import: the innermost module now (numpy under torch) would
                        # get all of the start-up imports before it (an unscoped zoo read 'import numpy' as the
                        # top import) - registered only, as any thread
                        st.cpu, st.t, st.start, st.end = cpu, t, t, t
                        continue
                    first_iv = True
                marks = None
                if st.clk is not None:
                    try:
                        cpu = cputime(st.clk)
                    except OSError:
                        cpu = st.cpu
                    else:
                        # the thread's interval ends when its CPU clock was read, not when the tick began: a
                        # tick that loses the GIL part-way (3 Python threads spinning beside the main thread:
                        # 20-40 ms at a time) read the later threads' CPU clocks that much later, and their CPU
                        # of that time went into the interval before (zoo_gil: 23 ms of the loop's CPU placed
                        # before the window, user code 4.6 % vs 27 % true)
                        tn = clock()
                        # (not past stop()'s call, the program's end: the main thread then waits in its join)
                        t = max(st.t, min(tn, self._stop_at)) if self._stop_at else max(t, tn)
                        cm = self.cpu_marks.get(ident)
                        if cm:                  # its CPU readings at scope edges up to now (_split_at_marks)
                            k = 0
                            while k < len(cm) and cm[k][0] <= t:
                                k += 1
                            marks = cm[:k]
                            del cm[:k]
                    dcpu = cpu - st.cpu
                    dt = t - st.t
                    busy = dcpu
                    rqn = 0
                    # the smallest part kept: SPLIT_MIN_FRACTION of the interval; of a long one (the sampler
                    # starved) SPLIT_MIN_NS - a 10 % floor of a 100 ms interval dropped zoo_gil's 5-13 % run queue
                    split_ns = dt * SPLIT_MIN_FRACTION
                    if dt > LONG_INTERVAL_TICKS * self.interval_ns:
                        split_ns = min(split_ns, SPLIT_MIN_NS)
                    # the previous interval ended off CPU (a pending off part, or an open 'waiting' run): a wait
                    # under way at its tick is counted by schedstat only now (layout.owed_run_queue)
                    owed = st.rq_at == st.t and ((bool(st.pending) and st.pending[-1][5] != 0)
                                                 or (not st.pending and st.cls is CLS_WAITING))
                    if (dcpu < dt - split_ns or owed) and st.rq_t is not None:
                        # runnable but descheduled (CPU contention) is not "waiting" for I/O: the
                        # run-queue delay from schedstat (fd kept open; read only when the thread
                        # was off-CPU for part of the interval, or of the previous one) is its own part (CLS_RUNQ)
                        try:
                            rq = int(st.rq_t.read().split()[1])
                            if st.rq >= 0:
                                if st.rq_at == st.t:      # reading from the previous sample: exact
                                    rqn = rq - st.rq
                                else:                     # older reading: at most the interval's rest
                                    rqn = min(rq - st.rq, dt - dcpu)
                                full = rqn
                                rqn = max(0, min(rqn, dt - dcpu))
                                if full > rqn and owed:
                                    # more than this interval can hold: a wait under way at the previous tick,
                                    # counted by the kernel only when it ended (layout.owed_run_queue)
                                    if st.pending:
                                        owed_run_queue(st.pending, full - rqn)
                                    else:
                                        self._owed_open_run(st, full - rqn)
                                busy = dcpu + rqn
                            st.rq, st.rq_at = rq, t
                        except (OSError, ValueError, IndexError):
                            _close(st)
                    if rqn < split_ns:
                        rqn = 0
                    st.cpu = cpu
                    oncpu = busy * 4 >= dt
                    # the interval's off-CPU part (issue 16 item 3): its length is known from the
                    # thread's CPU clock; on-CPU intervals put it first (the thread runs at the
                    # tick), off-CPU ones last (it ran, then blocked)
                    off = dt - busy if dt > 0 else 0
                    if off < split_ns or off > dt - split_ns:
                        off = 0
                    kf = kns = 0
                    kblk = st.kblk                      # blocked in the previous interval
                    st.kblk = not oncpu or off != 0
                    kstep = st.kst is not None and dcpu > 0
                else:
                    oncpu = True
                    off = rqn = kf = kns = 0
                    kblk = kstep = False
                if probe is not None:
                    # why it is off-CPU (collect/blocking.py): the syscall, file and frame it blocks in at
                    # this tick, for threads off-CPU for part of the interval since their previous tick
                    # (the label covers that interval); a mark when it changes
                    try:
                        probe(st.tid, st.t, frame, not oncpu or off != 0,
                              st.tid != main_tid and not scope_stacks.get(ident))
                    except Exception:
                        probe = None
                    else:
                        if not oncpu or off:
                            st.kio = self.blocking.io_wait(st.tid)
                if not module_locks:    # per-thread achieved rate outside imports: [ticks, ns since the previous]
                    tt = thread_ticks[st.tid]
                    tt[0] += 1
                    tt[1] += t - st.t
                if kstep:
                    # kernel-mode CPU (kernel_time.py): the thread's page faults (perf counter) and, where
                    # the I/O rule may apply and the process's counters moved, its kernel time (after the
                    # off-CPU probe: the stat read holds the GIL ~40-85 us, and a thread back from its I/O
                    # call waiting for it was probed in futex - the GIL - instead of its preadv)
                    try:
                        kf, kns = st.kst.step(dcpu, not oncpu and not off, (kblk or st.kblk) and st.kio, kgate)
                    except (OSError, ValueError, IndexError):
                        st.kst.close()
                        st.kst = None
                prev_t, st.t = st.t, t
                label = None
                fallback = None
                fair = False        # the frame was taken at a uniform moment (signal), not at a GIL release
                # in an import (this thread owns a module lock): library loading = framework
                mod = importing_module(ident) if module_locks else None
                if mod is not None:
                    dom, label = FW, ("import " + mod, 0)
                else:
                    dom, label = walk(frame, scope_stacks.get(ident))
                    rec = sig.latest if (ident == main_ident and sig is not None) else None
                    if rec is not None and rec[1] is not None and rec[0] > prev_t and rec[1][0] == dom:
                        # the main thread's function at a signal in this interval (sigframes.py): taken
                        # at a uniform moment, not where the thread let the sampler have the GIL.  Only
                        # the function (culprit tables): the class stays the sampler's rule's (perf IP
                        # samples split the interval) - taking the class too moved 8 points of a Rust
                        # tokenizer's time to cpu_compute and added noise (bench/README.md)
                        label = rec[1][1]
                        fair = True
                if not oncpu and not off:
                    cls = CLS_WAITING
                else:
                    if oncpu:
                        oncpu_by_tid[st.tid] += 1
                        running += 1
                    if mod is not None:
                        cls = CLS_FRAMEWORK
                    elif gil_free and label is None and dom == USER and st.perf is None and st.cls is not None:
                        # without perf: the GIL free at once while the thread has nothing but
                        # stdlib / unknown-library frames on its stack (a Pool worker on its task
                        # queue, a lock, a pipe) is a blocking wait, not native compute; its CPU in
                        # the interval went to what it did before (measured: 40 % of a spawn
                        # worker's resize time read as cpu_compute)
                        cls = KEEP
                    elif dom == FW or (dom == USER and (torch_seen or st.perf is not None or perf_pending)):
                        # Python vs native code by role: decided from the perf IP samples at the next
                        # drain (pending: numeric libraries -> cpu_compute, native tokenizers ->
                        # tokenization, the rest the stack's class; numpy/BLAS-only programs too), or
                        # without perf by the GIL heuristic, only once torch is imported
                        fallback = names[dom]
                        if st.perf is None:
                            cls = CLS_COMPUTE if gil_free else fallback
                        else:
                            cls = None
                    else:
                        cls = names[dom]
                vol = voluntary and oncpu
                if vol and not st.prev_vol and (st.cls is not None or st.pending):
                    # an isolated voluntary tick: not classified (consecutive ones are - a thread
                    # that releases the GIL every few ms is only ever seen at release points)
                    if st.last_fb is not None:    # the previous tick was split by perf: so is this
                        cls, label, fallback = None, None, st.last_fb
                    else:
                        cls, label = KEEP, (label if fair else None)   # a signal's function still names it
                else:
                    st.last_fb = fallback if cls is None else None
                st.prev_vol = vol
                if cls is KEEP and (kf or ((kblk or off) and st.kio)) and fallback is not None and st.perf is not None:
                    # page faults in the interval, or it follows / contains a wait in an I/O call (which
                    # releases the GIL: the tick is voluntary): its kernel time is not the previous
                    # class's - the kernel rules decide (perf resolver, kernel_time.kernel_class).  Not
                    # after GIL/lock waits: zoo_mixed_culprit's clean_rows read 0 % in 2 runs of 6
                    cls = None
                if not oncpu and not off:
                    rqn = 0
                if st.pending or cls is None or off or rqn:
                    # the off-CPU part of the interval comes first when the thread is on CPU at the tick, else
                    # last; in the first interval since the sampler started, always last: its CPU work is
                    # start-up (imports), before whatever blocks (zoo_disk_io read that CPU as user code in its
                    # window, -18 points once)
                    # (last: its CPU time where perf sampled all of the interval - the thread's kernel share by perf)
                    ent = (t, cls, label, fallback, gil_free, off if (oncpu and not first_iv) else -off, rqn, kf, kns,
                           (2 if st.kio else 1) if (kblk or off != 0) else 0,
                           dcpu if (st.clk is not None and not perf_off and perf_on_at is not None
                                    and prev_t >= perf_on_at) else -1, True)
                    cut = bool(marks) and st.clk is not None and any(prev_t < m[0] < t for m in marks)
                    if (off or rqn) and (cut or (not kf and not kns)) and t - prev_t > LONG_INTERVAL_TICKS * self.interval_ns:
                        # (with faults or kernel time only when cut at CPU readings: each part gets its share
                        # of them by its CPU - a thread's first interval holds its stack's faults, and laid as
                        # one block it put 175 ms of a spinner's CPU inside a window that began after it)
                        st.pending.extend(_split_at_marks(ent, prev_t, cpu - dcpu, cpu, marks, self.interval_ns)
                                          if cut else _pieces(ent, prev_t, self.interval_ns))
                    else:
                        st.pending.append(ent)
                elif cls is KEEP:
                    self._apply(st, t, st.cls, label if fair else None)
                else:
                    # off CPU for the whole interval, or on CPU all of it after a wait, by the thread's CPU clock: the
                    # change came at the previous tick, not at the midpoint (a class read from the frame only is
                    # known at the tick: the midpoint rule).  The midpoint gave half of each fully off-CPU interval
                    # to the class before it: zoo_gil (20-50 ms intervals) read 53.6 ms CPU in a window where the
                    # thread ran 40.8 ms in all
                    self._apply(st, t, cls, label, exact=st.clk is not None and (
                        cls is CLS_WAITING or st.cls is CLS_WAITING or st.cls is CLS_RUNQ))
                self.samples += 1
            t = t_tick
            if manage_switch:
                # one thread of the program on CPU: the short switch interval (SWITCH_INTERVAL_S); more: the
                # program's own - threads that fight for the GIL would hand it over ten times as often
                # (zoo_gil: the main thread's GIL wait became run-queue time and gil_contention vanished).
                # Idle threads (an executor's, a queue listener) do not count.
                cur = sys.getswitchinterval()
                sw = self._switch
                if sw is not None and cur != sw[1]:          # the program set its own: leave it alone
                    manage_switch, self._switch = False, None
                elif running <= 1 and sw is None:
                    self._switch = (cur, None)
                    sys.setswitchinterval(short_s)
                    self._switch = (cur, sys.getswitchinterval())
                    forced_ns = int(self._switch[1] * 1e9 * 0.9)
                elif running > 1 and sw is not None:
                    sys.setswitchinterval(sw[0])
                    self._switch = None
                    forced_ns = int(sw[0] * 1e9 * 0.9)
            # the budget paces the per-tick work; the periodic work below is per unit of time
            pcpu = 0
            if probe is not None:          # the off-CPU probe has its own budget (blocking.PROBE_BUDGET)
                pcpu, self.blocking.tick_cpu = self.blocking.tick_cpu, 0
            if not setup and cpu0 is not None:
                try:
                    ema_busy += (cputime(my_clk) - cpu0 - pcpu - ema_busy) * 0.05
                except OSError:
                    pass
            if t >= next_resolve:
                next_resolve = t + RESOLVE_NS
                for st in threads.values():
                    if st.pending:
                        self._resolve(st)
                self.kernel_totals.flush(self.buffer.append, t)
            if t >= next_native and perf_maps is not None and not perf_off and self.follow_native:
                if self.native_threads is None:
                    from .native_threads import NATIVE_PERIOD_NS, NativeThreads
                    self.native_threads = NativeThreads(self.buffer.append, PERF_PERIOD_NS, self.started_ns)
                    native_period = NATIVE_PERIOD_NS
                next_native = t + native_period
                try:
                    self.native_threads.tick(t, perf_maps)
                except Exception:
                    self.follow_native = False   # never let the side collector stop sampling
            if per_tick is not None:
                try:
                    per_tick(t)
                except Exception:
                    per_tick = None
            if periodic is not None and t >= next_periodic:
                next_periodic = t + period_ns
                try:
                    periodic(t)
                except Exception:
                    pass
            if seen != len(threads):
                live = set(frames)
                for ident in [i for i in threads if i not in live]:
                    gone = threads.pop(ident)
                    self._finish(gone, self.cpu_marks.pop(ident, None))
                    self._emit(gone)
                    _close(gone)
                    if self.blocking is not None:
                        self.blocking.forget(gone.tid)
                # scope() edges' CPU readings of threads that ended (bounded per thread, not in number of threads)
                for ident in [i for i in self.cpu_marks if i not in live]:
                    self.cpu_marks.pop(ident, None)
            frames = frame = None
            self.busy_ns += clock() - t
        try:
            self.cpu_ns = cputime(my_clk)
        except OSError:
            pass

    def own_cpu_ns(self) -> int:
        clk = getattr(self, "my_clk", None)
        if clk is not None and self._thread is not None and self._thread.is_alive():
            try:
                return time.clock_gettime_ns(clk)
            except OSError:
                pass
        return self.cpu_ns
