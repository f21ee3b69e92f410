"""Thread life cycle in the live sampler (a mixin of collect/sampler.py's Sampler, and register()): a thread
registered at the first tick that sees it, threads no tick saw adopted at the stop, and a thread's last
interval laid out when it ends (from thread_life's readings)."""
from __future__ import annotations

import threading

from . import classify as C
from . import kernel_time as K
from . import thread_life
from .layout import LONG_INTERVAL_TICKS, SPLIT_MIN_NS, Tick, _pieces, _split_at_marks
from .rawio import ProcFile
from .thread_state import CLS_RUNQ, CLS_WAITING, _close, _ThreadState


class ThreadsMixin:
    """Sampler methods for threads that end, or that began and no tick saw."""

    def _adopt_unseen(self) -> None:
        """At the stop: the program's Python threads that began since the sampler did and that no tick saw (the
        sampler starved of the GIL beside them: zoo_gil's three spinners, 1 run in 5), from their start
        (thread_life) with their class by their stack now; _finish lays their CPU up to the stop."""
        try:
            frames = self._frames()
        except Exception:
            return
        active = threading._active
        for ident, frame in frames.items():
            if ident in self.threads or ident in self.skip:
                continue
            th = active.get(ident)
            if th is None or th.name.startswith("inferscope-"):
                continue
            tid = getattr(th, "native_id", None)
            born = thread_life.started.pop(tid, None) if tid is not None else None
            if born is None or born[0] < self.started_ns:
                continue
            try:
                clk = self._getclk(ident)
                self._cputime(clk)
                dom, label = C.walk(frame, self.scope_stacks.get(ident))
            except Exception:
                continue
            st = self.threads[ident] = _ThreadState(tid, clk, born[1], born[0])
            st.on_cls, st.on_label = C.DOMAIN_NAMES[dom], label

    def _ended_unseen(self) -> list:
        """At the stop: the program's Python threads that began after the sampler and ended with no tick
        seeing them (the sampler starved of the GIL ticked at 11 Hz beside 3 spinners that lived 120 ms: two
        read nothing), as thread states from their start readings, at the class of the function they ran;
        _finish lays their CPU up to their end."""
        out = []
        for tid in [t for t in thread_life.ended if t not in self.oncpu_by_tid]:
            born, code = thread_life.started.get(tid), thread_life.targets.get(tid)
            if born is None or code is None or born[0] < self.started_ns:
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

    def _finish(self, st: _ThreadState, marks=None, alive: bool = False) -> None:
        """A thread that ended (or the sampler's stop): its pending ticks, then - when thread_life read its
        CPU clock as its run() returned - its last interval since its last tick: CPU at the class of its last
        on-CPU run (no stack was seen), the rest off-CPU after it, laid in pieces when long (cut at its CPU
        readings at scope edges, ``marks``, when there are any).  ``alive``: the sampler's stop, the thread still
        running - its CPU clock is read now, for the interval up to the stop.  Without that
        reading the interval is lost (its clock cannot be read once the thread is gone): three spinning
        threads' 70 % of a core read 0-25 ms of 150 (zoo_gil, the sampler ticking at 9-30 Hz)."""
        self._resolve(st)
        e = thread_life.ended.pop(st.tid, None)
        if e is None and alive and st.clk is not None:
            try:
                e = (self._stop_at or self._clock(), self._cputime(st.clk))
            except (OSError, OverflowError):
                e = None
        if e is None or st.clk is None:
            return
        te, ce = e
        if self._stop_at:
            te = min(te, self._stop_at)
        prev = max(st.t, st.end)
        dt = te - prev
        if dt <= 0 or ce < st.cpu:
            return
        c = min(dt, ce - st.cpu)
        cls = st.on_cls if (st.on_cls is not None and c > 0) else CLS_WAITING
        if cls is not CLS_WAITING and c >= SPLIT_MIN_NS:
            # on CPU after all (no tick saw it there): its spans are not an idle pool thread's (idle_tids)
            self.oncpu_by_tid[st.tid] = self.oncpu_by_tid.get(st.tid, 0) + 1
        off = dt - c if cls is not CLS_WAITING else 0
        ent = Tick(te, cls, st.on_label if cls is st.on_cls else None, None, False, -off, tick=False)
        if off and dt > LONG_INTERVAL_TICKS * self.interval_ns:
            st.pending = _split_at_marks(ent, prev, st.cpu, ce, marks, self.interval_ns) if marks \
                else _pieces(ent, prev, self.interval_ns)
        else:
            st.pending = [ent]
        if self.facts is not None:
            self.facts.finish(st, st.pending)
        st.t, st.cpu = te, ce
        self._resolve(st)

    def _retire(self, st: _ThreadState, marks=None) -> None:
        """A thread that ended (or whose ident a new thread reuses): its last intervals laid (_finish), its log and
        open run closed, its files and probe state released."""
        self._finish(st, marks)
        if self.facts is not None:
            self.facts.close(st, False)
        self._emit(st)
        _close(st)
        if self.blocking is not None:
            self.blocking.forget(st.tid)

    def _owed_open_run(self, st: _ThreadState, ns: int) -> None:
        """The last ``ns`` of the thread's open 'waiting' run were a run-queue wait (layout.owed_run_queue): that
        run ends there, a run_queue run takes the rest up to the previous tick."""
        if self.facts is not None:
            self.facts.owed(st, ns)
        m = min(ns, st.end - st.start)
        if m <= 0:
            return
        end = st.end
        st.end = end - m
        self._emit(st)
        st.cls, st.start, st.end = CLS_RUNQ, end - m, end
        st.label, st.n, st.lines = None, 0, {}


