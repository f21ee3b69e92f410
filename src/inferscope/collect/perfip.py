"""Where a thread's CPU time is spent, natively: Linux perf_event task-clock IP sampling.

One software event per sampled thread (PERF_COUNT_SW_TASK_CLOCK, user space only, so it works
at perf_event_paranoid <= 2 without privileges), one sample per 1 ms of that thread's CPU time
(thread_state.PERF_PERIOD_NS, dithered), with PERF_SAMPLE_IP | PERF_SAMPLE_TIME on CLOCK_MONOTONIC (the clock of time.perf_counter_ns).  The
kernel takes the samples; the sampler thread drains the ring buffer in batches (every ~100 ms,
not every tick: one drain costs ~50 us with cold caches, most of it fixed) and maps every
instruction pointer to the shared object it falls in (/proc/self/maps, cached); the timestamps
place each sample between two ticks; a Python thread's samples also carry the top of its user stack, which
names the caller of a sample in libc (``caller_kind``).  Each mapping has a role (``role_of``: vocab.py's library
table): an IP in a numeric library (torch and its runtimes, any BLAS/OpenMP, numpy's and scipy's compiled loops,
JIT code) means the thread computes; in a native tokenizer (HF tokenizers' Rust extension, sentencepiece,
tiktoken) it tokenizes; in a GPU math library's host code (cuBLAS, cuDNN) it is framework overhead; inside the
interpreter it runs Python.
Unlike the GIL heuristic this is unbiased: samples fall at uniform intervals of CPU time.
Unavailable (not Linux x86-64/aarch64, perf disabled, seccomp): ``PerfIP.open`` returns None.
"""
from __future__ import annotations

import bisect
import ctypes
import fcntl
import mmap
import os
import platform
import random
import struct
import time

from ..symname import qualified_name  # noqa: F401  (re-exported: tests, perfsyms' callers)
from ..vocab import (COMPUTE, FRAMEWORK, OTHER, PYTHON, ROLE_NAMES, RUNTIME, SYMBOL_LIBS, SYSTEM, TOKENIZER,  # noqa: F401
                     library_role, symbol_role)

_NR = {"x86_64": 298, "aarch64": 241}.get(platform.machine())
PERF_TYPE_SOFTWARE = 1
PERF_COUNT_SW_TASK_CLOCK = 1
PERF_SAMPLE_IP = 1
PERF_SAMPLE_TIME = 4
PERF_SAMPLE_STACK_USER = 1 << 13
CLOCK_MONOTONIC = 1
PERF_RECORD_SAMPLE = 9
PAGES = 8                      # data pages (power of two): 32 KiB = ~1300 samples
# A Python thread's samples also carry the top STACK_BYTES of its user stack (PERF_SAMPLE_STACK_USER): a sample
# in libc (malloc, free, memcpy, a futex) takes the role of the code that called it - the first return address
# on the stack that falls in a classified library (``caller_kind``).  Measured on zoo_hf_tokenizer's loop
# (bench/README.md, issue 23): of the libc samples in its tokenizer phase 293 of 305 found the Rust tokenizer,
# in its model phase 11 of 14 the interpreter and 3 torch; the caller's return address sat within 48 words of
# the stack pointer in 99.7 % of them (39 % within 8).  Each record is then 552 bytes, so such a ring has
# STACK_PAGES (256 KiB: ~470 samples, ~0.4 s of the thread's CPU; the sampler drains every 0.1 s).
STACK_BYTES = 512              # (thread_state.PERF_STACK_BYTES: what the sampler asks for)
STACK_PAGES = 64
# At most STACK_MAX_RINGS such rings at once (2 MiB of locked memory): past the per-user perf_event_mlock_kb
# (516 KiB by default) rings count against RLIMIT_MEMLOCK (8 MiB here, 64 KiB in some containers), and a server's
# 64-thread pool with the stack would leave its last threads no ring at all; the threads opened later are
# sampled by IP and time only (the main thread's ring is opened first).
STACK_MAX_RINGS = 8
MAPS_RELOAD_MIN_S = 0.02          # re-read /proc/self/maps on an unknown IP at most every 20 ms
# Roles of the code an instruction pointer falls in: vocab.py's library table (the one the nsys importer uses too)
# and torch's symbol rule (``symbol_role``).  role_of folds the roles this sampler does not use into OTHER: SYSTEM
# (libc, the loader) and RUNTIME (the CUDA driver and runtime: a leaf IP there is its caller's launch) - an OTHER
# sample takes the role of the native code before it or of its caller on the stack (``caller_kind``).
NATIVE_TORCH = COMPUTE          # the role's former name (torch was the only compute library known)


