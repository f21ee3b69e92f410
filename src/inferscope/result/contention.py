"""Contention (the GIL, page-fault storms, blocking calls) and garbage-collection pauses (live runs)."""

from typing import Optional

from .base import _S


class GilThread(_S):
    thread: str
    python_ms: float               # the thread's on-CPU Python samples in the window
    overlap_ms: float              # ... while the critical thread was off-CPU
    function: Optional[str]        # its hottest function during that overlap
    file: Optional[str]


class GilFunction(_S):
    function: str                  # a function of the other threads' Python
    file: str
    thread: str                    # the thread where it overlapped the waits most
    overlap_ms: float              # its sampled time inside the critical thread's off-CPU time, all threads
    threads: int                   # threads it ran on there


class GilWait(_S):
    critical_waiting_ms: float
    waiting_while_python_ms: float  # upper bound of the critical thread's GIL wait
    pct_of_window: float
    pct_of_waiting: float
    python_threads: int
    threads: list[GilThread]
    basis: str
    functions: list[GilFunction] = []   # by function over all the other threads, largest first (the culprit)
    bin_ms: Optional[float] = None  # waiting and Python matched per bin of this width (live: two sampler ticks)


class FaultFunction(_S):
    function: str
    file: str
    thread: str
    ms: float                      # its sampled time inside the storm intervals
    kernel_ms: Optional[float] = None   # kernel time of storm tick intervals charged to it (live runs)


class FaultStorms(_S):
    intervals: int                 # counter intervals at >= rate_threshold_per_s
    ms: float                      # their length in the window
    faults: int
    functions: list[FaultFunction]  # the critical thread's sampled functions inside them
    rate_threshold_per_s: float
    kernel_ms: Optional[float] = None   # kernel time of the storm tick intervals charged to sampled functions
    ranked_by: str = "ms"          # "kernel_ms" when the tick-level kernel time series was recorded


class BlockingCall(_S):
    kind: str                      # io | lock | gil | sleep | poll | other
    syscall: str                   # e.g. pread64, fsync, futex, clock_nanosleep
    frame: Optional[str]           # the waiting Python frame "file:line function" (innermost non-library)
    via: Optional[str]             # the innermost frame when it differs (a stdlib wrapper)
    thread: str
    ms: float
    pct_of_window: float
    path: Optional[str]            # the file with the most time (fd calls; openat's path argument)
    files: int                     # distinct files of this call site in that directory
    flags: list[str]               # open flags that make I/O wait: O_DIRECT, O_DSYNC, O_SYNC, O_APPEND
    size: Optional[int]            # most common byte count of read/write/pread64/pwrite64
    timed: Optional[bool]          # futex: the wait had a timeout


class BlockingOther(_S):
    thread: str
    state: str                     # "off-CPU in <syscall> at <frame>" | "running <class> (<function>)" | "off-CPU"
    ms: float                      # its time in that state during the critical thread's lock waits
    pct_of_lock_wait: float


class BlockingSyscall(_S):
    syscall: str
    kind: str
    ms: float


class Blocking(_S):
    """Live runs: the critical thread's off-CPU time by system call, file and frame (analyze/blocking.py)."""
    waiting_ms: float
    attributed_ms: float
    io_ms: float
    io_pct_of_window: float
    lock_ms: float                 # futex waits while no other thread of the process ran Python
    lock_pct_of_window: float
    futex_ms: float
    python_overlap_ms: float
    gil_ms: float                  # futex waits with a deadline within the switch interval (the GIL)
    sleep_ms: float
    poll_ms: float
    other_ms: float
    by_syscall: list[BlockingSyscall]
    calls: list[BlockingCall]
    lock_others: list[BlockingOther]
    basis: str


class Contention(_S):
    """Live runs: the GIL, page-fault storms and blocking calls (analyze/contention.py, analyze/blocking.py)."""
    gil: Optional[GilWait]
    page_faults: Optional[FaultStorms]
    blocking: Optional[Blocking] = None


class GcGeneration(_S):
    generation: int                # 0, 1, 2 (2: full collection)
    count: int
    total_ms: float                # clipped to the window
    longest_ms: float


class GcThread(_S):
    thread: str                    # the thread that ran the collections (its track name)
    tid: int
    count: int
    total_ms: float
    pct_of_window: float
    longest_ms: float


class GcPause(_S):
    thread: str
    generation: int
    ms: float
    offset_ms: float               # from the window's start
    collected: Optional[int]       # objects the collection freed
    uncollectable: Optional[int]


class GcRun(_S):
    """The collector's whole-run counters: every collection, short ones included."""
    collections: list[int]         # per generation 0, 1, 2
    total_ms: list[float]
    mean_us: list[Optional[float]]
    not_recorded: int              # long pauses beyond the collector's cap (counted, no span)
    thresholds: Optional[list[int]]   # gc.get_threshold() at the end of the run
    frozen: Optional[int]          # gc.get_freeze_count()
    gc_enabled: Optional[bool]


class GcPauses(_S):
    """Live runs: Python garbage-collection pauses in the window (analyze/gc_pauses.py)."""
    count: int
    total_ms: float
    pct_of_window: float
    longest_ms: float
    longest_generation: Optional[int]
    longest_thread: Optional[str]
    record_min_ms: Optional[float]
    by_generation: list[GcGeneration]
    by_thread: list[GcThread]
    longest: list[GcPause]
    run: Optional[GcRun]
    basis: str
