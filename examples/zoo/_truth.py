"""Self-timed truth for the planted zoo (no dependency on inferscope: runs unprofiled too).

    from _truth import phase, gap
    gap("framework_overhead/framework_python")      # what time between phases is (optional)
    with phase("tokenize", expect="cpu_preprocessing/tokenization"):
        ...

Each phase records perf_counter_ns start/end (CLOCK_MONOTONIC, the clock of a live InferScope
trace), the thread's CPU time (time.thread_time_ns) and its run-queue delay (schedstat: runnable but
not running, i.e. waiting for a CPU on a busy host) on the thread that runs it.  At exit the
phases are written as JSON to the path in $ZOO_TRUTH (atomically) if it is set.  ``expect`` is
the breakdown CATEGORY or CATEGORY/PART the phase should land in (analyze/breakdown.py).
"""
from __future__ import annotations

import atexit
import json
import os
import threading
import time
from contextlib import contextmanager

_PHASES: list[dict] = []
_MARKS: dict[int, list] = {}          # native tid -> [[perf_counter_ns, thread_time_ns], ...] (cpu_mark)
_LOCK = threading.Lock()
_META: dict = {"gap": None}


def gap(expect: str | None) -> None:
    """Declare the class of window time covered by no phase (None: reported as 'unplanted')."""
    _META["gap"] = expect


def union() -> None:
    """Declare the program's threads planted for the 'all threads' view: the truth then carries every
    thread's cpu_mark() readings (the harness compares their CPU in the window with the report's)."""
    _META["union"] = True


def functions(*names: str) -> None:
    """Declare phases named after the function they run: the harness then checks the report's sampled
    functions table against them (culprits, not only classes)."""
    _META["functions"] = list(names)


_TLS = threading.local()
try:                                   # pread through PyDLL keeps the GIL: reading the truth must not
    import ctypes                      # hand the GIL to other threads (a file read that released it put
    _pread = ctypes.PyDLL(None).pread  # up to 3 ms of run queue into a 34 us phase beside busy threads)
    _pread.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_long)
    _pread.restype = ctypes.c_ssize_t
except (OSError, AttributeError):
    _pread = None


def _runq_ns() -> int:
    """This thread's run-queue delay so far (runnable, not running: /proc schedstat, Linux); -1 n/a."""
    if _pread is None:
        return -1
    fd = getattr(_TLS, "fd", None)
    if fd is None:
        try:
            fd = _TLS.fd = os.open(f"/proc/self/task/{threading.get_native_id()}/schedstat", os.O_RDONLY)
            _TLS.buf = ctypes.create_string_buffer(128)
        except OSError:
            _TLS.fd = -1
            return -1
    if fd < 0:
        return -1
    n = _pread(fd, _TLS.buf, 128, 0)
    try:
        return int(_TLS.buf.raw[:max(0, n)].split()[1])
    except (ValueError, IndexError):
        return -1


@contextmanager
def phase(name: str, expect: str, off_cpu: str | None = None):
    """Time one phase on this thread.  ``off_cpu``: the class of the phase's off-CPU time (wall less its
    thread CPU time and run-queue delay, both from the OS), for a phase whose thread is planted to block
    for part of it (waiting for the GIL beside busy Python threads): the harness then splits the phase
    into ``expect`` (its CPU time) and ``off_cpu`` (the rest)."""
    q0 = _runq_ns()
    t0 = time.perf_counter_ns()
    c0 = time.thread_time_ns()
    try:
        yield
    finally:
        c1 = time.thread_time_ns()
        t1 = time.perf_counter_ns()
        q1 = _runq_ns()
        with _LOCK:
            _MARKS.setdefault(threading.get_native_id(), []).extend([(t0, c0), (t1, c1)])
            _PHASES.append({"name": name, "expect": expect, "start_ns": t0, "end_ns": t1, "cpu_ns": c1 - c0,
                            "runq_ns": (q1 - q0) if q0 >= 0 and q1 >= 0 else None, "off_cpu": off_cpu,
                            "tid": threading.get_native_id(), "main": threading.current_thread() is threading.main_thread()})


def cpu_mark() -> None:
    """Record this thread's CPU time now (perf_counter_ns, time.thread_time_ns): a thread that calls it
    often (every ~50 us of its work) lets the harness count every thread's CPU inside the report's
    window - the 'all threads' (union) view, beside the main thread's phases.  phase() edges are marks
    too.  Costs two clock reads and a list append."""
    m = _MARKS.get(threading.get_native_id())
    if m is None:
        with _LOCK:
            m = _MARKS.setdefault(threading.get_native_id(), [])
    m.append((time.perf_counter_ns(), time.thread_time_ns()))


def startup(expect: str) -> None:
    """Record a phase from this process's start (/proc/self/stat starttime, 1/CLK_TCK resolution,
    converted to perf_counter_ns) to now: interpreter start and imports, which no phase() can time."""
    with open("/proc/self/stat", "rb") as f:
        stat = f.read().decode("ascii", "replace")
    ticks = int(stat[stat.rindex(")") + 2:].split()[19])
    boot_now = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
    now = time.perf_counter_ns()
    start = now - (boot_now - ticks * 1_000_000_000 // os.sysconf("SC_CLK_TCK"))
    with _LOCK:
        _PHASES.append({"name": "startup", "expect": expect, "start_ns": start, "end_ns": now,
                        "cpu_ns": time.process_time_ns(), "tid": threading.get_native_id(), "main": True})


def _write() -> None:
    path = os.environ.get("ZOO_TRUTH")
    if not path:
        return
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump({"phases": _PHASES, "gap": _META["gap"], "functions": _META.get("functions"), "pid": os.getpid(),
                   "cpu_marks": {str(k): sorted(v) for k, v in _MARKS.items()} if _META.get("union") else None}, f)
    os.replace(tmp, path)


atexit.register(_write)
