"""Kernel-mode CPU time of sampled threads: page faults and system-call CPU, per thread and tick.

perf_event samples the threads' instruction pointers in user space only (perf_event_paranoid 2),
so a thread's CPU time in the kernel - page faults of a numpy/torch loop touching fresh memory, the
CPU part of an O_DSYNC write or fsync - gets no IP sample, and the sampler's perf resolver used to
give it the thread's previous verdict.  This module measures it, cheaply, for the sampler:

  FaultCounter  a counting perf_event per thread (PERF_COUNT_SW_PAGE_FAULTS, user-mode faults:
                allowed at perf_event_paranoid 2): the thread's faults per tick, exact, one read(2)
                of 8 bytes (~2 us).
  ThreadStat    per thread: the FaultCounter, and /proc/self/task/<tid>/stat kept open (rawio.ProcFile:
                one pread, GIL held; ~9 us hot, ~40-85 us with the tick's cold caches): stime (the
                kernel's tick sampling at CONFIG_HZ, scaled to the thread's exact runtime, printed in
                10 ms units: unbiased when accumulated, too coarse for one 5 ms tick - used as a
                carry), read only after a wait in an I/O call (the thread blocked in one in the interval
                or the one before: blocking.py's probe) and ``Gate`` opened; without perf, the stat file's minflt+majflt.
  Gate          one getrusage(RUSAGE_SELF) per tick: did the process's fault count or kernel time
                move since the previous tick?  If not, no thread had any (a pure-Python spin: open
                at 3 % of 200 Hz ticks).

The classification rules and their rationale are in thresholds.py (KERNEL_*); ``kernel_class``
applies them.  Faults and the kernel time so placed are counted by ``Totals`` and recorded as
cumulative counters (``proc.kernel_fault_cpu_s``, ``proc.kernel_faults``, ``proc.kernel_io_cpu_s``; with the native
tokenizer's CPU time, ``RULE_COUNTERS``: the counters the rules' decisions make, re-derived by a replay).
"""
from __future__ import annotations

import os

from .. import thresholds as T
from ..vocab import NATIVE_TOKENIZER_METRIC
from .rawio import ProcFile

try:
    _CLK_NS = 1_000_000_000 // os.sysconf("SC_CLK_TCK")
except (ValueError, OSError, AttributeError):
    _CLK_NS = 10_000_000

try:
    import resource as _resource
    _RUSAGE_SELF = _resource.RUSAGE_SELF
except ImportError:       # not Linux/Unix: the gate stays open, ThreadStat fails to open
    _resource = None


def parse_stat(b: bytes) -> tuple[int, int]:
    """(minflt + majflt, stime ns) from a /proc/<pid>/task/<tid>/stat line (fields after the
    parenthesised command, which may itself hold spaces and parentheses)."""
    r = b[b.rindex(b")") + 2:].split()
    # r[0] = state (field 3): minflt field 10, majflt 12, utime 14, stime 15
    return int(r[7]) + int(r[9]), int(r[12]) * _CLK_NS


class Gate:
    """Process-wide: did any thread fault or spend kernel time since the previous call?"""

    __slots__ = ("last",)

    def __init__(self) -> None:
        self.last = None

    def __call__(self) -> bool:
        if _resource is None:
            return True
        try:
            ru = _resource.getrusage(_RUSAGE_SELF)
        except OSError:
            return True
        cur = (ru.ru_minflt + ru.ru_majflt, ru.ru_stime)
        moved = cur != self.last
        self.last = cur
        return moved


def carry_step(carry: int, sys_ns: int, cpu_ns: int, waiting: bool) -> tuple[int, int]:
    """Place a thread's kernel time of one interval without faults: (new carry, kernel ns of the
    interval).  ``sys_ns``: its stime delta (10 ms units, so late by up to one unit); ``cpu_ns``: its
    CPU clock delta (exact); ``waiting``: off-CPU for nearly all of it (the interval is waiting as a
    whole: its kernel time is used up, 0 returned).  The carry holds reported kernel time not yet
    placed (negative: placed by the fault estimate before stime reported it), within
    +-KERNEL_CARRY_MAX_NS; an interval takes up to its CPU time of it.  The resolver uses the
    returned time only where a rule applies (``kernel_class``: blocked)."""
    c = min(T.KERNEL_CARRY_MAX_NS, carry + max(0, sys_ns))
    if c <= 0:
        return max(c, -T.KERNEL_CARRY_MAX_NS), 0
    use = min(c, max(0, cpu_ns))
    return c - use, (0 if waiting else use)


_read = None
try:
    import ctypes
    _read = ctypes.PyDLL(None, use_errno=True).read     # PyDLL: the call keeps the GIL (rawio.py)
    _read.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t]
    _read.restype = ctypes.c_ssize_t
except (OSError, AttributeError, ImportError):
    _read = None


