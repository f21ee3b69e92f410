"""Why a sampled Python thread is off-CPU: the system call it is blocked in, the file, the Python frame.

At a sampler tick where a thread was mostly off-CPU since its previous tick (the sampler's ``not
oncpu``: it is blocked at the tick), ``Probe.probe`` reads ``/proc/self/task/<tid>/syscall`` (the
system call number and its six arguments, or "running"; one pread of a file kept open per thread),
decodes the number with the table of this machine's architecture (x86_64, aarch64), and names:
  - the file of fd-taking calls (read/pread64/write/fsync/...: ``os.readlink('/proc/self/fd/<fd>')``,
    cached per (fd, device, inode) from an fstat, so a reused fd number is not mistaken for the old
    file), and the path argument of openat/newfstatat/statx/unlinkat (read from our own memory
    through /proc/self/mem: a bad pointer is EIO, never a crash);
  - for futex, whether the wait has a timeout (a lock/condition/queue without timeout is untimed)
    and whether that deadline is within the GIL switch interval (CPython's GIL wait, one switch
    interval at a time; the deadline is read from our own memory): such a probe writes no mark when
    it waits at the frame of the label in force (a thread back from its blocking call waits for the
    GIL the sampler holds during the tick: labelled as GIL, 50 ms of a disk-I/O loop's reads read as
    GIL waits); elsewhere it ends that label (``running``: unattributed).  So does an untimed
    FUTEX_WAIT (op 0), glibc's mutex wait - the GIL's mutex -, while CPython's Lock/Condition/Event/
    queue/join wait with FUTEX_WAIT_BITSET (op 9) and are lock waits;
  - the waiting Python frame: the innermost frame outside the standard library, unknown libraries
    and InferScope (``file:line function``), and the innermost frame when that differs (``via``).
Races (the fd closed meanwhile, the thread gone) and permission errors give a partial label, never
an exception into the sampler.

Recorded as a step function per thread, in the existing span columns: a MARK span (instant) with
cat ``inferscope.offcpu``, name = the syscall (or ``running`` when the thread goes back on CPU) and
detail = a JSON object {"path", "fd", "frame", "via", "timed"}.  A mark is appended only when a
thread's label changes, at the start of the tick interval it describes (the previous tick: the
interval a blocked thread's off-CPU part ends at this tick), so a thread blocked for seconds in one
call costs one event, and the label at any instant is the last mark before it.  Interned strings:
the same call site and file cost one string.  analyze/blocking.py charges the sampled ``waiting``
time of each thread to the label in force.

Cost (measured on the 2-vCPU VM): one pread of the syscall file ~3 us, fstat ~1 us, readlink ~5 us
(cached); a thread whose syscall line did not change since its previous probe reuses its label.
All reads but readlink keep the GIL held (rawio.py: a released GIL costs the sampler a hand-over,
5-30 ms under GIL contention).
"""
from __future__ import annotations

import ctypes
import json
import os
import platform
import sys
import time

from . import rawio
from .rawio import ProcFile, read_small

MARK = 13   # SpanKind.MARK
CAT = "inferscope.offcpu"
RUNNING = "running"

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
# what the analysis calls each: disk/file I/O, a lock (futex), a sleep, a poll on fds, anything else
IO_CALLS = frozenset((
    "read", "write", "pread64", "pwrite64", "readv", "writev", "preadv", "pwritev", "preadv2", "pwritev2", "fsync",
    "fdatasync", "sync_file_range", "syncfs", "sync", "ftruncate", "fallocate", "truncate", "open", "openat", "close",
    "stat", "lstat", "newfstatat", "statx", "fstat", "getdents", "getdents64", "unlink", "unlinkat", "rename", "mkdir",
    "access", "readahead", "fadvise64", "copy_file_range", "sendfile", "splice", "msync", "io_getevents", "io_submit",
    "io_uring_enter", "flock"))
