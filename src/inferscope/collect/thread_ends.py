"""The ends of a thread's record that the sampler's ticks miss (collect/sampler.py): a thread's last interval
after its last tick (its CPU clock is gone once it ended: thread_life's reading at its end, or the clock read at
the sampler's stop), threads that began after the sampler and that no tick saw (adopted at the stop from their
start readings), and threads that began and ended between two ticks (laid out from both readings at the class
of the function they ran).  The sampler starved of the GIL beside busy Python threads ticks at 9-30 Hz: without
these, three spinning threads' 70 % of a core read 0-25 ms of 150 ms (zoo_gil, the all-threads view)."""
from __future__ import annotations

import threading

from . import classify as C
from . import thread_life
from .layout import LONG_INTERVAL_TICKS, SPLIT_MIN_NS, _pieces, _split_at_marks
from .thread_state import CLS_WAITING, _ThreadState


def adopt_unseen(smp) -> None:
    """At the stop: the program's Python threads that began since the sampler did and that no tick saw (the
    sampler starved of the GIL beside them: zoo_gil's three spinners, 1 run in 5), from their start
    (thread_life) with their class by their stack now; finish() lays their CPU up to the stop."""
    try:
        frames = smp._frames()
    except Exception:
        return
    active = threading._active
    for ident, frame in frames.items():
        if ident in smp.threads or ident in smp.skip:
            continue
        th = active.get(ident)
        tid = getattr(th, "native_id", None)
        born = thread_life.started.pop(tid, None) if tid is not None else None
        if born is None or born[0] < smp.started_ns:
            continue
        try:
            clk = smp._getclk(ident)
            smp._cputime(clk)
            dom, label = C.walk(frame, smp.scope_stacks.get(ident))
        except Exception:
            continue
        st = smp.threads[ident] = _ThreadState(tid, clk, born[1], born[0])
        st.on_cls, st.on_label = C.DOMAIN_NAMES[dom], label

def ended_unseen(smp) -> list:
    """At the stop: the program's Python threads that began after the sampler and ended with no tick
    seeing them (the sampler starved of the GIL ticked at 11 Hz beside 3 spinners that lived 120 ms: two
    read nothing), as thread states from their start readings, at the class of the function they ran;
    finish() lays their CPU up to their end."""
    out = []
    for tid in [t for t in thread_life.ended if t not in smp.oncpu_by_tid]:
        born, code = thread_life.started.get(tid), thread_life.targets.get(tid)
        if born is None or code is None or born[0] < smp.started_ns:
            continue
        try:
            dom, label = C.code_info(code)
        except Exception:
            continue
        if dom not in C.DOMAIN_NAMES:       # a stdlib or unknown runner (a pool's worker loop): what it ran is unknown
            continue
        st = _ThreadState(tid, "ended", born[1], born[0])      # (no CPU clock to read: _finish uses its end reading)
        st.on_cls, st.on_label = C.DOMAIN_NAMES[dom], (label, code.co_firstlineno)
        out.append(st)
    return out

def finish(smp, st: _ThreadState, marks=None, alive: bool = False) -> None:
    """A thread that ended (or the sampler's stop): its pending ticks, then - when thread_life read its
    CPU clock as its run() returned - its last interval since its last tick: CPU at the class of its last
    on-CPU run (no stack was seen), the rest off-CPU after it, laid in pieces when long (cut at its CPU
    readings at scope edges, ``marks``, when there are any).  ``alive``: the sampler's stop, the thread still
    running - its CPU clock is read now, for the interval up to the stop.  Without that
    reading the interval is lost (its clock cannot be read once the thread is gone): three spinning
    threads' 70 % of a core read 0-25 ms of 150 (zoo_gil, the sampler ticking at 9-30 Hz)."""
    smp._resolve(st)
    e = thread_life.ended.pop(st.tid, None)
    if e is None and alive and st.clk is not None:
        try:
            e = (smp._stop_at or smp._clock(), smp._cputime(st.clk))
        except (OSError, OverflowError):
            e = None
    if e is None or st.clk is None:
        return
    te, ce = e
    if smp._stop_at:
        te = min(te, smp._stop_at)
    prev = max(st.t, st.end)
    dt = te - prev
    if dt <= 0 or ce < st.cpu:
        return
    c = min(dt, ce - st.cpu)
    cls = st.on_cls if (st.on_cls is not None and c > 0) else CLS_WAITING
    if cls is not CLS_WAITING and c >= SPLIT_MIN_NS:
        # on CPU after all (no tick saw it there): its spans are not an idle pool thread's (idle_tids)
        smp.oncpu_by_tid[st.tid] = smp.oncpu_by_tid.get(st.tid, 0) + 1
    off = dt - c if cls is not CLS_WAITING else 0
    ent = (te, cls, st.on_label if cls is st.on_cls else None, None, False, -off, 0, 0, 0, 0, -1, False, False)
    if off and dt > LONG_INTERVAL_TICKS * smp.interval_ns:
        st.pending = _split_at_marks(ent, prev, st.cpu, ce, marks, smp.interval_ns) if marks \
            else _pieces(ent, prev, smp.interval_ns)
    else:
        st.pending = [ent]
    st.t, st.cpu = te, ce
    smp._resolve(st)