class FaultCounter:
    """A thread's user-mode page faults: a counting perf_event (PERF_COUNT_SW_PAGE_FAULTS, exclude_kernel:
    allowed at perf_event_paranoid 2), read with one read(2) of 8 bytes, ~2 us - the /proc stat file
    costs ~85 us per read in the sampler's tick (cold caches: measured 9.9 ms for 117 reads in
    zoo_pagefault.py, 9 us in a hot loop), which cut the achieved rate from ~65 to ~43 Hz there."""

    __slots__ = ("fd", "buf", "last")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.buf = ctypes.create_string_buffer(8)
        self.last = self.count()

    @classmethod
    def open(cls, tid: int):
        """None where perf_event (or libc) is unavailable."""
        if _read is None:
            return None
        try:
            # lazy: guarded - where perfip cannot import, kernel time goes without perf
            from .perfip import _NR, _Attr, _syscall, PERF_TYPE_SOFTWARE
        except ImportError:
            return None
        if _NR is None:
            return None
        attr = _Attr()
        attr.type = PERF_TYPE_SOFTWARE
        attr.size = ctypes.sizeof(_Attr)
        attr.config = 2                        # PERF_COUNT_SW_PAGE_FAULTS
        attr.flags = (1 << 5) | (1 << 6)       # exclude_kernel, exclude_hv (counting, enabled)
        fd = _syscall()(_NR, ctypes.byref(attr), tid, -1, -1, 8)   # PERF_FLAG_FD_CLOEXEC
        if fd < 0:
            return None
        try:
            return cls(fd)
        except OSError:
            os.close(fd)
            return None

    def count(self) -> int:
        if _read(self.fd, self.buf, 8) != 8:
            raise OSError(ctypes.get_errno(), "perf read failed")
        return int.from_bytes(self.buf.raw, "little")

    def delta(self) -> int:
        c = self.count()
        d, self.last = c - self.last, c
        return d

    def close(self) -> None:
        if self.fd >= 0:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = -1


class ThreadStat:
    """One thread's page faults and kernel time per tick interval (``step``): faults from its perf
    FaultCounter where it opened (every tick, cheap), else from /proc/self/task/<tid>/stat; the stat
    file (stime) is read only after a wait in an I/O call (in the interval or the one before: the
    sampler's ``blocked``) or without a counter, and only when the process's counters moved (Gate)."""

    __slots__ = ("f", "fc", "flt", "sys", "carry", "fsys", "fflt", "ksum", "csum", "cpend")

    def __init__(self, tid: int, path: str | None = None, counter: bool = False) -> None:
        self.f = ProcFile(path or f"/proc/self/task/{tid}/stat", 512)
        self.flt, self.sys = parse_stat(self.f.read())
        self.fc = FaultCounter.open(tid) if counter else None
        self.carry = 0     # kernel time reported, not yet placed (carry_step)
        self.fsys = 0      # kernel time and faults of the intervals with faults: the thread's cost per
        self.fflt = 0      # fault (fault_cost)
        self.ksum = 0.0    # decaying sums of its stime and CPU time: its recent kernel share (kernel_share)
        self.csum = 0.0
        self.cpend = 0      # CPU time of the steps since the last stat read (kernel_share)

    def add_counter(self, tid: int) -> None:
        """Open the perf fault counter (the sampler calls this once perf is set up for the thread: the
        process's first perf_event_open costs the kernel 20-35 ms, paid by the perf set-up thread)."""
        if self.fc is None:
            self.fc = FaultCounter.open(tid)
            if self.fc is not None:      # from here faults come from the counter
                self.flt, self.sys = parse_stat(self.f.read())

    def delta(self) -> tuple[int, int]:
        """(faults, kernel ns) since the previous read of the stat file; OSError/ValueError when unreadable."""
        flt, sys_ns = parse_stat(self.f.read())
        d = (flt - self.flt, sys_ns - self.sys)
        self.flt, self.sys = flt, sys_ns
        return d

    def fault_cost(self) -> float:
        """Kernel ns per fault of this thread: its stime over its faults in intervals with faults (where
        the stat file was read), with KERNEL_FAULT_NS_PRIOR weighing as KERNEL_FAULT_PRIOR_N faults (the
        cost varies ~10x with the page size: 4 KiB vs transparent huge pages)."""
        n = T.KERNEL_FAULT_PRIOR_N
        return (self.fsys + T.KERNEL_FAULT_NS_PRIOR * n) / (self.fflt + n)

    def kernel_share(self) -> float:
        """The thread's recent kernel share of its CPU time (stime over CPU clock, decaying sums, over
        the intervals where the stat file was read)."""
        return min(1.0, self.ksum / self.csum) if self.csum > 0 else 0.0

    def step(self, cpu_ns: int, waiting: bool, blocked: bool = True, gate: bool = True) -> tuple[int, int]:
        """(faults, kernel ns) of the interval since the previous step; ``cpu_ns`` its CPU clock delta;
        ``blocked``: the thread was off-CPU in it or the one before (the I/O rule may apply);
        ``gate``: the process's faults or kernel time moved since the previous tick.
        With faults the kernel time is faults x fault_cost (exact count, learnt cost: stime alone
        comes in 10 ms units, late); without, it comes from the carry (carry_step)."""
        fc = self.fc
        if fc is not None:
            kf = fc.delta()
            if not (blocked and gate):
                # no stat read: its stime (and faults) go to the next read's delta; the fault counter
                # is the count (the stat file's fault delta is not used where a counter runs); the
                # kernel time placed for its faults is a debt the stime reported later pays first
                self.cpend += max(0, cpu_ns)
                if kf > 0:
                    k = min(max(0, cpu_ns), int(kf * self.fault_cost()))
                    self.carry = max(-T.KERNEL_CARRY_MAX_NS, self.carry - k)
                    return kf, (0 if waiting else k)
                return 0, 0
            _, ks = self.delta()
        elif gate:
            kf, ks = self.delta()
        else:
            return 0, 0
        d = T.KERNEL_SHARE_DECAY
        self.ksum = self.ksum * d + max(0, ks)
        self.csum = self.csum * d + max(0, cpu_ns) + self.cpend    # (the stime covers the skipped steps too)
        self.cpend = 0
        if kf > 0:
            # stime reported since the last step (and any carry) belongs with these faults
            self.fsys += max(0, ks) + max(0, self.carry)
            self.fflt += kf
            k = min(max(0, cpu_ns), int(kf * self.fault_cost()))
            self.carry = 0
            return kf, (0 if waiting else k)
        self.carry, k = carry_step(self.carry, ks, cpu_ns, waiting)
        return 0, k

    def close(self) -> None:
        self.f.close()
        if self.fc is not None:
            self.fc.close()
            self.fc = None


