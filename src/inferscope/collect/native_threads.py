"""Native threads of the process (not known to Python): Rayon pools of HF tokenizers, OpenMP/BLAS
worker threads.  Python's frames cannot show them, so a main thread that waits for them looks idle
(the zoo's Rayon-parallel encode_batch: 92 % "waiting" for a phase that was tokenization).

Every NATIVE_PERIOD_NS the sampler calls ``NativeThreads.tick``: the process's tasks (the list re-read
only when the thread count changes, system._tasks) minus the Python threads are native; each one
(up to NATIVE_MAX_THREADS) gets its run time from /proc/self/task/<tid>/schedstat (ns, read with
the GIL held) and a perf task-clock IP sampler (perfip.py), whose samples tell the role of the code
it ran.  Its CPU time of the period becomes CPU_SAMPLE spans on its own track, split by the role
fractions: numeric libraries -> cpu_compute, native tokenizers -> tokenization; time in other code
(libc, the interpreter, unknown libraries) is not emitted (a poller or an I/O thread must not
explain the main thread's waiting).  Where in the period the CPU time fell is not known (+-25 ms):
the threads' blocks are laid end to end from the period's start (see ``tick``).  The breakdown counts them where the critical
thread does nothing of its own (analyze/breakdown.py, like followed children).  A thread's run-queue
delay (schedstat, runnable but waiting for a core) becomes class run_queue once its role is known,
laid after every thread's CPU blocks of the period.  Needs perf; without
it nothing is recorded (the role is unknown).
"""
from __future__ import annotations

import os
import threading

from .. import vocab as V
from .perfip import COMPUTE, FRAMEWORK, PYTHON, TOKENIZER, PerfIP
from .rawio import ProcFile, read_small, start_perf_ns
from .system import _tasks

CPU_SAMPLE = 11             # SpanKind.CPU_SAMPLE (the sampler's events)
NATIVE_PERIOD_NS = 25_000_000   # how often native threads are read (placement error +- this)
NATIVE_CARRY_PERIODS = 4   # a newborn thread's time held back at most this many periods waiting for its role
_START_RES_NS = 1_000_000_000 // (os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100)  # /proc starttime
NATIVE_MAX_THREADS = 32     # native threads followed at most (OpenMP pools of big hosts: enough to explain a wait)
CLS = {COMPUTE: V.CLS_CPU_COMPUTE, TOKENIZER: V.CLS_TOKENIZATION}
ROLE_TEXT = {COMPUTE: "numeric library code", TOKENIZER: "native tokenizer code"}


class _Native:
    __slots__ = ("tid", "sched", "perf", "run_ns", "rq_ns", "t", "name", "role", "carry")

    def __init__(self, tid: int, sched: ProcFile, perf: PerfIP, run_ns: int, rq_ns: int, t: int, name: str) -> None:
        self.tid, self.sched, self.perf, self.run_ns, self.rq_ns, self.t, self.name = tid, sched, perf, run_ns, rq_ns, t, name
        self.role = None    # the last period's main role (a period with CPU or run-queue time but no sample keeps it)
        self.carry = 0      # periods its time may still be held back while its role is unknown (a thread born lately)

    def close(self) -> None:
        self.sched.close()
        self.perf.close()


