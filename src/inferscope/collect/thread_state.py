"""The live sampler's constants, small helpers and per-thread state (_ThreadState); collect/sampler.py
explains the classes and the tick rules, and re-exports every name here."""
from __future__ import annotations

import os

from .. import thresholds as T
from .. import vocab as V
from . import classify as C

CPU_SAMPLE = 11   # SpanKind.CPU_SAMPLE
GIL_WAIT_NS = T.GIL_WAIT_NS   # (thresholds.py, "live sampler's rules")
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
# One IP sample per 1 ms of a thread's CPU time (~5 per tick at 200 Hz).  The samples' classes are the
# estimate of each interval's native/Python split, so their count sets its noise: at 4 ms a 260-450 ms zoo
# window held 60-110 samples, +-4-6 points at 1 sigma, and its compute share read -8..+18 points over runs
# of py_between_ops_1.7ms / mixed_culprit; at 1 ms -1..+4 (5 interleaved pairs each, 2026-11-27).  Cost: a
# timer interrupt in the sampled thread and ~1-3 us of parsing each - a pure-Python loop ran 1.003x with
# 1 ms sampling vs none in-process (15 rounds, noise +-0.3 %), ~1000 samples/s per busy thread.
# INFERSCOPE_PERF_PERIOD_US overrides (bench A/B).  Sampling is switched off (ioctl) while a module import
# runs: import ticks are "framework" whatever the IP says, and start-up is most of a short inference
# script's life.
PERF_PERIOD_NS = 1_000_000


def _perf_period_ns() -> int:
    """INFERSCOPE_PERF_PERIOD_US (100 us - 1 s; a value that is no number keeps the default: the variable is read in
    the profiled program, where an exception would be the program's)."""
    try:
        us = float(os.environ.get("INFERSCOPE_PERF_PERIOD_US", "") or PERF_PERIOD_NS / 1000)
    except ValueError:
        return PERF_PERIOD_NS
    return int(min(1e6, max(100.0, us)) * 1000) if us == us else PERF_PERIOD_NS


PERF_PERIOD_NS = _perf_period_ns()
# Bytes of user stack a Python thread's IP samples carry, to name the caller of a libc sample (perfip.py
# STACK_BYTES, caller_kind); INFERSCOPE_PERF_STACK=0 turns it off (bench A/B).
PERF_STACK_BYTES = 0 if os.environ.get("INFERSCOPE_PERF_STACK", "") == "0" else 512
# Overhead budget: the sampler may hold the GIL at most this fraction of the wall time on average
# (its tick interval is stretched beyond 1/cpu_sampling_frequency_hz when ticks are expensive).
# Measured on the 2-vCPU VM (bench/README.md): a tick holds the GIL ~20-120 us (more with cold
# caches, many threads or deep stacks); the budget only binds when ticks are that slow.  The
# larger cost of a tick is waiting for the GIL (up to the 5 ms switch interval), which a thread
# that releases the GIL often (torch ops) pays as extra wake-ups: hence the modest default rate.
GIL_BUDGET = 0.015   # (each Sampler's gil_budget starts at this; the tick loop reads the instance's)
# The budget is paced by the sampler's own CPU time per tick, not its wall time, and one-off
# setup ticks (a new thread registered: its CPU clock, schedstat file and perf_event opened; perf
# adopted for the threads already seen) do not feed it.  With wall time, a sampler descheduled
# while holding the GIL on a loaded host, or one 30 ms perf_event_open, stretched the interval to
# 100+ ms for the next second (issue 16: 14.6 Hz instead of 200 Hz; in test_collect a 150 ms
# scope("tokenize") got no tick at all).
# Pending ticks are decided from the perf ring every RESOLVE_NS (a drain costs ~50 us with cold
# caches, mostly fixed: per tick it was a third of the sampler's time holding the GIL).  The
# ring (PAGES in perfip.py) holds ~1300 samples = 1.3 s of one thread's CPU time (STACK_PAGES with the user stack:
# ~470 samples, ~0.5 s).
RESOLVE_NS = 100_000_000
SPLIT_MIN_FRACTION = T.SPLIT_MIN_FRACTION   # (thresholds.py, "live sampler's rules")
CLS_WAITING = V.CLS_WAITING
# Runnable but not running (schedstat run-queue delay): the thread waits for a CPU, not for I/O or a
# lock.  Its own class (a part of the breakdown's waiting), placed right before the interval's on-CPU
# part (a thread waits for a CPU after it wakes up); below SPLIT_MIN_FRACTION of the interval it stays
# in the on-CPU part.  Without it, CPU starvation read as the program's own work: a disk-I/O loop
# beside other jobs read 31-56 % cpu_compute (its post-I/O run-queue time) for 10 % true CPU.
CLS_RUNQ = V.CLS_RUN_QUEUE
CLS_COMPUTE = V.CLS_CPU_COMPUTE
# Page-fault kernel time of native code (rules_perf.fault_kernel_part): the kernel's memory work for numpy/torch
# touching fresh pages, a part of the breakdown's cpu_compute of its own (issue 45: it read as plain compute).  A
# thread's class after such a part is still compute: KEEP continues CLS_COMPUTE (rules.keep_current).
CLS_FAULTS = V.CLS_PAGE_FAULTS
CLS_FRAMEWORK = V.CLS_FRAMEWORK
CLS_TOKENIZATION = V.CLS_TOKENIZATION
# the classes a tick's Python frame gives (classify.DOMAIN_NAMES' values)
PY_CLASSES = frozenset(V.PYTHON_CLASSES)
KEEP = "keep"   # pending-tick marker: the tick continues the thread's current class


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
    try:
        us = float(os.environ.get("INFERSCOPE_SWITCH_INTERVAL_US", SWITCH_INTERVAL_S * 1e6))
    except ValueError:
        us = SWITCH_INTERVAL_S * 1e6
    return max(0.0, us / 1e6)