def role_of(path: str) -> int:
    """Role of an executable mapping from its file path ('' = anonymous memory: JIT code from
    oneDNN/xbyak or torch's fusers, COMPUTE)."""
    if not path:
        return COMPUTE
    r = library_role(path)
    return OTHER if r in (SYSTEM, RUNTIME) else r


class _Attr(ctypes.Structure):
    _fields_ = [("type", ctypes.c_uint32), ("size", ctypes.c_uint32), ("config", ctypes.c_uint64),
                ("sample_period", ctypes.c_uint64), ("sample_type", ctypes.c_uint64),
                ("read_format", ctypes.c_uint64), ("flags", ctypes.c_uint64),
                ("wakeup_events", ctypes.c_uint32), ("bp_type", ctypes.c_uint32),
                ("config1", ctypes.c_uint64), ("config2", ctypes.c_uint64),
                ("branch_sample_type", ctypes.c_uint64), ("sample_regs_user", ctypes.c_uint64),
                ("sample_stack_user", ctypes.c_uint32), ("clockid", ctypes.c_int32),
                ("sample_regs_intr", ctypes.c_uint64), ("aux_watermark", ctypes.c_uint32),
                ("sample_max_stack", ctypes.c_uint16), ("reserved", ctypes.c_uint16)]


_libc = None


def _syscall():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.syscall.restype = ctypes.c_long
    return _libc.syscall


class Maps:
    """Address -> kind of shared object, from /proc/self/maps (re-read on a miss); ``syms``: the executable
    mappings of SYMBOL_LIBS [(start, end, path, file offset)], whose samples are split by function (perfsyms)."""

    syms: list = []

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.kinds: list[int] = []
        self.loaded_at = 0.0
        self.misses: set[int] = set()   # pages of IPs still unmapped after a fresh reload
        self.reload()

    def reload(self) -> None:
        rows, syms = [], []
        try:
            # one large read (each read() releases the GIL: a hand-over to the workload's thread)
            fd = os.open("/proc/self/maps", os.O_RDONLY)
            try:
                chunks = []
                while True:
                    c = os.read(fd, 1 << 20)
                    if not c:
                        break
                    chunks.append(c)
            finally:
                os.close(fd)
            text = b"".join(chunks).decode("utf-8", "replace")
        except OSError:
            text = ""
        for line in text.splitlines():
            parts = line.split(None, 5)
            if len(parts) < 5 or "x" not in parts[1]:
                continue
            a, b = parts[0].split("-")
            path = parts[5].strip() if len(parts) > 5 else ""
            if path.startswith("[") and path.endswith("]"):    # [vdso], [vsyscall]: kernel-provided
                k = OTHER
            else:
                k = role_of(path)
                if k == COMPUTE and os.path.basename(path).startswith(SYMBOL_LIBS):
                    syms.append((int(a, 16), int(b, 16), path, int(parts[2], 16)))
            rows.append((int(a, 16), int(b, 16), k))
        rows.sort()
        self.syms = syms
        self.loaded_at = time.monotonic()
        self.starts = [r[0] for r in rows]
        self.ends = [r[1] for r in rows]
        self.kinds = [r[2] for r in rows]
        self.n_loaded = len(rows)

    def kind(self, ip: int) -> int:
        i = bisect.bisect_right(self.starts, ip) - 1
        if i >= 0 and ip < self.ends[i]:
            return self.kinds[i]
        return 0

    def kind_or_reload(self, ip: int) -> int:
        """kind(ip), re-reading the maps once when ip falls outside every mapping known: a library
        loaded after the last read (numpy's OpenBLAS imported while perf was being set up: with a
        0.5 s reload floor a 170 ms numpy MLP read 95 % user code, 2 runs in 4).  Pages that still
        miss right after a reload (freed JIT code) are remembered, so they cost no further reloads;
        reloads are at least MAPS_RELOAD_MIN_S apart (~1-3 ms each for a torch process)."""
        k = self.kind(ip)
        if k:
            return k
        page = ip >> 12
        if page in self.misses:
            return 0
        if time.monotonic() - self.loaded_at >= MAPS_RELOAD_MIN_S:
            self.reload()
            k = self.kind(ip)
            if k:
                return k
            if len(self.misses) > 4096:
                self.misses.clear()
            self.misses.add(page)
        return 0