LOCK_CALLS = frozenset(("futex", "futex_waitv", "semop", "semtimedop"))
SLEEP_CALLS = frozenset(("nanosleep", "clock_nanosleep", "pause", "sched_yield"))
POLL_CALLS = frozenset(("poll", "ppoll", "select", "pselect6", "epoll_wait", "epoll_pwait", "epoll_pwait2"))
AT_FDCWD = -100
# a futex deadline this close (beyond the switch interval) or past marks a GIL wait (_short_timeout)
SHORT_TIMEOUT_SLACK_NS = 2_000_000
# ... and one this far past is none: the slot was read after the wait (a stale stack slot, e.g. 0)
STALE_DEADLINE_NS = 1_000_000_000
# an fd's file (fdinfo: flags, mount, inode) is looked up again after this long: a loop of reads on one
# fd costs one lookup per period, not one per tick; a closed and reused fd number is seen after it
FD_RECHECK_NS = 50_000_000
# a thread blocked in the very same call (an unchanged syscall line) for BACKOFF_AFTER probes in a row (an idle pool thread on its
# futex, a poll loop) is probed on every (BACKOFF_SKIP + 1)-th tick only: a probe costs 3-30 us (the
# kernel waits for the task to be off its CPU), 16 idle threads at 200 Hz would take 1-10 % of a core.
# A change of its call is seen up to BACKOFF_SKIP ticks late (40 ms at 200 Hz); any tick it runs resets.
BACKOFF_AFTER = 10
BACKOFF_SKIP = 7
# a thread found runnable or waiting for the GIL (no call to name) IDLE_AFTER times in a row is probed on
# every (IDLE_SKIP + 1)-th tick (threads off the inference path only): under GIL contention every Python thread is off-CPU part of each interval
# and each probe found nothing (zoo_threadpool.py: the sampler's steady rate fell from 55-66 to 29-32 Hz
# through its GIL budget, probes at 60-70 us each under load)
IDLE_AFTER = 4
IDLE_SKIP = 3
# threads off the inference path (not main, no open scope) are read on every SIDE_EVERY-th blocked tick:
# a probe costs 20-80 us of the sampler's CPU on a loaded 2-core host (the /proc read, decoding, the
# frame walk), which its GIL budget turns into a lower tick rate (zoo_threadpool-like pool of 2 Python
# threads: 70 -> 45 Hz probing every thread on every tick)
SIDE_EVERY = 4
# The probes' own budget: at most this fraction of wall time of the sampler thread's CPU (GIL held) per
# second; the sampler's GIL_BUDGET (which paces its tick rate) leaves the probe's CPU out, so probing
# costs at most this much more GIL time, not a lower sampling rate (paced together, a pool of Python
# threads under GIL contention went from 70 to 45 Hz).
PROBE_BUDGET = 0.005


def arch_table(machine: str | None = None) -> dict:
    m = (machine or platform.machine()).lower()
    if m in ("amd64", "x64"):
        m = "x86_64"
    if m == "arm64":
        m = "aarch64"
    return SYSCALLS.get(m, {})


def kind_of(name: str) -> str:
    """io | lock | sleep | poll | other (syscall name)."""
    if name in IO_CALLS:
        return "io"
    if name in LOCK_CALLS:
        return "lock"
    if name in SLEEP_CALLS:
        return "sleep"
    if name in POLL_CALLS:
        return "poll"
    return "other"


# calls whose third argument is a byte count
SIZE_ARG = frozenset(("read", "write", "pread64", "pwrite64"))
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


def _pread_at(fd: int, n: int, off: int) -> bytes:
    """pread(2) at an offset with the GIL held (rawio.py: a released GIL costs the sampler a hand-over)."""
    if rawio._pread is None:
        return os.pread(fd, n, off)
    buf = ctypes.create_string_buffer(n)
    r = rawio._pread(fd, buf, n, off)
    if r < 0:
        raise OSError(ctypes.get_errno(), "pread failed")
    return buf.raw[:r]


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


