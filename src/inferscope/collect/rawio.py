"""Read small /proc files from a collector thread without handing the GIL to another thread.

``os.pread``/``open`` release the GIL around the system call.  In a collector thread that is
costly: the workload's thread takes the GIL meanwhile, and getting it back means waiting for the
switch interval (5 ms) and forcing the workload thread to stop — two context switches on the
workload's critical path per system call (seen as the top kernel symbols of the collector
threads in ``perf record``).  A /proc read never blocks on I/O and takes microseconds, so
collectors call libc ``pread`` through ``ctypes.PyDLL``, which keeps the GIL held.
Falls back to ``os.pread`` where libc cannot be loaded.
"""
from __future__ import annotations

import ctypes
import os
import time

_pread = _open = _close = None
try:
    _libc = ctypes.PyDLL(None, use_errno=True)   # PyDLL: the call does not release the GIL
    _pread = _libc.pread
    _pread.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_long]
    _pread.restype = ctypes.c_ssize_t
    _open = _libc.open
    _open.argtypes = [ctypes.c_char_p, ctypes.c_int]
    _open.restype = ctypes.c_int
    _close = _libc.close
    _close.argtypes = [ctypes.c_int]
    _close.restype = ctypes.c_int
except (OSError, AttributeError):
    _pread = _open = _close = None
_FLAGS = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)


def _open_fd(path: str) -> int:
    """open(2) read-only; with the GIL held where libc is loaded (os.open releases it)."""
    if _open is None:
        return os.open(path, _FLAGS)
    fd = _open(os.fsencode(path), _FLAGS)
    if fd < 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), path)
    return fd


def _close_fd(fd: int) -> None:
    if _close is None:
        os.close(fd)
    else:
        _close(fd)


def read_small(path: str, size: int = 4096) -> bytes:
    """Open, read up to ``size`` bytes and close a /proc file without releasing the GIL (three system
    calls of microseconds each: released, each would cost the collector a GIL hand-over, and under
    GIL contention - N Python threads spinning - every hand-over waits 5-30 ms)."""
    f = ProcFile(path, size)
    try:
        return f.read()
    finally:
        f.close()


class ProcFile:
    """A kept-open, re-readable file (``/proc/stat``, ``/proc/self/statm``, schedstat...)."""

    __slots__ = ("fd", "size", "buf")

    def __init__(self, path: str, size: int = 4096) -> None:
        self.fd = _open_fd(path)
        self.size = size
        self.buf = ctypes.create_string_buffer(size) if _pread is not None else None

    def read(self) -> bytes:
        """The file's content from offset 0 (up to ``size`` bytes); OSError on failure."""
        if self.buf is None:
            return os.pread(self.fd, self.size, 0)
        n = _pread(self.fd, self.buf, self.size, 0)
        if n < 0:
            raise OSError(ctypes.get_errno(), "pread failed")
        return ctypes.string_at(self.buf, n)

    def close(self) -> None:
        if self.fd >= 0:
            try:
                _close_fd(self.fd)
            except OSError:
                pass
            self.fd = -1


def start_perf_ns(stat_path: str = "/proc/self/stat") -> int | None:
    """When a process or task started, on the perf_counter_ns clock (CLOCK_MONOTONIC): field 22 of its
    ``stat`` (starttime, clock ticks since boot on CLOCK_BOOTTIME; resolution 1/CLK_TCK s, floored).
    None off Linux or when unreadable."""
    try:
        stat = read_small(stat_path, 1024).decode("ascii", "replace")
        ticks = int(stat[stat.rindex(")") + 2:].split()[19])
        hz = os.sysconf("SC_CLK_TCK")
        boot_now = time.clock_gettime_ns(time.CLOCK_BOOTTIME)
        now = time.perf_counter_ns()
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    age_ns = boot_now - ticks * 1_000_000_000 // hz
    return now - age_ns if 0 <= age_ns < 10 ** 15 else None