FAULTS = "faults"    # kernel_class verdict kinds (Totals keys)
IO = "io"


def kernel_class(faults: int, blocked: bool, native: bool, fallback: str, compute: str, waiting: str,
                 io: bool = False):
    """The class of an interval's kernel-mode CPU time that perf left undecided (thresholds.py):
    (class, kind) or None (no kernel context: the usual rule holds).
    ``faults``: page faults of the thread in the interval; ``blocked``: it was off-CPU for part of
    it; ``native``: it ran native code (the GIL was free at the tick, or its last user-space IP
    samples were in numeric libraries); ``fallback``: the class of its Python stack; ``io``: the call
    it blocked in was an I/O call (blocking.py probe): a few faults there are its buffer's."""
    if faults >= (T.KERNEL_FAULTS_BLOCKED_MIN if (blocked and io) else T.KERNEL_FAULTS_MIN):
        return (compute if native else fallback), FAULTS
    if blocked:
        return waiting, IO
    return None


# The counters the rules write while deciding (Totals.flush, in this order): products of the rules, not measurements -
# a replay of recorded facts re-derives exactly these from its own decisions (collect/replay_counters.py)
RULE_COUNTERS = (NATIVE_TOKENIZER_METRIC, "proc.kernel_fault_cpu_s", "proc.kernel_faults", "proc.kernel_io_cpu_s")


class Totals:
    """Cumulative kernel time placed by the rules, per kind, and the faults of those intervals; and the CPU time the
    rules laid as a native tokenizer's (its IP samples' share: the Rust/C++ encode, not the Python around it - what
    batching the calls cannot remove, analyze/tokenizer_split.py)."""

    __slots__ = ("fault_ns", "faults", "io_ns", "dirty", "tok_ns", "tok_dirty")

    def __init__(self) -> None:
        self.fault_ns = self.faults = self.io_ns = self.tok_ns = 0
        self.dirty = self.tok_dirty = False

    def add_native_tokenizer(self, ns: int) -> None:
        if ns > 0:
            self.tok_ns += ns
            self.tok_dirty = True

    def add(self, kind: str, ns: int, faults: int) -> None:
        if kind == FAULTS:
            self.fault_ns += ns
            self.faults += faults
        else:
            self.io_ns += ns
        self.dirty = True

    def merge(self, o: "Totals") -> None:
        """Add ``o``'s totals and its not-yet-flushed marks (a replay sums its drains' Totals in time order)."""
        self.fault_ns += o.fault_ns
        self.faults += o.faults
        self.io_ns += o.io_ns
        self.tok_ns += o.tok_ns
        self.dirty = self.dirty or o.dirty
        self.tok_dirty = self.tok_dirty or o.tok_dirty

    def flush(self, append, ts: int) -> None:
        """Counter samples (cumulative, ``RULE_COUNTERS``) when something was added since the last flush."""
        tok, fault, faults, io = RULE_COUNTERS
        if self.tok_dirty:
            self.tok_dirty = False
            append((1, tok, -1, ts, self.tok_ns / 1e9))
        if not self.dirty:
            return
        self.dirty = False
        append((1, fault, -1, ts, self.fault_ns / 1e9))
        append((1, faults, -1, ts, float(self.faults)))
        append((1, io, -1, ts, self.io_ns / 1e9))
