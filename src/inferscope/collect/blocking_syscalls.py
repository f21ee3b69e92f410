"""System calls as the off-CPU probe (blocking.py) sees them: ``/proc/<pid>/task/<tid>/syscall`` lines.

The syscall number -> name tables of the architectures read (x86_64, aarch64), the call groups the
probe and the analysis use (fd-taking calls, path arguments, byte counts; io / lock / sleep / poll),
the decoding of one syscall line, open-flag names and the cleaning of a path read from /proc.
Pure functions and constants (no I/O).  The kinds of the calls (io / lock / sleep / poll) and the ``running``
label are vocab.py's: analyze/blocking.py reads them there.
"""
from __future__ import annotations

import os
import platform

from ..vocab import IO_CALLS, LOCK_CALLS, NET_CALLS, POLL_CALLS, RUNNING, SLEEP_CALLS, kind_of  # noqa: F401  (re-exported)

# syscall number -> name, for the calls a blocked inference thread is seen in (I/O, locks, sleeps,
# polls, process waits); others read "syscall_<nr>".  From the kernel's unistd tables.
SYSCALLS = {
    "x86_64": {
        0: "read", 1: "write", 2: "open", 3: "close", 4: "stat", 5: "fstat", 6: "lstat", 7: "poll", 8: "lseek",
        9: "mmap", 10: "mprotect", 11: "munmap", 12: "brk", 16: "ioctl", 17: "pread64", 18: "pwrite64", 19: "readv",
        20: "writev", 21: "access", 23: "select", 24: "sched_yield", 26: "msync", 28: "madvise", 34: "pause",
        35: "nanosleep", 40: "sendfile", 42: "connect", 43: "accept", 44: "sendto", 45: "recvfrom", 46: "sendmsg",
        47: "recvmsg", 56: "clone", 57: "fork", 59: "execve", 61: "wait4", 65: "semop", 70: "msgrcv", 72: "fcntl",
        73: "flock", 74: "fsync", 75: "fdatasync", 76: "truncate", 77: "ftruncate", 78: "getdents", 82: "rename",
        83: "mkdir", 87: "unlink", 89: "readlink", 128: "rt_sigtimedwait", 130: "rt_sigsuspend", 162: "sync",
        187: "readahead", 202: "futex", 208: "io_getevents", 209: "io_submit", 217: "getdents64", 220: "semtimedop",
        221: "fadvise64", 230: "clock_nanosleep", 232: "epoll_wait", 243: "mq_timedreceive", 247: "waitid",
        257: "openat", 262: "newfstatat", 263: "unlinkat", 270: "pselect6", 271: "ppoll", 275: "splice",
        277: "sync_file_range", 281: "epoll_pwait", 285: "fallocate", 288: "accept4", 295: "preadv", 296: "pwritev",
        299: "recvmmsg", 306: "syncfs", 307: "sendmmsg", 318: "getrandom", 326: "copy_file_range", 327: "preadv2",
        328: "pwritev2", 332: "statx", 426: "io_uring_enter", 441: "epoll_pwait2", 449: "futex_waitv",
    },
    "aarch64": {
        2: "io_submit", 4: "io_getevents", 22: "epoll_pwait", 25: "fcntl", 29: "ioctl", 32: "flock", 35: "unlinkat",
        46: "ftruncate", 47: "fallocate", 56: "openat", 57: "close", 61: "getdents64", 62: "lseek", 63: "read",
        64: "write", 65: "readv", 66: "writev", 67: "pread64", 68: "pwrite64", 69: "preadv", 70: "pwritev",
        71: "sendfile", 72: "pselect6", 73: "ppoll", 76: "splice", 79: "newfstatat", 80: "fstat", 81: "sync",
        82: "fsync", 83: "fdatasync", 84: "sync_file_range", 95: "waitid", 98: "futex", 101: "nanosleep",
        115: "clock_nanosleep", 124: "sched_yield", 133: "rt_sigsuspend", 137: "rt_sigtimedwait",
        183: "mq_timedreceive", 188: "msgrcv", 192: "semtimedop", 193: "semop", 202: "accept", 203: "connect",
        206: "sendto", 207: "recvfrom", 211: "sendmsg", 212: "recvmsg", 213: "readahead", 215: "munmap",
        220: "clone", 221: "execve", 222: "mmap", 223: "fadvise64", 226: "mprotect", 227: "msync", 233: "madvise",
        242: "accept4", 243: "recvmmsg", 260: "wait4", 267: "syncfs", 269: "sendmmsg", 278: "getrandom",
        285: "copy_file_range", 286: "preadv2", 287: "pwritev2", 291: "statx", 426: "io_uring_enter",
        441: "epoll_pwait2", 449: "futex_waitv",
    },
}
# calls whose first argument is a file descriptor
FD_CALLS = frozenset((
    "read", "write", "pread64", "pwrite64", "readv", "writev", "preadv", "pwritev", "preadv2", "pwritev2", "fsync",
    "fdatasync", "sync_file_range", "syncfs", "ftruncate", "fallocate", "lseek", "fstat", "getdents", "getdents64",
    "ioctl", "fcntl", "flock", "splice", "copy_file_range", "recvfrom", "sendto", "recvmsg", "sendmsg", "recvmmsg",
    "sendmmsg", "accept", "accept4", "connect", "epoll_wait", "epoll_pwait", "epoll_pwait2", "io_uring_enter",
    "fadvise64", "readahead", "close", "sendfile", "msync"))
