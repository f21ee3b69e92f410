"""The perf resolver's rules, named and in order (issue 40): how one pending tick's interval (a ``layout.Tick``) is
cut into classed parts from the facts the sampler measured and the perf IP samples taken in it.

``decide`` runs ``RULES`` for every pending tick of a thread, in the order listed; each rule is a small function of
the interval being decided (``Iv``) and says in its docstring what it does and why.  A rule that lays a part writes
it through ``put``, which also tallies the part's time under the rule's name when the sampler asks for it
(``s.rule_ns``: `inferscope analyze --replay --rules`).  The sampler calls ``decide`` at each perf drain
(resolve.py), and the replay of recorded facts calls the very same function (replay.py): rules are tested on
hand-built and recorded facts without a live run (tests/test_facts_*.py).
"""
from __future__ import annotations

from .. import thresholds as T
from . import kernel_time as K
from . import thread_state as TS
from .rule_interval import Iv, put
from .rules_perf import count_samples, fault_kernel_part, native_fractions, split_interval
from .tick_rules import CLASS_RULES, TICK_RULES
from .thread_state import (CLS_COMPUTE, CLS_FAULTS, CLS_FRAMEWORK, CLS_RUNQ, CLS_WAITING, KEEP, PY_CLASSES,
                           perf_kernel_share)

__all__ = ["Iv", "put", "decide", "rules_table", "RULES", "PERF_RULES"]


def python_context(iv: Iv) -> None:
    """Remember the previous tick's Python class and the interval's midpoint.

    The Python class of the tick before this one and the interval's midpoint: interpreter samples of its first half
    ran nearer that tick than this one (``split_interval``: transformers' Python of a tokenizer call read framework
    when the next tick landed in the forward, +5-7 points in zoo_hf_tokenizer)."""
    st, cls = iv.st, iv.cls
    iv.py_prev = st.py_last
    st.py_last = iv.fallback if cls is None else (cls if cls in PY_CLASSES else None)
    iv.mid = iv.prev + (iv.t - iv.prev) // 2


def keep_current(iv: Iv) -> None:
    """A KEEP tick continues the thread's current class.

    A KEEP tick (an isolated voluntary GIL hand-over: the frame says where the thread released the GIL, not what
    it ran) continues the thread's current class (a pending KEEP always follows a decided tick); after a page-fault
    part, the compute that faulted."""
    if iv.cls is KEEP:
        c = iv.st.cls
        iv.cls = CLS_COMPUTE if c is CLS_FAULTS else (c or CLS_FRAMEWORK)


def off_cpu_part(iv: Iv) -> None:
    """The off-CPU time (CPU clock) is 'waiting': first if on CPU at the tick, else last.

    The interval's off-CPU time, measured by the thread's CPU clock, is 'waiting': first when the thread is on CPU
    at the tick (it ran after it woke up), last when it is off CPU (it ran, then blocked); exact boundaries."""
    off = iv.off
    if off > 0:
        iv.prev += off
        put(iv, iv.prev, CLS_WAITING, None, "off_cpu_part")
    elif off < 0:
        iv.end = iv.t + off


def run_queue_part(iv: Iv) -> None:
    """The run-queue delay (schedstat) is 'run_queue', before the on-CPU part.

    Runnable but not running (schedstat's run-queue delay) is 'run_queue', placed right before the on-CPU part (a
    thread waits for a CPU after it wakes up) - not the program's work: a disk-I/O loop beside other jobs read 31-56 %
    cpu_compute before."""
    rq = iv.rq
    if 0 < rq < iv.end - iv.prev:
        iv.prev += rq
        put(iv, iv.prev, CLS_RUNQ, None, "run_queue_part")


def perf_cpu_share(iv: Iv) -> None:
    """Update the thread's kernel share by perf from fully sampled intervals.

    Where perf sampled all of the interval, its CPU time and user-space samples feed the thread's decaying sums
    (thresholds.KERNEL_PERF_SHARE_CPU_NS): its kernel share by perf (thread_state.perf_kernel_share)."""
    pc, st = iv.e.perf_cpu_ns, iv.st
    if pc >= 0 and st.perf is not None:
        d = 1.0 - min(1.0, pc / T.KERNEL_PERF_SHARE_CPU_NS)
        st.pcpu = st.pcpu * d + pc
        st.pn = st.pn * d + (iv.upto(iv.t) - iv.i)


