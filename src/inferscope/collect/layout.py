"""Layout of one sampler tick interval whose thread was off CPU or runnable for part of it (collect/sampler.py):
the pending tick tuples its _resolve() turns into spans.  A long interval (the sampler starved of the GIL) is
cut at the thread's CPU readings at scope() edges and laid out in tick-sized pieces.

A pending tick is a ``Tick`` (below): the facts the tick measured about one thread's interval, decided at the next
perf drain (resolve.py) and recorded as such when facts are kept (facts.py).
"""
from __future__ import annotations

from typing import NamedTuple

from .. import thresholds as T


class Tick(NamedTuple):
    """One pending sampler tick of one thread: what the tick measured about the interval since the thread's
    previous tick, ending at ``t``.  The resolver (resolve.py) decides its classes from these facts and the perf
    IP samples taken in it."""
    t: int                  # the tick's time (ns): the interval's end
    cls: object             # the class the tick decided (a class name), None: perf decides, KEEP: the current class
    label: object           # (function "file:func", line) the tick names, or None
    fallback: object        # the stack's class where perf decides (None otherwise)
    gil_free: bool          # the GIL was free at the tick (the no-perf heuristic)
    off: int = 0            # off-CPU ns: > 0 the off-CPU part comes first, < 0 last
    rq: int = 0             # run-queue ns (schedstat), placed before the on-CPU part
    faults: int = 0         # page faults in the interval (kernel_time.py)
    kernel_ns: int = 0      # its kernel-mode CPU ns (stime carry)
    blocked: int = 0        # blocked in this interval or the previous one: 1, in an I/O call: 2
    perf_cpu_ns: int = -1   # its CPU ns where perf sampled all of it, else -1
    tick: bool = True       # the tick's function counts (the last of _pieces only)
    piece: bool = False     # a piece of a long interval (its kernel estimate takes the expected value)


def as_tick(ent) -> Tick:
    """A pending entry as a Tick (a plain tuple of the first 5..13 fields: tests and older callers)."""
    return ent if type(ent) is Tick else Tick(*ent)

# (their rules and numbers: thresholds.py, "live sampler's rules")
LONG_INTERVAL_TICKS = T.LONG_INTERVAL_TICKS
MAX_PIECES = T.MAX_PIECES
SPLIT_MIN_NS = T.SPLIT_MIN_NS


def _pieces(ent: Tick, prev_t: int, interval_ns: int) -> list:
    """One pending tick over [prev_t, t] as k pieces of ~interval_ns (LONG_INTERVAL_TICKS): each with 1/k of the
    off-CPU, run-queue, page-fault, kernel and perf CPU amounts (remainders in the last); the tick's function
    counts once (the last piece's ``tick`` field)."""
    t = ent[0]
    dt = t - prev_t
    k = int(max(1, min(MAX_PIECES, dt // max(1, interval_ns))))
    off, rqn, kf, kns, pc = ent[5], ent[6], ent[7], ent[8], ent[10]
    out = []
    for i in range(1, k + 1):
        last = i == k
        part = (lambda v: v - (v // k if v >= 0 else -((-v) // k)) * (k - 1)) if last else (
            lambda v: v // k if v >= 0 else -((-v) // k))
        out.append(Tick(prev_t + dt * i // k if not last else t, *ent[1:5], part(off), part(rqn), part(kf), part(kns),
                        ent[9], part(pc) if pc >= 0 else -1, last and ent[11], True))
    return out


def _split_at_marks(ent: Tick, prev_t: int, cpu0: int, cpu1: int, marks: list, interval_ns: int) -> list:
    """A long pending tick over [prev_t, t] cut at the thread's CPU readings at scope edges inside it (``marks``:
    (t_ns, thread CPU ns), api._cpu_mark): each part gets its own measured CPU time, the run-queue delay in
    proportion to its time off CPU, the rest off-CPU, its page faults and kernel time in proportion to its CPU;
    long parts are laid out by _pieces.  A window that starts
    at a scope's entry inside a 180 ms interval gets the CPU that ran after it, not 56 % of the interval's
    (zoo_gil: the loop's CPU all came after the scope's entry; uniform pieces put half of it before)."""
    t = ent[0]
    pts = [(mt, mc) for mt, mc in marks if prev_t < mt < t and cpu0 <= mc <= cpu1]
    if not pts:
        return _pieces(ent, prev_t, interval_ns)
    if len(pts) > MAX_PIECES:
        pts = pts[:: -(-len(pts) // MAX_PIECES)]
    bounds = [(prev_t, cpu0), *pts, (t, cpu1)]
    sign = -1 if ent[5] < 0 else 1
    rq_tot = ent[6]
    parts = []
    for (a, ca), (b, cb) in zip(bounds, bounds[1:]):
        dt = b - a
        c = min(dt, max(0, cb - ca))
        parts.append((a, b, dt, c, dt - c))
    idle_tot = sum(p[4] for p in parts)
    cpu_tot = sum(p[3] for p in parts)
    out = []
    rq_left, kf_left, kns_left = rq_tot, ent[7], ent[8]
    for j, (a, b, dt, c, idle) in enumerate(parts):
        last = j == len(parts) - 1
        rq = rq_left if last else (rq_tot * idle // idle_tot if idle_tot else 0)
        rq = max(0, min(rq, idle))
        rq_left -= rq
        off = idle - rq
        # page faults and kernel time by each part's CPU (they happen on CPU)
        kf = kf_left if last else (ent[7] * c // cpu_tot if cpu_tot else 0)
        kns = kns_left if last else (ent[8] * c // cpu_tot if cpu_tot else 0)
        kf_left -= kf
        kns_left -= kns
        sub = Tick(b, *ent[1:5], sign * off, rq, kf, kns, ent[9], c if ent[10] >= 0 else -1, last and ent[11])
        if dt > LONG_INTERVAL_TICKS * interval_ns and (off or rq):
            out.extend(_pieces(sub, a, interval_ns))
        else:
            out.append(sub)
    return out


def owed_run_queue(pending: list, ns: int) -> int:
    """Move ``ns`` of run-queue delay, found at this tick but belonging to the previous interval, from the
    off-CPU parts of the latest pending ticks into their run-queue parts (in place, latest first, stopping at
    a tick without an off-CPU part); returns what could not be placed.  schedstat's run-queue delay counts a
    wait when it ends (the thread gets a CPU): a thread still runnable at a tick had that wait read as
    off-CPU, and the next interval, on CPU all along, had no room for it - on a loaded 2-core box zoo
    programs read 8-12 points of their run queue as off-CPU."""
    for k in range(len(pending) - 1, -1, -1):
        if ns <= 0:
            break
        e = pending[k]
        off = e[5]
        if not off:
            break
        m = min(ns, abs(off))
        pending[k] = e._replace(off=off - m if off > 0 else off + m, rq=e[6] + m) if type(e) is Tick else (
            *e[:5], off - m if off > 0 else off + m, e[6] + m, *e[7:])
        ns -= m
    return ns