class _ThreadState:
    __slots__ = ("clk", "cls", "cpu", "end", "label", "last_fb", "lines", "n", "native", "native_fresh", "native_tok", "pending",
                 "kblk", "kio", "kst", "perf", "perf_at", "pcpu", "pn", "prev_vol", "py_last", "rq", "sigobs", "rq_at", "rq_t", "start", "t", "tid",
                 "on_cls", "on_label", "facts")

    def __init__(self, tid, clk, cpu, t):
        self.tid = tid
        self.clk = clk
        self.cpu = cpu
        self.t = t
        self.cls = None
        self.start = t
        self.label = None  # the current run's function ("file:func"; one function per run)
        self.n = 0         # ticks that named it
        self.lines = {}    # its line at those ticks -> count
        self.rq = -1      # run-queue wait (ns) from /proc schedstat
        self.rq_t = None  # ProcFile of /proc/self/task/<tid>/schedstat
        self.kblk = False  # its previous interval was (partly) off-CPU: kernel CPU after a wake-up is the call's
        self.kio = False  # its last blocking call (blocking.py probe) was an I/O call
        self.kst = None   # kernel_time.ThreadStat (faults, kernel time) of /proc/self/task/<tid>/stat
        self.pcpu = 0.0   # CPU time (ns) and user-space perf IP samples of its intervals with perf on, decaying
        self.pn = 0.0     # sums (KERNEL_PERF_SHARE_CPU_NS): its kernel share by perf (perf_kernel_share)
        self.rq_at = 0    # sample time of the rq reading
        self.perf = None  # PerfIP of this thread (perf_event task-clock IP samples)
        self.perf_at = 0  # when it was opened (the tick that registered the thread, or adopted perf)
        self.native = None  # last perf verdict: fraction of IP samples in numeric libraries (role COMPUTE)
        self.native_tok = 0.0  # ... and in native tokenizers (role TOKENIZER)
        self.native_fresh = False  # the last perf-decided interval had classified (non-libc) samples
        # ticks waiting for the next perf drain: (t, cls | None (perf decides) | KEEP, label, fallback, gil_free)
        self.pending = []
        self.end = t        # end of the current run = time of the last tick applied
        self.last_fb = None  # fallback class of the last tick if perf split it, else None
        self.prev_vol = False  # the previous tick got the GIL from a voluntary release
        self.sigobs = []     # (t_ns, Python class) of the main thread at timer signals (sigframes.py)
        self.py_last = None  # the Python class of its last resolved tick (resolve: interpreter samples near it)
        self.on_cls = self.on_label = None  # the class and (function, line) of its last on-CPU run (_finish)
        self.facts = None    # its event log when facts are kept (facts.py)