def io_kernel_time(iv: Iv) -> None:
    """A blocking I/O call's kernel CPU is 'waiting', beside the off-CPU part.

    A blocking I/O call's kernel CPU is part of its wait ('waiting'), next to the off-CPU part.  I/O: the probe saw
    an I/O call (blocked == 2), or the thread blocked and perf saw no user code run in the interval - an O_DIRECT read
    of ~90 us the probe missed read as cpu_compute, 2-8 % of zoo_disk_io's window - unless its last samples were native
    code (a Rust tokenizer's allocations are the tokenizer's).  Its length: the stime carry, or the on-CPU time the IP
    samples leave uncovered (each stands for PERF_PERIOD_NS) at the thread's kernel share (all of it for an I/O call;
    a piece of a long interval takes the expected value: zoo_gil lost 20-40 % of its loop's CPU to waiting otherwise).
    A part that fills the interval decides it."""
    st, e, prev, end = iv.st, iv.e, iv.prev, iv.end
    kb = e.blocked
    j = iv.upto(iv.t)
    kio = iv.kio = kb == 2 or (bool(kb) and st.perf is not None and j == iv.i and not (
        st.native_fresh and ((st.native or 0) >= T.NATIVE_RECENT_MIN_SHARE
                             or (st.native_tok or 0) >= T.NATIVE_RECENT_MIN_SHARE)))
    kr = K.kernel_class(e.faults, bool(kb), False, iv.fallback, CLS_COMPUTE, CLS_WAITING, kio)
    if kr is None or kr[1] != K.IO or end <= prev:
        return
    if st.perf is not None:
        share = 1.0 if kb == 2 else max(st.kst.kernel_share() if st.kst is not None else 0.0,
                                        perf_kernel_share(st.pcpu, st.pn))
        if e.piece:
            iv.kns = max(iv.kns, int((end - prev) * share * share))
        else:
            iv.kns = max(iv.kns, int((end - prev - (j - iv.i) * TS.PERF_PERIOD_NS) * share))
    if iv.kns <= 0:
        return
    k = min(iv.kns, end - prev)
    iv.s.kernel_totals.add(K.IO, k, 0)
    if iv.off < 0:
        iv.end -= k
    else:
        iv.prev += k
        put(iv, iv.prev, CLS_WAITING, None, "io_kernel_time")
    if iv.end <= iv.prev:
        if iv.t > iv.prev:
            put(iv, iv.t, CLS_WAITING, None, "io_kernel_time")
        iv.prev = iv.t
        iv.done = True


def decided_class(iv: Iv) -> None:
    """One class for the whole on-CPU part, then the off-CPU tail.

    The interval's one class (the tick's, or the one the samples gave all of it) up to its end, then the off-CPU
    tail.  Exact boundaries next to a measured part (off-CPU, run queue, kernel - page faults end with the interval
    that took them) or a wait known by the CPU clock; else the change is placed at the midpoint since the previous
    tick (Sampler._apply)."""
    st, end = iv.st, iv.end
    cls = iv.cls
    put(iv, end, cls, iv.label, iv.rule or "decided_class", exact=bool(iv.off) or iv.rq > 0 or iv.kx or (
        st.cls is CLS_FAULTS and not iv.e.faults) or (st.clk is not None and (
            cls is CLS_WAITING or st.cls is CLS_WAITING or st.cls is CLS_RUNQ)), tick=iv.e.tick)
    if iv.t > end:
        put(iv, iv.t, CLS_WAITING, None, "off_cpu_part")
    iv.prev = iv.t


# The rules in the order ``decide`` runs them; the rules of a perf-decided interval (a tick whose class needs the IP
# samples) run only for those (PERF_RULES).  `inferscope rules` prints this list.
PERF_RULES = (count_samples, fault_kernel_part, native_fractions, split_interval)
RULES = (python_context, keep_current, off_cpu_part, run_queue_part, perf_cpu_share, io_kernel_time,
         *PERF_RULES, decided_class)


def decide(s, st, pend: list, samples: list) -> None:
    """Decide the pending ticks ``pend`` (layout.Tick) of one thread from its perf IP ``samples``, in order, by RULES.

    Reads the thread's state and, of the sampler ``s``, only ``_native_role()``, ``interval_ns``, ``kernel_totals`` and
    ``rule_ns``; writes runs through ``s._apply`` - so a recorded call replays offline (facts.py, replay.py)."""
    iv = Iv(s, st, samples)
    for e in pend:
        iv.next_tick(e)
        python_context(iv)
        keep_current(iv)
        off_cpu_part(iv)
        run_queue_part(iv)
        perf_cpu_share(iv)
        io_kernel_time(iv)
        if iv.done:
            continue
        if iv.cls is None:
            count_samples(iv)
            fault_kernel_part(iv)
            native_fractions(iv)
            split_interval(iv)
            if iv.done:
                continue
        decided_class(iv)


def rules_table() -> str:
    """The rules in order, one line each (their docstrings' first line): the tick's own (tick_rules.py), then the
    resolver's; `inferscope rules`, ARCHITECTURE.md."""
    lines = ["| # | rule | applies to | what it decides |", "|---|---|---|---|"]
    for k, f in enumerate(TICK_RULES + RULES, 1):
        first = (f.__doc__ or "").strip().splitlines()[0].rstrip(".")
        scope = ("each tick, the first that applies" if f in CLASS_RULES else "each tick" if f in TICK_RULES
                 else "ticks perf decides" if f in PERF_RULES else "every pending tick")
        lines.append(f"| {k} | `{f.__name__}` | {scope} | {first} |")
    return "\n".join(lines)