class Probe:
    """Per-thread probes for the sampler (one instance per sampler; called from its thread only)."""

    def __init__(self, append, code_domain, machine: str | None = None) -> None:
        """``append``: the ring buffer's append; ``code_domain(code) -> int`` (0 = transparent)."""
        self.append = append
        self.table = arch_table(machine)
        self.code_domain = code_domain
        self._files: dict = {}     # tid -> fd of its syscall file (None: unreadable)
        self._last: dict = {}      # tid -> (raw line, name, detail)
        self._cur: dict = {}       # tid -> (name, detail) of the last mark appended
        self._paths: dict = {}     # (fd, mount, inode) -> (path, flags)
        self._recent: dict = {}    # fd -> (monotonic ns of the last fdinfo check, (path, flags))
        self._details: dict = {}   # label tuple -> its JSON (interned once)
        self._backoff: dict = {}   # tid -> [probes in an unchanged call, ticks left to skip]
        self._io_loop: set = set()  # tids whose last call named was an I/O call (an I/O loop: no idle backoff)
        self._hit = False          # the last label() came from an unchanged syscall line
        self._gil = False          # ... and was a GIL wait (futex deadline within the switch interval)
        self._gil_frame = None     # ... and the frame it waited at
        self._futex_gil: dict = {}  # futex address -> its timed waits are the GIL's
        self._side: dict = {}      # tid -> blocked ticks of a side thread
        self._crit_lock = False    # a thread on the inference path is in a lock wait (its last probe's label)
        self._iovs: dict = {}      # (iovec address, count) -> (monotonic ns, total bytes)
        self._mem = None           # fd of /proc/self/mem (-1: unreadable)
        self.probes = 0
        self.marks = 0
        self.ns = 0                # sampler CPU time spent in probes (thread_time_ns)
        self.tick_cpu = 0          # ... since the sampler last reset it (its GIL budget leaves it out)
        self.skipped = 0           # probes left out by PROBE_BUDGET
        self._win_end = 0
        self._win_cpu = 0

    # --- reading ------------------------------------------------------------
    def _read(self, tid: int) -> bytes | None:
        f = self._files.get(tid, -2)
        if f == -2:
            try:
                f = ProcFile(f"/proc/self/task/{tid}/syscall", 256)
            except OSError:
                f = None
            self._files[tid] = f
        if f is None:
            return None
        try:
            return f.read()
        except OSError:
            return None

    def _fd_path(self, fd: int) -> tuple[str, list] | None:
        """(path, [O_DIRECT/O_DSYNC/O_SYNC/O_APPEND flags it was opened with]) of one of our fds.
        /proc/self/fdinfo/<fd> (read with the GIL held) gives the flags and the (mount, inode) key of
        the cache; readlink (which releases the GIL) runs once per new file."""
        if fd < 0:
            return None
        now = time.monotonic_ns()
        hit = self._recent.get(fd)
        if hit is not None and now - hit[0] < FD_RECHECK_NS:
            return hit[1]
        r = self._fd_lookup(fd)
        if len(self._recent) > 1024:
            self._recent.clear()
        self._recent[fd] = (now, r)
        return r

    def _fd_lookup(self, fd: int) -> tuple[str, list] | None:
        try:
            info = read_small(f"/proc/self/fdinfo/{fd}", 1024)
        except OSError:
            return None
        fields = {}
        for ln in info.splitlines():
            k, _, v = ln.partition(b":")
            if k in (b"flags", b"mnt_id", b"ino"):
                fields[k] = v.strip()
        try:
            flags = flag_names(int(fields.get(b"flags", b"0"), 8))
        except ValueError:
            flags = []
        key = (fd, fields.get(b"mnt_id"), fields.get(b"ino"))
        p = self._paths.get(key) if key[2] is not None else None
        if p is None:
            try:
                p = (clean_path(os.readlink(f"/proc/self/fd/{fd}")), flags)
            except OSError:
                return None
            if len(self._paths) > 4096:
                self._paths.clear()
            self._paths[key] = p
        return p

    def _user_str(self, addr: int) -> str | None:
        """A NUL-terminated string at ``addr`` in our own memory (/proc/self/mem: a bad address is an
        error, not a fault)."""
        if addr <= 0 or self._mem_fd() < 0:
            return None
        try:
            b = _pread_at(self._mem, 512, addr)
        except (OSError, OverflowError, ValueError):
            return None
        b = b.split(b"\0", 1)[0]
        return clean_path(os.fsdecode(b)) if b else None

    def _iov_bytes(self, addr: int, cnt: int) -> int | None:
        """Total length of the first (up to 64) iovecs at ``addr`` in our own memory (readv/preadv2...)."""
        if addr <= 0 or self._mem_fd() < 0:
            return None
        n = min(cnt, 64)
        try:
            b = _pread_at(self._mem, 16 * n, addr)
        except (OSError, OverflowError, ValueError):
            return None
        if len(b) < 16 * n:
            return None
        return sum(int.from_bytes(b[16 * i + 8:16 * i + 16], sys.byteorder) for i in range(n))

    def _gil_futex(self, tid: int, raw: bytes, uaddr: int, op: int, addr: int) -> bool | None:
        """A timed futex wait is the GIL's when its deadline is short (_short_timeout); decided once per
        futex address (the GIL's condition variable has a fixed address; reading the deadline from
        /proc/self/mem costs ~50-70 us of kernel CPU under GIL contention, which the sampler's GIL
        budget turned into a 40 % lower tick rate).  None: undecided, nothing cached - the deadline was
        read after the wait had ended (the thread's syscall line changed meanwhile) or is no deadline at
        all; the slot is on the waiter's stack, and a GIL wait that had ended when it was read gave another
        call's data there (a 'deadline' 113,296 s away, or 0): that one read, cached for the address,
        named every later GIL wait on it a lock wait - lock_wait beside gil_contention in zoo_gil.py beside a
        CPU hog, 4 runs of 45; the syscall line had changed at the first read of the GIL's address in 10 runs of
        15)."""
        k = self._futex_gil.get(uaddr)
        if k is None:
            k = self._short_timeout(op, addr)
            if k is None or self._read(tid) != raw:
                return None
            if len(self._futex_gil) > 4096:
                self._futex_gil.clear()
            self._futex_gil[uaddr] = k
        return k

    def _short_timeout(self, op: int, addr: int) -> bool | None:
        """A futex wait whose deadline is at most the GIL switch interval (+ SHORT_TIMEOUT_SLACK_NS) away,
        or already past (by at most STALE_DEADLINE_NS: a waiter that timed out and waits for a CPU): CPython's
        GIL wait (take_gil waits on its condition for one switch interval at a time, 5 ms); a
        Lock/Condition/queue wait with a timeout has its own, usually longer, deadline.  FUTEX_WAIT (op 0)
        takes a relative timeout, FUTEX_WAIT_BITSET (9) an absolute one on CLOCK_MONOTONIC, or
        CLOCK_REALTIME with FUTEX_CLOCK_REALTIME (256).  False where our memory cannot be read (a lock, as
        before).  None: no valid timespec there (tv_nsec outside [0, 1e9), a negative relative timeout, a
        deadline further past): not the deadline of a wait in progress."""
        if self._mem_fd() < 0:
            return False
        try:
            b = _pread_at(self._mem, 16, addr)
        except (OSError, OverflowError, ValueError):
            return False
        if len(b) < 16:
            return False
        sec = int.from_bytes(b[:8], sys.byteorder, signed=True)
        nsec = int.from_bytes(b[8:], sys.byteorder, signed=True)
        if not 0 <= nsec < 1_000_000_000 or sec < 0:
            return None
        v = sec * 1_000_000_000 + nsec
        cmd = op & 0x7f
        if cmd == 0:
            rem = v
        elif cmd == 9:
            rem = v - time.clock_gettime_ns(time.CLOCK_REALTIME if op & 256 else time.CLOCK_MONOTONIC)
        else:
            return False
        if rem < -STALE_DEADLINE_NS:
            return None
        return rem <= sys.getswitchinterval() * 1e9 + SHORT_TIMEOUT_SLACK_NS

    def _mem_fd(self) -> int:
        if self._mem is None:
            try:
                self._mem = os.open("/proc/self/mem", os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                self._mem = -1
        return self._mem

    def _frame(self, frame) -> tuple[str | None, str | None]:
        """(the innermost non-transparent frame, the innermost frame if different) as 'file:line func'."""
        inner = None
        f = frame
        depth = 0
        dom = self.code_domain
        while f is not None and depth < 96:
            co = f.f_code
            lab = f"{os.path.basename(co.co_filename)}:{f.f_lineno} {co.co_name}"
            if inner is None:
                inner = lab
            if dom(co):
                return lab, (inner if inner != lab else None)
            f = f.f_back
            depth += 1
        return inner, None

    def label(self, tid: int, frame) -> tuple[str | None, str | None]:
        """(name, detail JSON) of what the thread is blocked in now; (RUNNING, None) when it runs;
        (None, None) when its syscall file cannot be read."""
        raw = self._read(tid)
        if raw is None:
            return None, None
        last = self._last.get(tid)
        self._hit = last is not None and last[0] == raw
        if self._hit:
            # the same call with the same arguments at the same place (an idle pool thread's futex, a
            # poll, a blocking read): same label (known limit: an fd number closed and reused for
            # another file, with identical arguments, keeps the earlier file's name)
            self._gil, self._gil_frame = last[3], last[4]
            return last[1], last[2]
        self._gil, self._gil_frame = False, None
        d = decode(raw, self.table)
        if d is None:
            name, detail = (RUNNING, None) if raw.startswith(b"running") else ("blocked", None)
        else:
            name, args = d
            info = {}
            if name in FD_CALLS and args:
                info["fd"] = args[0]
                p = self._fd_path(args[0])
                if p is not None:
                    info["path"] = p[0]
                    if p[1]:
                        info["flags"] = p[1]
                if name in SIZE_ARG and len(args) > 2 and 0 <= args[2] < 1 << 40:
                    info["size"] = args[2]
                elif name in IOV_CALLS and len(args) > 2 and 0 < args[2] <= 1024:
                    # the same iovec array (a loop reusing its buffers) is read once per FD_RECHECK_NS
                    now = time.monotonic_ns()
                    hit = self._iovs.get((args[1], args[2]))
                    if hit is not None and now - hit[0] < FD_RECHECK_NS:
                        n = hit[1]
                    else:
                        n = self._iov_bytes(args[1], args[2])
                        if len(self._iovs) > 256:
                            self._iovs.clear()
                        self._iovs[(args[1], args[2])] = (now, n)
                    if n is not None:
                        info["size"] = n
            elif name in PATH_ARG and len(args) > PATH_ARG[name]:
                p = self._user_str(args[PATH_ARG[name]])
                if p is not None:
                    info["path"] = p
            if name == "futex" and len(args) > 3:
                info["timed"] = args[3] != 0
                gil = self._gil_futex(tid, raw, args[0], args[1], args[3]) if args[3] else False
                if gil is None:
                    # the wait ended while its deadline was read: no label this tick (the one in
                    # force stays; the next tick reads the thread again)
                    self._last.pop(tid, None)
                    self._hit = False
                    return None, None
                if gil:
                    info["short_timeout"] = True
                    self._gil = True
                elif not args[3] and args[1] & 0x7f == 0:
                    # untimed FUTEX_WAIT: glibc's pthread_mutex_lock (lll_lock_wait), e.g. the GIL's own
                    # mutex taken by every thread that wants the GIL; CPython's locks, conditions,
                    # events, queues and joins wait on semaphores: FUTEX_WAIT_BITSET (op 9)
                    info["mutex"] = True
                    self._gil = True
            if self._gil:
                cur = self._cur.get(tid)
                if cur is None or cur[0] == RUNNING:
                    # a GIL wait with no call label in force: nothing to compare its frame with (the
                    # common case under GIL contention: keep the probe cheap)
                    self._last[tid] = (raw, name, None, True, None)
                    return name, None
            fr, via = self._frame(frame)
            if self._gil:
                self._gil_frame = fr
            if fr:
                info["frame"] = fr
            if via:
                info["via"] = via
            if info:
                key = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in info.items()))
                detail = self._details.get(key)
                if detail is None:
                    if len(self._details) > 4096:
                        self._details.clear()
                    detail = self._details[key] = json.dumps(info, sort_keys=True)
            else:
                detail = None
        self._last[tid] = (raw, name, detail, self._gil, self._gil_frame)
        return name, detail

    # --- the sampler's hook -------------------------------------------------
    def probe(self, tid: int, at_ns: int, frame, blocked: bool, side: bool = False) -> None:
        """One tick of one thread: ``blocked`` (off-CPU for part of the interval since its previous
        tick) reads what it waits in; otherwise it runs.  A mark is appended at ``at_ns`` when the label
        changed.  ``side``: a thread that is not on the inference path (not the main thread, no open
        scope()): its blocked ticks are read every SIDE_EVERY-th time only (its labels only describe
        what other threads did during a lock wait).  Its cost is added to ``ns``."""
        if side and blocked and not self._crit_lock:
            # (while a thread on the inference path waits for a lock, every tick: what the others do then is
            # the lock_wait finding's evidence - read every 4th tick, a holder's 40 ms sleep kept the label of
            # its wait before it for up to 20 ms, and that wait read as its state in 3 runs of 8)
            n = self._side.get(tid, 0) + 1
            self._side[tid] = n
            if n % SIDE_EVERY:
                return
        if blocked:
            # own budget (PROBE_BUDGET of the sampler thread's CPU per wall second); beyond it the probe
            # pauses until the next second (the labels in force stay)
            if at_ns >= self._win_end:
                self._win_end = at_ns + 1_000_000_000
                self._win_cpu = 0
            elif self._win_cpu > PROBE_BUDGET * 1e9:
                self.skipped += 1
                return
        c0 = time.thread_time_ns()
        try:
            self._probe(tid, at_ns, frame, blocked, side)
        finally:
            d = time.thread_time_ns() - c0
            self.ns += d
            self.tick_cpu += d
            self._win_cpu += d
            if not side:
                cur = self._cur.get(tid)
                self._crit_lock = cur is not None and cur[0] is not None and cur[0] != RUNNING and \
                    kind_of(cur[0]) == "lock"

    def _probe(self, tid: int, at_ns: int, frame, blocked: bool, side: bool = False) -> None:
        if blocked:
            b = self._backoff.get(tid)
            if b is not None and b[1] > 0:     # blocked in the same call for a while: probe less often
                b[1] -= 1
                return
            self.probes += 1
            name, detail = self.label(tid, frame)
            if name is None:      # not readable (another process's tid, a thread gone): no mark
                return
            if name == RUNNING and frame is not None:
                # runnable at the tick (woke up, waiting for a CPU or for the GIL): same rule as a GIL
                # wait below - at the frame of the label in force, it just returned from that call
                cur = self._cur.get(tid)
                if cur is not None and cur[0] != RUNNING and cur[1]:
                    fr = self._frame(frame)[0]
                    if fr and f'"frame": {json.dumps(fr)}' in cur[1]:
                        return
            if self._gil:
                # waiting for the GIL (the sampler holds it during this very tick, or another thread):
                # the thread came back from a call.  At the frame of the label in force (the same
                # call site: an I/O loop's read just returned) that label stays; elsewhere the wait is
                # no call of its own: unattributed (RUNNING).  The GIL wait itself is gil_contention's
                # (from the other threads' Python samples).
                cur = self._cur.get(tid)
                if cur is not None and cur[0] != RUNNING and self._gil_frame and cur[1] and \
                        f'"frame": {json.dumps(self._gil_frame)}' in cur[1]:
                    return
                name, detail = RUNNING, None
        else:
            self._backoff.pop(tid, None)
            if tid not in self._cur:
                return
            name, detail = RUNNING, None
        cur = (name, detail)
        if blocked:
            # back off only from a thread in the very same call (same syscall line: arguments, stack
            # and program counters), never from one that comes and goes (an I/O loop, a running thread)
            if self._hit and name != RUNNING and self._cur.get(tid) == cur:
                b = self._backoff.setdefault(tid, [0, 0])
                b[0] += 1
                if b[0] >= BACKOFF_AFTER:
                    b[1] = BACKOFF_SKIP
            elif name == RUNNING and (side or tid not in self._io_loop) and self._cur.get(tid) == cur:
                # nothing to name again (runnable, or waiting for the GIL: Python threads under GIL
                # contention): probed on every (IDLE_SKIP + 1)-th tick after IDLE_AFTER such probes - not a
                # thread on the inference path whose last call was an I/O call (probed at every tick, a thread
                # under GIL contention had its GIL waits misread as lock waits more often): in an I/O loop of short calls (~90 us O_DIRECT reads) most
                # probes find it back from its call, and backing off from it left 150 ms of zoo_disk_io's
                # waiting unnamed (blocking_io missing in 2-3 of 8 runs, io 0-5 % of the window; 8 of 8
                # named without the backoff, 11-74 %)
                b = self._backoff.setdefault(tid, [0, 0])
                b[0] += 1
                if b[0] >= IDLE_AFTER:
                    b[1] = IDLE_SKIP
            else:
                self._backoff.pop(tid, None)
        if name != RUNNING:
            if kind_of(name) == "io":
                self._io_loop.add(tid)
            else:
                self._io_loop.discard(tid)
        if self._cur.get(tid) != cur:
            self._cur[tid] = cur
            self.append((0, MARK, tid, at_ns, at_ns, name, detail, CAT))
            self.marks += 1

    def io_wait(self, tid: int) -> bool:
        """The thread's current label is an I/O system call (kind_of: read/write/fsync/...); used by the
        sampler's kernel-time rule (kernel_time.py: the call's own CPU is part of the wait)."""
        cur = self._cur.get(tid)
        return cur is not None and cur[0] is not None and kind_of(cur[0]) == "io"

    def forget(self, tid: int) -> None:
        f = self._files.pop(tid, None)
        if f is not None and f != -2:
            f.close()
        self._last.pop(tid, None)
        self._cur.pop(tid, None)
        self._backoff.pop(tid, None)
        self._side.pop(tid, None)
        self._io_loop.discard(tid)

    def close(self) -> None:
        for tid in list(self._files):
            self.forget(tid)
        if self._mem is not None and self._mem >= 0:
            try:
                os.close(self._mem)
            except OSError:
                pass
        self._mem = None