def register(s, env, ident, frame, tho, t: int, idmap: dict, perf_maps, perf_off: bool):
    """Register a thread the tick sees for the first time (a new ident, or one a new thread reuses) in
    ``s.threads``: its _ThreadState from its start (thread_life) or the sampler's start reading, with its
    schedstat file, kernel_time stat and perf IP sampler.  ``env``: the loop's sampler_tick.TickEnv.
    Returns (st, idmap): st None when this tick only registers it, else the thread read at the sampler's
    start, whose interval since then this tick classifies (the tick's one-off set-up work either way)."""
    threads, pre, getclk, cputime, schedstat = env.threads, env.pre, env.getclk, env.cputime, env.schedstat
    kgate_fn, oncpu_by_tid, thread_ticks = env.kgate_fn, env.oncpu_by_tid, env.thread_ticks
    walk, scope_stacks, names = env.walk, env.scope_stacks, env.names
    module_locks, importing_module = env.module_locks, env.importing_module
    tid = tho._native_id if tho is not None else None
    if tid is None:
        tid = idmap.get(ident)
    if tid is None:
        idmap = s._native_ids()
        tid = idmap.get(ident, ident)
    try:
        clk = getclk(ident)
        cpu = cputime(clk)
    except (OSError, OverflowError):
        clk, cpu = None, 0
    p0 = pre.pop(ident, None) if clk is not None else None
    if p0 is not None and s._pre is not None and s._pre[0] == ident:
        p0 = s._pre[1:]       # read by start() (usually before this first tick)
    born = thread_life.started.pop(tid, None) if p0 is None and clk is not None else None
    if born is not None and not (s.started_ns <= born[0] <= t and born[1] <= cpu):
        born = None       # began before the sampler (its CPU then is not in the run)
    if born is not None:
        # a thread begun since the sampler's previous tick: its interval from its run()'s start
        # (thread_life), not from this tick - the CPU it ran before its first tick counts
        st = threads[ident] = _ThreadState(tid, clk, born[1], born[0])
    else:
        st = threads[ident] = _ThreadState(tid, clk, p0[0], p0[1]) if p0 else _ThreadState(tid, clk, cpu, t)
    if schedstat:
        try:
            st.rq_t = ProcFile(f"/proc/self/task/{tid}/schedstat", 128)
            st.rq, st.rq_at = int(st.rq_t.read().split()[1]), t
            if born is not None:
                st.rq, st.rq_at = 0, born[0]   # all its run-queue delay is since its start
            if p0 is not None and p0[2] >= 0:
                # its run-queue delay at the sampler's start too: the first interval's
                # runnable time is CPU contention, not a wait (zoo_short60 under load: 19 ms
                # of run queue in its work read off-CPU)
                st.rq, st.rq_at = p0[2], p0[1]
        except (OSError, ValueError, IndexError):
            _close(st)
    if kgate_fn is not None:
        try:
            st.kst = K.ThreadStat(tid)
        except (OSError, ValueError, IndexError):
            st.kst = None
    if perf_maps is not None:
        s._open_perf(st, perf_off)
        st.perf_at = t
    oncpu_by_tid.setdefault(tid, 0)
    thread_ticks.setdefault(tid, [0, 0])
    if p0 is None:
        # what its stack says it runs, for an interval no later tick classifies (_finish: the
        # sampler starved of the GIL ticked once in a spinning thread's life, 1 run in 2)
        try:
            dom0, st.on_label = walk(frame, scope_stacks.get(ident))
            st.on_cls = names[dom0]
        except Exception:
            pass
        return None, idmap
    # (the main thread read at the sampler's start: this tick classifies its interval)
    if module_locks and importing_module(ident) is not None:
        # but not from inside an import: the innermost module now (numpy under torch) would
        # get all of the start-up imports before it (an unscoped zoo read 'import numpy' as the
        # top import) - registered only, as any thread
        st.cpu, st.t, st.start, st.end = cpu, t, t, t
        return None, idmap
    return st, idmap
