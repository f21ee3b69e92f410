"""Why a sampled Python thread is off-CPU: the system call it is blocked in, the file, the Python frame.

At a sampler tick where a thread was mostly off-CPU since its previous tick (the sampler's ``not
oncpu``: it is blocked at the tick), ``Probe.probe`` reads what it waits in (blocking_label.py: the
system call and its arguments from ``/proc/self/task/<tid>/syscall``, decoded with the tables of
blocking_syscalls.py; the file of fd-taking calls or the path argument; for futex, whether the wait
is timed and whether it is CPython's GIL wait; the waiting Python frame).  A GIL wait writes no mark
when it waits at the frame of the label in force (a thread back from its blocking call waits for the
GIL the sampler holds during the tick); elsewhere it ends that label (``running``: unattributed).
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

This module: the probe's scheduling (back-off from a thread in an unchanged call or found with
nothing to name, side threads read every SIDE_EVERY-th blocked tick, its own CPU budget) and its
marks.  Probe reuses Labeler's methods as its base class (no extra call per tick).
"""
from __future__ import annotations

import json
import os
import time

from .blocking_label import Labeler
from ..vocab import OFFCPU_CAT, RUNNING, kind_of

MARK = 13   # SpanKind.MARK
CAT = OFFCPU_CAT

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
# I/O call sites remembered per thread (frame -> label, Probe._io_site); a thread with more starts again
MAX_IO_SITES = 64


class Probe(Labeler):
    """Per-thread probes for the sampler (one instance per sampler; called from its thread only)."""

    def __init__(self, append, code_domain, machine: str | None = None) -> None:
        """``append``: the ring buffer's append; ``code_domain(code) -> int`` (0 = transparent)."""
        super().__init__(code_domain, machine)
        self.append = append
        self._backoff: dict = {}   # tid -> [probes in an unchanged call, ticks left to skip]
        self._io_loop: set = set()  # tids whose last call named was an I/O call (an I/O loop: no idle backoff)
        self._sites: dict = {}     # tid -> {frame: (name, detail)} of the I/O calls named at each call site
        self._site_frame: dict = {}  # detail JSON -> its frame (parsed once)
        self._side: dict = {}      # tid -> blocked ticks of a side thread
        self._crit_lock = False    # a thread on the inference path is in a lock wait (its last probe's label)
        self.probes = 0
        self.marks = 0
        self.ns = 0                # sampler CPU time spent in probes (thread_time_ns)
        self.tick_cpu = 0          # ... since the sampler last reset it (its GIL budget leaves it out)
        self.skipped = 0           # probes left out by PROBE_BUDGET
        self._win_end = 0
        self._win_cpu = 0

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
            gil = self._gil
            if (name == RUNNING or gil) and tid in self._io_loop and frame is not None:
                site = self._io_site(tid, frame)
                if site is not None:
                    # back from (or about to re-enter) an I/O call at a call site where this thread was seen in
                    # that call: a loop of short reads (4 KiB from a slow pipe, ~30-200 us each) is found in the
                    # call itself at few ticks - the sampler's tick takes the GIL the read released, and the
                    # thread is back from it, waiting for the GIL, when the probe reads it - so the label read
                    # 'running' for most of the loop (zoo_pipe_reads.py: 38-58 % of its off-CPU time unnamed)
                    name, detail = site
                    gil = False
            if name == RUNNING and frame is not None:
                # runnable at the tick (woke up, waiting for a CPU or for the GIL): same rule as a GIL
                # wait below - at the frame of the label in force, it just returned from that call
                cur = self._cur.get(tid)
                if cur is not None and cur[0] != RUNNING and cur[1]:
                    fr = self._frame(frame)[0]
                    if fr and f'"frame": {json.dumps(fr)}' in cur[1]:
                        return
            if gil:
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
                if detail is not None:
                    self._note_site(tid, name, detail)
            else:
                self._io_loop.discard(tid)
        if self._cur.get(tid) != cur:
            self._cur[tid] = cur
            self.append((0, MARK, tid, at_ns, at_ns, name, detail, CAT))
            self.marks += 1

    def _note_site(self, tid: int, name: str, detail: str) -> None:
        """Remember an I/O call's label by the Python frame it was called from (per thread, bounded)."""
        fr = self._site_frame.get(detail, 0)
        if fr == 0:
            try:
                fr = json.loads(detail).get("frame")
            except (ValueError, AttributeError):
                fr = None
            if len(self._site_frame) > 4096:
                self._site_frame.clear()
            self._site_frame[detail] = fr
        if fr:
            sites = self._sites.setdefault(tid, {})
            if fr not in sites and len(sites) >= MAX_IO_SITES:
                sites.clear()
            sites[fr] = (name, detail)

    def _io_site(self, tid: int, frame) -> tuple | None:
        """The I/O label this thread was last seen in at its current Python frame (``file:line function``), if any."""
        sites = self._sites.get(tid)
        if not sites:
            return None
        return sites.get(self._frame(frame)[0])

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
        self._sites.pop(tid, None)

    def close(self) -> None:
        for tid in list(self._files):
            self.forget(tid)
        if self._mem is not None and self._mem >= 0:
            try:
                os.close(self._mem)
            except OSError:
                pass
        self._mem = None