# The sampling period is redrawn at every read (the sampler drains each thread every 100 ms), uniformly within
# +-PERIOD_DITHER of its mean: a fixed period against a periodic program aliases - a loop of ~1 ms of matmuls and
# 1.7 ms of Python (a 2.7 ms cycle) sampled every 4.0 ms of CPU put the samples in two clusters of phase that
# drifted slowly, and the compute share read 1-64 % across runs for 15 % true (zoo py_between_ops_1.7ms).
PERIOD_DITHER = 0.3
_rng = random.Random()


def caller_kind(maps: Maps, data: bytes, off: int, nbytes: int) -> int:
    """The role of the code that called the one a sample fell in (``caller_at``'s role)."""
    return caller_at(maps, data, off, nbytes)[0]


def caller_at(maps: Maps, data: bytes, off: int, nbytes: int) -> tuple[int, int]:
    """The role of the code that called the one a sample fell in (libc, the loader, an unknown extension): the
    first word of the sampled user stack (``nbytes`` at ``off``, from the stack pointer up) that is an address
    in a mapping with a role of its own.  A leaf's return address is the first code address above its frame;
    a libc function called from libc (malloc's _int_malloc) is skipped over to its caller; the interpreter
    (PYTHON) counts, so a hash loop in libcrypto called from Python code is that code's.  OTHER: none found.
    Returns (role, the return address: 0 when none)."""
    kind = maps.kind
    for (w,) in struct.iter_unpack("<Q", data[off:off + (nbytes & ~7)]):
        k = kind(w)
        if k and k != OTHER:
            return k, w
    return OTHER, 0