class NativeThreads:
    def __init__(self, append, period_ns: int, since_ns: int | None = None) -> None:
        self.append = append
        self.since_ns = since_ns            # when collection began (a thread started later: all its time is ours)
        self.period_ns = period_ns
        self.threads: dict[int, _Native] = {}
        self.names: dict[int, str] = {}     # tid -> track name, for the trace
        self.seen: set[int] = set()         # tids that got spans
        self.refused: set[int] = set()      # tids not followed (no perf, over the cap, gone)
        self.cache: dict = {}
        # the role with the most native CPU time in the last period (None: no native thread ran code of a
        # known role): a Python thread waiting in a call that these threads serve (Rayon's encode_batch)
        # spends its own on-CPU moments in libc on the same work (sampler.py, libc-only intervals)
        self.active_role = None
        self.last_t = None                  # the previous tick (None: none yet)
        self.pid = os.getpid()
        try:
            self.stat = ProcFile("/proc/self/stat", 1024)
        except OSError:
            self.stat = None

    def _native_tids(self) -> list[int]:
        try:
            stat = self.stat.read() if self.stat is not None else None
            tids = _tasks(self.pid, stat, self.cache)
        except OSError:
            return []
        py = {t.native_id for t in threading.enumerate()}
        return [int(x) for x in tids if x.isdigit() and int(x) not in py]

    def _born(self, tid: int) -> int | None:
        """Since when all of a newly seen thread's CPU and run-queue time is to be counted, when it began
        after collection did: from its start (at most 10 ms early: /proc's resolution), or from the previous
        tick when it is younger than that; None: older than collection, or its start unknown (its past
        time is not the workload's, or not known when: counted from now)."""
        start = start_perf_ns(f"/proc/self/task/{tid}/stat")
        if start is None or self.since_ns is None or start + _START_RES_NS < self.since_ns:
            return None
        born = max(start, self.since_ns)
        if self.last_t is not None and start + _START_RES_NS >= self.last_t:
            born = max(born, self.last_t)
        return born

    def _follow(self, tid: int, t: int, born: int | None = None) -> None:
        """Follow ``tid`` from now on; ``born``: it did not exist at the previous tick (at that time), so
        all its CPU and run-queue time is of this period (an OpenMP pool or a Rayon pool made by the first
        call: its first 0-25 ms were lost, 0-8 % of the zoo's oversubscribed OpenMP window read off-CPU)."""
        if len(self.threads) >= NATIVE_MAX_THREADS:
            self.refused.add(tid)
            return
        sched = perf = None
        try:
            sched = ProcFile(f"/proc/self/task/{tid}/schedstat", 128)
            run, rq = (int(x) for x in sched.read().split()[:2])
            perf = PerfIP.open(tid, self.period_ns)
        except (OSError, ValueError, IndexError):
            run = -1
        if perf is None or run < 0:
            if sched is not None:
                sched.close()
            self.refused.add(tid)
            return
        try:
            comm = read_small(f"/proc/self/task/{tid}/comm", 64).decode("utf-8", "replace").strip()
        except OSError:
            comm = "?"
        if born is not None:
            run, rq, t = 0, 0, born
        n = self.threads[tid] = _Native(tid, sched, perf, run, rq, t, f"{V.NATIVE_THREAD_LABEL} {comm}")
        if born is not None:
            n.carry = NATIVE_CARRY_PERIODS

    def tick(self, t: int, maps) -> None:
        """Emit the native threads' CPU time since the previous call, by role."""
        live = self._native_tids()
        for tid in live:
            if tid not in self.threads and tid not in self.refused:
                self._follow(tid, t, self._born(tid))
        self.last_t = t
        for tid in [x for x in self.threads if x not in live]:
            self.threads.pop(tid).close()
        cursor = 0
        waits = []
        by_role = {COMPUTE: 0, TOKENIZER: 0}
        for n in self.threads.values():
            try:
                run, rq = (int(x) for x in n.sched.read().split()[:2])
                samples = n.perf.read(maps)
            except (OSError, ValueError, IndexError):
                continue
            d, q, t0 = run - n.run_ns, rq - n.rq_ns, n.t
            if n.role is None and not samples and n.carry > 0 and (d > 0 or q > 0):
                # a thread just born (its perf sampler opened now): its time waits for the samples
                # that tell its role, a period or two later, instead of being dropped
                n.carry -= 1
                continue
            n.carry = 0
            n.run_ns, n.rq_ns, n.t = run, rq, t
            span = t - t0
            counts = {COMPUTE: 0, TOKENIZER: 0, PYTHON: 0}
            for _ts, k in samples:
                if k == FRAMEWORK:  # torch's plumbing on a worker (parallel_for set-up): the worker's op, compute
                    k = COMPUTE
                if k in counts:
                    counts[k] += 1
            if counts[COMPUTE] or counts[TOKENIZER]:
                n.role = COMPUTE if counts[COMPUTE] >= counts[TOKENIZER] else TOKENIZER
            if q > 0 and n.role is not None and span > 0:
                # runnable but not running (a busy host): the worker waits for a core - class run_queue,
                # laid after every thread's CPU blocks of the period (below), so the main thread waiting
                # on it reads as CPU contention, not as off-CPU (Rayon encode_batch beside other jobs:
                # 11-12 % of the window read 'waiting' otherwise)
                waits.append((n, min(q, span), t0, span, f"{n.name} ({ROLE_TEXT[n.role]}, waiting for a CPU)"))
            if d <= 0 or not (samples or n.role is not None):
                continue
            # where in the period each thread ran is unknown: the threads' blocks are laid end to end
            # from the period's start (wrapping), so their union is min(period, sum of CPU times) -
            # right for workers that share contended cores, an over-estimate of the union for
            # workers that ran at the same moments on idle cores (then the period is short: +-25 ms)
            if not samples:     # CPU below the perf period (no sample): the role it had
                counts[n.role] = 1
            known = sum(counts.values())
            if not known:
                continue
            d = min(d, span)
            for role in (COMPUTE, TOKENIZER):
                part = int(d * counts[role] / known)
                if part <= 0:
                    continue
                by_role[role] += part
                label = f"{n.name} ({ROLE_TEXT[role]})"
                a = t0 + cursor % span
                first = min(part, t - a)
                self.append((0, CPU_SAMPLE, n.tid, a, a + first, CLS[role], label, "sample"))
                if part > first:              # wrapped to the period's start
                    self.append((0, CPU_SAMPLE, n.tid, t0, t0 + part - first, CLS[role], label, "sample"))
                cursor += part
                self.seen.add(n.tid)
                self.names[n.tid] = n.name
        best = max(by_role, key=by_role.get)
        self.active_role = best if by_role[best] > 0 else None
        for n, q, t0, span, label in waits:
            a = t0 + cursor % span
            first = min(q, t - a)
            self.append((0, CPU_SAMPLE, n.tid, a, a + first, V.CLS_RUN_QUEUE, label, "sample"))
            if q > first:
                self.append((0, CPU_SAMPLE, n.tid, t0, t0 + q - first, V.CLS_RUN_QUEUE, label, "sample"))
            cursor += q
            self.names[n.tid] = n.name

    def close(self) -> None:
        for n in self.threads.values():
            n.close()
        self.threads.clear()
        if self.stat is not None:
            self.stat.close()
            self.stat = None