# calls whose argument i is a path (user pointer): i
PATH_ARG = {"openat": 1, "open": 0, "newfstatat": 1, "statx": 1, "unlinkat": 1, "stat": 0, "lstat": 0, "unlink": 0,
            "truncate": 0, "mkdir": 0, "access": 0}
# what the analysis calls each (io / lock / sleep / poll / other): vocab.IO_CALLS ... and vocab.kind_of
AT_FDCWD = -100


def arch_table(machine: str | None = None) -> dict:
    m = (machine or platform.machine()).lower()
    if m in ("amd64", "x64"):
        m = "x86_64"
    if m == "arm64":
        m = "aarch64"
    return SYSCALLS.get(m, {})


# calls whose third argument is a byte count
SIZE_ARG = frozenset(("read", "write", "pread64", "pwrite64", "recvfrom", "sendto"))
# calls with (fd, iovec array, count): the byte count is the sum of the iovecs' lengths (64-bit layout)
IOV_CALLS = frozenset(("readv", "writev", "preadv", "pwritev", "preadv2", "pwritev2"))
_FLAGS = [(n, getattr(os, n, 0)) for n in ("O_SYNC", "O_DSYNC", "O_DIRECT", "O_APPEND")]


def flag_names(flags: int) -> list:
    """Names of the open flags that change how I/O waits (O_SYNC includes O_DSYNC's bit)."""
    out = []
    for n, v in _FLAGS:
        if v and flags & v == v and not (n == "O_DSYNC" and "O_SYNC" in out):
            out.append(n)
    return out


def _s64(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def decode(line: bytes | str, table: dict) -> tuple[str, list[int]] | None:
    """One /proc/<pid>/task/<tid>/syscall line -> (name, args); None when the thread runs / no call.

    Formats (proc(5)): "running"; "-1 sp pc" (blocked, not in a syscall); "nr a0 .. a5 sp pc"."""
    if isinstance(line, bytes):
        line = line.decode("ascii", "replace")
    parts = line.split()
    if not parts or parts[0] == RUNNING:
        return None
    try:
        nr = int(parts[0])
    except ValueError:
        return None
    if nr < 0:
        return None
    try:
        args = [_s64(int(p, 16)) for p in parts[1:7]]
    except ValueError:
        args = []
    return table.get(nr, f"syscall_{nr}"), args


def clean_path(p: str, limit: int = 300) -> str:
    """A path from /proc: control characters replaced, bounded (it is untrusted text)."""
    p = "".join(c if c.isprintable() else "?" for c in p)
    return p if len(p) <= limit else p[:limit - 3] + "..."

