"""What one blocked thread waits in, read from /proc: the label of an off-CPU probe (blocking.py).

``Labeler.label`` reads ``/proc/self/task/<tid>/syscall`` (the system call number and its six arguments,
or "running"; one pread of a file kept open per thread), decodes the number with the table of this
machine's architecture (blocking_syscalls.py: x86_64, aarch64), and names:
  - the file of fd-taking calls (read/pread64/write/fsync/...: ``os.readlink('/proc/self/fd/<fd>')``,
    cached per (fd, device, inode) from an fstat, so a reused fd number is not mistaken for the old
    file), and the path argument of openat/newfstatat/statx/unlinkat (read from our own memory
    through /proc/self/mem: a bad pointer is EIO, never a crash);
  - for futex, whether the wait has a timeout (a lock/condition/queue without timeout is untimed)
    and whether that deadline is within the GIL switch interval (CPython's GIL wait, one switch
    interval at a time; the deadline is read from our own memory): blocking.Probe then writes no mark when
    it waits at the frame of the label in force (a thread back from its blocking call waits for the
    GIL the sampler holds during the tick: labelled as GIL, 50 ms of a disk-I/O loop's reads read as
    GIL waits); elsewhere it ends that label (``running``: unattributed).  So does an untimed
    FUTEX_WAIT (op 0), glibc's mutex wait - the GIL's mutex -, while CPython's Lock/Condition/Event/
    queue/join wait with FUTEX_WAIT_BITSET (op 9) and are lock waits;
  - the waiting Python frame: the innermost frame outside the standard library, unknown libraries
    and InferScope (``file:line function``), and the innermost frame when that differs (``via``).
Races (the fd closed meanwhile, the thread gone) and permission errors give a partial label, never
an exception into the sampler.

Cost (measured on the 2-vCPU VM): one pread of the syscall file ~3 us, fstat ~1 us, readlink ~5 us
(cached); a thread whose syscall line did not change since its previous probe reuses its label.
All reads but readlink keep the GIL held (rawio.py: a released GIL costs the sampler a hand-over,
5-30 ms under GIL contention).
"""
from __future__ import annotations

import ctypes
import json
import os
import sys
import time

from . import rawio
from .blocking_syscalls import (FD_CALLS, IOV_CALLS, PATH_ARG, RUNNING, SIZE_ARG, arch_table, clean_path, decode,
                                flag_names)
from .rawio import ProcFile, read_small

# a futex deadline this close (beyond the switch interval) or past marks a GIL wait (_short_timeout)
SHORT_TIMEOUT_SLACK_NS = 2_000_000
# ... and one this far past is none: the slot was read after the wait (a stale stack slot, e.g. 0)
STALE_DEADLINE_NS = 1_000_000_000
# an fd's file (fdinfo: flags, mount, inode) is looked up again after this long: a loop of reads on one
# fd costs one lookup per period, not one per tick; a closed and reused fd number is seen after it
FD_RECHECK_NS = 50_000_000


def _pread_at(fd: int, n: int, off: int) -> bytes:
    """pread(2) at an offset with the GIL held (rawio.py: a released GIL costs the sampler a hand-over)."""
    if rawio._pread is None:
        return os.pread(fd, n, off)
    buf = ctypes.create_string_buffer(n)
    r = rawio._pread(fd, buf, n, off)
    if r < 0:
        raise OSError(ctypes.get_errno(), "pread failed")
    return buf.raw[:r]


class Labeler:
    """The reading half of blocking.Probe (its base class): what each thread is blocked in now, with the
    caches that keep it cheap.  Called from the sampler's thread only."""

    def __init__(self, code_domain, machine: str | None = None) -> None:
        """``code_domain(code) -> int`` (0 = transparent)."""
        self.table = arch_table(machine)
        self.code_domain = code_domain
        self._files: dict = {}     # tid -> fd of its syscall file (None: unreadable)
        self._last: dict = {}      # tid -> (raw line, name, detail)
        self._cur: dict = {}       # tid -> (name, detail) of the last mark appended (blocking.Probe)
        self._paths: dict = {}     # (fd, mount, inode) -> (path, flags)
        self._recent: dict = {}    # fd -> (monotonic ns of the last fdinfo check, (path, flags))
        self._details: dict = {}   # label tuple -> its JSON (interned once)
        self._hit = False          # the last label() came from an unchanged syscall line
        self._gil = False          # ... and was a GIL wait (futex deadline within the switch interval)
        self._gil_frame = None     # ... and the frame it waited at
        self._futex_gil: dict = {}  # futex address -> its timed waits are the GIL's
        self._iovs: dict = {}      # (iovec address, count) -> (monotonic ns, total bytes)
        self._mem = None           # fd of /proc/self/mem (-1: unreadable)

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

    def _fd_info(self, name: str, args: list, info: dict) -> None:
        """A file-descriptor call's fd, its file's path and open flags, and the bytes asked for (``info``)."""
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
                self._fd_info(name, args, info)
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
