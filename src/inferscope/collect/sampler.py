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
  tokenizers   instruction pointer (perfip.py; 1 sample per 1 ms of the thread's CPU time, user
               space only, unprivileged at perf_event_paranoid <= 2), by the role of the shared
               object each IP falls in (perfip.role_of): the fractions of the IP samples taken
               between the previous tick and this one in numeric libraries (torch, any BLAS/OpenMP,
               numpy's/scipy's compiled loops, JIT code) and in native tokenizers (HF tokenizers'
               Rust extension, sentencepiece, tiktoken) split that interval into cpu_compute,
               tokenization and the stack's class; samples in libc/other extensions right after a
               native library's are that library's, the others follow the mix of the classified ones; an interval with no classified sample keeps the thread's last
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

import gc
import sys
import threading
import time

from .. import thresholds as T
from . import classify as C
from . import kernel_time as K
from . import thread_life
from .layout import LONG_INTERVAL_TICKS, SPLIT_MIN_NS, _pieces, _split_at_marks, owed_run_queue
from .perfip import COMPUTE, OTHER, TOKENIZER
from .rawio import ProcFile
from .facts import FactLog
from .facts import enabled as _facts_enabled
from .resolve import decide, read_samples, resolve  # noqa: F401 - resolve: re-exported
from .sampler_loop import run
from .sampler_perf import PerfMixin
from .sampler_threads import ThreadsMixin
from .thread_state import (CLS_COMPUTE, CLS_FAULTS, CLS_FRAMEWORK, CLS_RUNQ, CLS_TOKENIZATION, CLS_WAITING, CPU_SAMPLE,
                           GIL_BUDGET,
                           GIL_WAIT_NS, IMPORT_RATE_DIVISOR, KEEP, PERF_PERIOD_NS, RESOLVE_NS, SPLIT_MIN_FRACTION,
                           SWITCH_INTERVAL_S, _close, _decides, _import_probe, _runq_ns, _switch_interval_s, _ThreadState,
                           perf_kernel_share)

# Sampler's code is split over thread_state.py (constants, helpers, _ThreadState), resolve.py (_resolve),
# sampler_perf.py and sampler_threads.py (mixins), sampler_loop.py and sampler_tick.py (_run); every name
# this module had stays reachable here.  The tick loop (sampler_loop.run) reads the instance's gil_budget
# (GIL_BUDGET by default) at every tick: setting it paces a running sampler (bench/bench_sampler.py).
__all__ = [
    "C", "CLS_COMPUTE", "CLS_FRAMEWORK", "CLS_RUNQ", "CLS_TOKENIZATION", "CLS_WAITING", "COMPUTE", "CPU_SAMPLE",
    "GIL_BUDGET", "GIL_WAIT_NS", "IMPORT_RATE_DIVISOR", "K", "KEEP", "LONG_INTERVAL_TICKS", "OTHER",
    "PERF_PERIOD_NS", "ProcFile", "RESOLVE_NS", "SPLIT_MIN_FRACTION", "SPLIT_MIN_NS", "SWITCH_INTERVAL_S", "Sampler",
    "T", "TOKENIZER", "_ThreadState", "_close", "_decides", "_import_probe", "_pieces", "_runq_ns",
    "_split_at_marks", "_switch_interval_s", "owed_run_queue", "perf_kernel_share", "thread_life",
]

def _current_frames() -> dict:
    """``sys._current_frames()`` with the garbage collector off: CPython 3.11 holds the runtime's thread-list lock
    while it builds the dict, and a collection that allocation triggers, freeing a ``threading.local``, takes that
    lock again (local_clear) - the sampler deadlocked with the GIL held and every thread of the program stopped
    (py-spy --native: gc_collect_main under _PyThread_CurrentFrames waiting on a lock, the suite hung once in an
    in-process test).  No other thread runs in between (the call keeps the GIL), so a program's own gc.disable()
    is not undone."""
    if not gc.isenabled():
        return sys._current_frames()
    gc.disable()
    try:
        return sys._current_frames()
    finally:
        gc.enable()


class Sampler(ThreadsMixin, PerfMixin):
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
        self._frames = frames or _current_frames
        self._cputime = cputime or time.clock_gettime_ns
        self._getclk = getclk or time.pthread_getcpuclockid
        self.interval_ns = int(1e9 / hz) if hz > 0 else 0
        self.gil_budget = GIL_BUDGET    # the sampler's own CPU per tick, as a share of the interval (read every tick)
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
        self.perf_stack = False     # the main thread's perf samples carry its user stack (libc callers named)
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
        self.rule_ns = None    # {(rule, class): ns} laid by each rule of rules.py (a replay's --rules), or None
        # the decisions' inputs, recorded for an offline replay (facts.py; INFERSCOPE_FACTS=1), or None
        self.facts = FactLog(self.interval_ns, PERF_PERIOD_NS) if (_facts_enabled() and self.interval_ns) else None

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
        sig, main = self._sig, self.threads.get(threading.main_thread().ident)
        if sig is not None and main is not None and main.perf is not None:
            # the signals' records since the last tick, for the main thread's last intervals (sigframes.py)
            sig.drain(main.sigobs, C.DOMAIN_NAMES)
        for ident, st in list(self.threads.items()):
            self._finish(st, self.cpu_marks.get(ident), alive=True)
            if self.facts is not None:
                self.facts.close(st, True)
            self._emit(st)
            st.cls = None
            _close(st)
        if self._live and self.started_ns:
            for st in self._ended_unseen():
                self._finish(st)
                if self.facts is not None:
                    self.facts.close(st, False)
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
            st.on_cls = CLS_COMPUTE if cls is CLS_FAULTS else cls
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

    def _resolve(self, st: _ThreadState) -> None:
        """Decide the pending ticks of one thread from its perf IP samples, in order (resolve.py); with facts
        kept, what the decision reads is recorded first (facts.py)."""
        pend = st.pending
        if not pend:
            return
        st.pending = []
        samples = read_samples(self, st)
        if self.facts is not None:
            self.facts.drain(self, st, pend, samples)
        decide(self, st, pend, samples)

    # ---------------------------------------------------------------------
    def _run(self) -> None:
        """The sampler thread's tick loop (sampler_loop.py; the per-thread part of a tick: sampler_tick.py)."""
        run(self)

    def signal_counts(self) -> tuple[int, int] | None:
        """(handled, late) timer signals of the main thread (sigframes.py); None when they were not used."""
        sig = self._sig
        return (sig.count, sig.stale) if sig is not None else None

    def own_cpu_ns(self) -> int:
        clk = getattr(self, "my_clk", None)
        if clk is not None and self._thread is not None and self._thread.is_alive():
            try:
                return time.clock_gettime_ns(clk)
            except OSError:
                pass
        return self.cpu_ns