class PerfIP:
    """One thread's task-clock IP sampler."""

    stack_rings = 0         # rings with the user stack open now (STACK_MAX_RINGS)

    def __init__(self, fd: int, buf: mmap.mmap, period_ns: int = 0, stack_bytes: int = 0) -> None:
        self.fd = fd
        self.buf = buf
        self.size = len(buf) - mmap.PAGESIZE
        self.stack_bytes = stack_bytes  # user stack bytes per sample (0: IP and time only)
        self.tail = 0
        self.period_ns = period_ns      # the mean sampling period (dithered at each read, PERIOD_DITHER)

    @classmethod
    def open(cls, tid: int, period_ns: int = 1_000_000, stack_bytes: int = 0):
        """The sampler of thread ``tid``; ``stack_bytes`` > 0: with that much of its user stack per sample
        (``caller_kind``) - where the kernel or the locked-memory limit refuses it, without."""
        if _NR is None:
            return None
        if stack_bytes > 0 and PerfIP.stack_rings < STACK_MAX_RINGS:
            p = cls._open(tid, period_ns, stack_bytes)
            if p is not None:
                PerfIP.stack_rings += 1
                return p
        return cls._open(tid, period_ns, 0)

    @classmethod
    def _open(cls, tid: int, period_ns: int, stack_bytes: int):
        attr = _Attr()
        attr.type = PERF_TYPE_SOFTWARE
        attr.size = ctypes.sizeof(_Attr)
        attr.config = PERF_COUNT_SW_TASK_CLOCK
        attr.sample_period = period_ns
        attr.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TIME | (PERF_SAMPLE_STACK_USER if stack_bytes else 0)
        attr.sample_stack_user = stack_bytes
        attr.flags = (1 << 5) | (1 << 6) | (1 << 25)   # exclude_kernel, exclude_hv, use_clockid
        attr.clockid = CLOCK_MONOTONIC
        fd = _syscall()(_NR, ctypes.byref(attr), tid, -1, -1, 8)   # PERF_FLAG_FD_CLOEXEC
        if fd < 0:
            return None
        pages = STACK_PAGES if stack_bytes else PAGES
        try:
            buf = mmap.mmap(fd, (1 + pages) * mmap.PAGESIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except (OSError, ValueError):     # (EPERM past RLIMIT_MEMLOCK and perf_event_mlock_kb)
            os.close(fd)
            return None
        return cls(fd, buf, period_ns, stack_bytes)

    def read(self, maps: Maps) -> list[tuple[int, int]]:
        """[(timestamp_ns, kind)] of the samples since the last read, oldest first."""
        b = self.buf
        head = struct.unpack_from("<Q", b, 1024)[0]
        tail = self.tail
        if head == tail:
            return []
        page = mmap.PAGESIZE
        size = self.size
        if head - tail > size:          # overrun: skip to the newest data
            tail = head - size
        # copy [tail, head) out of the ring once (two slices when it wraps), then parse linearly
        start, n = tail % size, head - tail
        if start + n <= size:
            data = b[page + start:page + start + n]
        else:
            data = b[page + start:page + size] + b[page:page + start + n - size]
        self.tail = head
        struct.pack_into("<Q", b, 1032, head)   # data_tail: the kernel may reuse the space
        self._dither()
        out = []
        cand = []                       # [(index in out, ip)] of COMPUTE samples: split by function (perfsyms)
        kind = maps.kind_or_reload
        unpack = struct.unpack_from
        stack = self.stack_bytes > 0
        off, end = 0, len(data)
        while off + 8 <= end:
            typ, _misc, sz = unpack("<IHH", data, off)
            if sz < 8:
                break
            if typ == PERF_RECORD_SAMPLE and sz >= 24 and off + 24 <= end:
                ip, ts = unpack("<QQ", data, off + 8)
                k = kind(ip) or OTHER
                if k == COMPUTE:
                    cand.append((len(out), ip))
                elif k == OTHER and stack and off + 40 <= end:
                    n = unpack("<Q", data, off + 24)[0]        # u64 size, char data[size], u64 dyn_size
                    if n and off + 40 + n <= end and off + 40 + n <= off + sz:
                        dyn = unpack("<Q", data, off + 32 + n)[0]
                        k, w = caller_at(maps, data, off + 32, min(n, dyn))
                        if k == COMPUTE:        # (the call instruction ends just before its return address)
                            cand.append((len(out), w - 1))
                out.append((ts, k))
            off += sz
        if cand and maps.syms:                  # (numpy is imported here only: torch is loaded, and numpy with it)
            from .perfsyms import refine  # lazy: perfsyms imports numpy (loaded only once torch is)
            refine(out, cand, maps.syms, symbol_role, COMPUTE)
        return out

    def _dither(self) -> None:
        """A new sampling period, uniform within PERIOD_DITHER of the mean (PERF_EVENT_IOC_PERIOD)."""
        if self.period_ns <= 0:
            return
        p = int(self.period_ns * (1.0 + PERIOD_DITHER * (2.0 * _rng.random() - 1.0)))
        try:
            fcntl.ioctl(self.fd, 0x40082404, struct.pack("<Q", max(1, p)))
        except OSError:
            self.period_ns = 0                  # (a kernel without it: the fixed period stays)

    def drain(self, maps: Maps) -> tuple[int, int, int, int]:
        """(compute, python, other, tokenizer, framework) sample counts since the last read."""
        counts = [0] * (max(ROLE_NAMES) + 1)
        for _ts, k in self.read(maps):
            counts[k] += 1
        return counts[COMPUTE], counts[PYTHON], counts[OTHER], counts[TOKENIZER], counts[FRAMEWORK]

    def enable(self, on: bool = True) -> None:
        """Start/stop the kernel's sampling (PERF_EVENT_IOC_ENABLE / _DISABLE)."""
        fcntl.ioctl(self.fd, 0x2400 if on else 0x2401, 0)

    def close(self) -> None:
        if self.stack_bytes:
            self.stack_bytes = 0
            PerfIP.stack_rings = max(0, PerfIP.stack_rings - 1)
        try:
            self.buf.close()
        except Exception:
            pass
        try:
            os.close(self.fd)
        except OSError:
            pass
