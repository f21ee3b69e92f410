"""The per-thread part of one live-sampler tick (collect/sampler.py explains the rules): each sampled
thread's interval since its previous tick measured (CPU clock, run-queue delay, page faults and kernel
time), probed when off CPU (blocking.py), classified from its stack, and applied to its runs or queued
for the next perf drain (resolve.py).  Runs at the sampler's rate for every thread: the loop keeps what
it needs in locals (TickEnv, unpacked once per tick), and calls out only for a thread met for the first
time (sampler_threads.register)."""
from __future__ import annotations

from typing import Any, NamedTuple

from .. import thresholds as T

from .layout import LONG_INTERVAL_TICKS, SPLIT_MIN_NS, Tick, _pieces, _split_at_marks, owed_run_queue
from .sampler_threads import register
from .thread_state import CLS_RUNQ, CLS_WAITING, KEEP, SPLIT_MIN_FRACTION, _close
from .tick_rules import tick_class


class TickEnv(NamedTuple):
    """What the tick loop set up once (sampler_loop.loop_setup) and every tick's per-thread part reads."""
    s: Any                  # the Sampler
    threads: dict           # ident -> _ThreadState (s.threads)
    skip: set               # idents never sampled (InferScope's own threads)
    active_get: Any         # threading._active.get: ident -> Thread (its native id tells a reused ident)
    getclk: Any             # ident -> CPU clock id
    cputime: Any            # CPU clock id -> ns
    clock: Any              # -> ns (perf_counter_ns)
    pre: dict               # ident -> (CPU ns, clock ns, run-queue ns) read at the sampler's start
    schedstat: bool         # /proc schedstat readable (run-queue delays)
    kgate_fn: Any           # kernel_time.Gate, or None (kernel-time rules off)
    oncpu_by_tid: dict
    thread_ticks: dict
    walk: Any               # classify.walk
    scope_stacks: dict
    names: dict             # classify.DOMAIN_NAMES
    module_locks: Any       # importlib's module locks (non-empty while an import runs), or None
    importing_module: Any   # ident -> the module it imports, or None (thread_state._import_probe)
    main_tid: int
    main_ident: int
    sig: Any                # sigframes.SignalFrames while active, else None
    USER: int               # classify.USER, classify.FW
    FW: int


def _thread_for(env: TickEnv, ident, frame, t: int, idmap: dict, perf_maps, perf_off: bool):
    """The thread state of ``ident`` at this tick: (st, or None to skip it; its first interval since the sampler
    started; idmap; registered - one-off set-up work: this tick does not pace the budget)."""
    s, threads, skip, active_get = env.s, env.threads, env.skip, env.active_get
    first_iv = False        # this tick classifies the main thread's interval since the sampler started
    st = threads.get(ident)
    tho = active_get(ident)
    if st is not None and tho is not None and tho._native_id not in (None, st.tid):
        # the thread behind this ident ended and a new one reuses it (glibc reuses a
        # finished thread's pthread_t): close the old one's run, register the new one
        threads.pop(ident)
        s._retire(st)
        st = None
    if st is None:
        if tho is not None and tho.name.startswith("inferscope-"):
            # InferScope's own thread seen before it added itself to the skip set (housekeeping, metrics):
            # followed, its one probe in an Event wait stayed in force and named it the lock_wait finding's
            # "other thread" for the whole run (3 runs of 10)
            skip.add(ident)
            return None, False, idmap, False
        st, idmap = register(s, env, ident, frame, tho, t, idmap, perf_maps, perf_off)
        if st is None:
            return None, False, idmap, True
        first_iv = True
    return st, first_iv, idmap, first_iv


def _measure(env: TickEnv, st, ident, t: int):
    """The thread's interval since its previous tick, measured: its end ``t`` (when its CPU clock was read), the
    CPU readings at scope edges in it (``marks``), its CPU time, the run-queue part (schedstat; a wait under way at the
    previous tick moved there: layout.owed_run_queue), on/off CPU and the off-CPU part.  Returns (t, marks, cpu,
    dcpu, rqn, oncpu, off, kblk, kstep)."""
    s, cputime, clock = env.s, env.cputime, env.clock
    cpu = dcpu = 0
    marks = None
    if st.clk is not None:
        try:
            cpu = cputime(st.clk)
        except OSError:
            cpu = st.cpu
        else:
            # the thread's interval ends when its CPU clock was read, not when the tick began: a
            # tick that loses the GIL part-way (3 Python threads spinning beside the main thread:
            # 20-40 ms at a time) read the later threads' CPU clocks that much later, and their CPU
            # of that time went into the interval before (zoo_gil: 23 ms of the loop's CPU placed
            # before the window, user code 4.6 % vs 27 % true)
            tn = clock()
            # (not past stop()'s call, the program's end: the main thread then waits in its join)
            t = max(st.t, min(tn, s._stop_at)) if s._stop_at else max(t, tn)
            cm = s.cpu_marks.get(ident)
            if cm:                  # its CPU readings at scope edges up to now (_split_at_marks)
                k = 0
                while k < len(cm) and cm[k][0] <= t:
                    k += 1
                marks = cm[:k]
                del cm[:k]
        dcpu = cpu - st.cpu
        dt = t - st.t
        busy = dcpu
        rqn = 0
        # the smallest part kept: SPLIT_MIN_FRACTION of the interval; of a long one (the sampler
        # starved) SPLIT_MIN_NS - a 10 % floor of a 100 ms interval dropped zoo_gil's 5-13 % run queue
        split_ns = dt * SPLIT_MIN_FRACTION
        if dt > LONG_INTERVAL_TICKS * s.interval_ns:
            split_ns = min(split_ns, SPLIT_MIN_NS)
        # the previous interval ended off CPU (a pending off part, or an open 'waiting' run): a wait
        # under way at its tick is counted by schedstat only now (layout.owed_run_queue)
        owed = st.rq_at == st.t and ((bool(st.pending) and st.pending[-1][5] != 0)
                                     or (not st.pending and st.cls is CLS_WAITING))
        if (dcpu < dt - split_ns or owed) and st.rq_t is not None:
            rqn, busy = _run_queue(s, st, t, dt, dcpu, owed)
        if rqn < split_ns:
            rqn = 0
        st.cpu = cpu
        oncpu = busy >= dt * T.ONCPU_MIN_BUSY_FRACTION
        # the interval's off-CPU part (issue 16 item 3): its length is known from the
        # thread's CPU clock; on-CPU intervals put it first (the thread runs at the
        # tick), off-CPU ones last (it ran, then blocked)
        off = dt - busy if dt > 0 else 0
        if off < split_ns or off > dt - split_ns:
            off = 0
        kblk = st.kblk                      # blocked in the previous interval
        st.kblk = not oncpu or off != 0
        kstep = st.kst is not None and dcpu > 0
    else:
        oncpu = True
        off = rqn = 0
        kblk = kstep = False
    return t, marks, cpu, dcpu, rqn, oncpu, off, kblk, kstep


def _run_queue(s, st, t: int, dt: int, dcpu: int, owed: bool):
    """The interval's run-queue part from schedstat, read only when the thread was off CPU for part of the interval or
    of the previous one (fd kept open): runnable but descheduled (CPU contention) is not "waiting" for I/O.  A wait
    under way at the previous tick, counted by the kernel only when it ended, goes back to that interval
    (layout.owed_run_queue).  Returns (run-queue ns, busy ns)."""
    rqn, busy = 0, dcpu
    # runnable but descheduled (CPU contention) is not "waiting" for I/O: the
    # run-queue delay from schedstat (fd kept open; read only when the thread
    # was off-CPU for part of the interval, or of the previous one) is its own part (CLS_RUNQ)
    try:
        rq = int(st.rq_t.read().split()[1])
        if st.rq >= 0:
            if st.rq_at == st.t:      # reading from the previous sample: exact
                rqn = rq - st.rq
            else:                     # older reading: at most the interval's rest
                rqn = min(rq - st.rq, dt - dcpu)
            full = rqn
            rqn = max(0, min(rqn, dt - dcpu))
            if full > rqn and owed:
                # more than this interval can hold: a wait under way at the previous tick,
                # counted by the kernel only when it ended (layout.owed_run_queue)
                if st.pending:
                    if s.facts is not None:
                        s.facts.owed_pending(st, full - rqn)
                    owed_run_queue(st.pending, full - rqn)
                else:
                    s._owed_open_run(st, full - rqn)
            busy = dcpu + rqn
        st.rq, st.rq_at = rq, t
    except (OSError, ValueError, IndexError):
        _close(st)
    return rqn, busy


def _frame_class(env: TickEnv, st, ident, frame, prev_t: int):
    """What the thread's stack says at this tick: (the module it imports or None, its domain, the (function, line)
    label, whether the label comes from a timer signal in the interval - a uniform moment - not the GIL hand-over)."""
    walk, scope_stacks, names, sig, FW = env.walk, env.scope_stacks, env.names, env.sig, env.FW
    importing_module, module_locks = env.importing_module, env.module_locks
    label = None
    fair = False        # the frame was taken at a uniform moment (signal), not at a GIL release
    # in an import (this thread owns a module lock): library loading = framework
    mod = importing_module(ident) if module_locks else None
    if mod is not None:
        dom, label = FW, ("import " + mod, 0)
    else:
        dom, label = walk(frame, scope_stacks.get(ident))
        rec = sig.latest if (ident == env.main_ident and sig is not None) else None
        if rec is not None and st.perf is not None:
            # the Python class at each signal since the last tick: the perf resolver's interpreter samples
            # take the one nearest to them (resolve.py)
            sig.drain(st.sigobs, names)
        if rec is not None and rec[1] is not None and rec[0] > prev_t and rec[1][0] == dom:
            # the main thread's function at a signal in this interval (sigframes.py): taken
            # at a uniform moment, not where the thread let the sampler have the GIL.  Only
            # the function (culprit tables): the class stays the sampler's rule's (perf IP
            # samples split the interval) - taking the class too moved 8 points of a Rust
            # tokenizer's time to cpu_compute and added noise (bench/README.md)
            label = rec[1][1]
            fair = True
    return mod, dom, label, fair


def _tick_class(env: TickEnv, st, mod, dom, label, fair: bool, oncpu: bool, off: int, kf: int, kblk: bool,
                gil_free: bool, voluntary: bool, perf_pending: bool, torch_seen: bool):
    """The tick's class for its interval by the tick's named rules (tick_rules.py): (a class name, or None: the perf
    IP samples decide at the next drain, or KEEP: the current class; the label; the stack's class where perf
    decides)."""
    return tick_class(env.names, env.USER, env.FW, st, mod, dom, label, fair, oncpu, off, kf, kblk, gil_free,
                      voluntary, perf_pending, torch_seen)[:3]


def _queue(s, st, facts, t: int, prev_t: int, cls, label, fallback, fair: bool, gil_free: bool, oncpu: bool,
           off: int, rqn: int, kf: int, kns: int, kblk: bool, first_iv: bool, marks, cpu: int, dcpu: int,
           perf_off: bool, perf_on_at) -> None:
    """The tick's interval queued for the next perf drain as a layout.Tick (its class needs the IP samples, or it has
    off-CPU / run-queue parts, or ticks are pending before it), or applied at once."""
    if not oncpu and not off:
        rqn = 0
    if st.pending or cls is None or off or rqn:
        # the off-CPU part of the interval comes first when the thread is on CPU at the tick, else
        # last; in the first interval since the sampler started, always last: its CPU work is
        # start-up (imports), before whatever blocks (zoo_disk_io read that CPU as user code in its
        # window, -18 points once)
        # (last: its CPU time where perf sampled all of the interval - the thread's kernel share by perf)
        ent = Tick(t, cls, label, fallback, gil_free, off if (oncpu and not first_iv) else -off, rqn, kf, kns,
                   (2 if st.kio else 1) if (kblk or off != 0) else 0,
                   dcpu if (st.clk is not None and not perf_off and perf_on_at is not None
                            and prev_t >= perf_on_at and prev_t >= st.perf_at) else -1, True)
        cut = bool(marks) and st.clk is not None and any(prev_t < m[0] < t for m in marks)
        if (off or rqn) and (cut or (not kf and not kns)) and t - prev_t > LONG_INTERVAL_TICKS * s.interval_ns:
            # (with faults or kernel time only when cut at CPU readings: each part gets its share
            # of them by its CPU - a thread's first interval holds its stack's faults, and laid as
            # one block it put 175 ms of a spinner's CPU inside a window that began after it)
            st.pending.extend(_split_at_marks(ent, prev_t, cpu - dcpu, cpu, marks, s.interval_ns)
                              if cut else _pieces(ent, prev_t, s.interval_ns))
        else:
            st.pending.append(ent)
    elif cls is KEEP:
        if facts is not None:
            facts.keep(st, t, label if fair else None)
        s._apply(st, t, st.cls, label if fair else None)
    else:
        # off CPU for the whole interval, or on CPU all of it after a wait, by the thread's CPU clock: the
        # change came at the previous tick, not at the midpoint (a class read from the frame only is
        # known at the tick: the midpoint rule).  The midpoint gave half of each fully off-CPU interval
        # to the class before it: zoo_gil (20-50 ms intervals) read 53.6 ms CPU in a window where the
        # thread ran 40.8 ms in all
        if facts is not None:
            facts.tick(st, t, cls, label)
        s._apply(st, t, cls, label, exact=st.clk is not None and (
            cls is CLS_WAITING or st.cls is CLS_WAITING or st.cls is CLS_RUNQ))


def tick_threads(env: TickEnv, frames: dict, t_tick: int, idmap: dict, probe, perf_maps, perf_off: bool, perf_on_at,
                 gil_free: bool, voluntary: bool, perf_pending: bool, torch_seen: bool, kgate: bool):
    """One tick's per-thread part, at ``t_tick``, over ``frames`` (ident -> frame): returns (threads seen,
    threads on CPU, a thread was registered, idmap, probe); ``idmap`` (ident -> native id) is refreshed
    when a new ident is missing from it, ``probe`` (blocking.Probe.probe) becomes None when it fails.
    Per thread: its state (_thread_for), its interval measured (_measure), the off-CPU probe and kernel time, its
    stack read (_frame_class), its class (_tick_class), then queued or applied (_queue)."""
    s, skip, oncpu_by_tid, thread_ticks = env.s, env.skip, env.oncpu_by_tid, env.thread_ticks
    scope_stacks, module_locks, main_tid = env.scope_stacks, env.module_locks, env.main_tid
    facts = s.facts     # the decisions' inputs are recorded (facts.py), or None
    seen = 0
    running = 0         # the program's threads on CPU in this tick's interval
    registered = False
    for ident, frame in frames.items():
        if ident in skip:
            continue
        seen += 1
        st, first_iv, idmap, reg = _thread_for(env, ident, frame, t_tick, idmap, perf_maps, perf_off)
        registered = registered or reg
        if st is None:
            continue
        t, marks, cpu, dcpu, rqn, oncpu, off, kblk, kstep = _measure(env, st, ident, t_tick)
        kf = kns = 0
        if probe is not None:
            # why it is off-CPU (collect/blocking.py): the syscall, file and frame it blocks in at
            # this tick, for threads off-CPU for part of the interval since their previous tick
            # (the label covers that interval); a mark when it changes
            try:
                probe(st.tid, st.t, frame, not oncpu or off != 0,
                      st.tid != main_tid and not scope_stacks.get(ident))
            except Exception:
                probe = None
            else:
                if not oncpu or off:
                    st.kio = s.blocking.io_wait(st.tid)
        if not module_locks:    # per-thread achieved rate outside imports: [ticks, ns since the previous]
            tt = thread_ticks[st.tid]
            tt[0] += 1
            tt[1] += t - st.t
        if kstep:
            # kernel-mode CPU (kernel_time.py): the thread's page faults (perf counter) and, where
            # the I/O rule may apply and the process's counters moved, its kernel time (after the
            # off-CPU probe: the stat read holds the GIL ~40-85 us, and a thread back from its I/O
            # call waiting for it was probed in futex - the GIL - instead of its preadv)
            try:
                kf, kns = st.kst.step(dcpu, not oncpu and not off, (kblk or st.kblk) and st.kio, kgate)
            except (OSError, ValueError, IndexError):
                st.kst.close()
                st.kst = None
        prev_t, st.t = st.t, t
        mod, dom, label, fair = _frame_class(env, st, ident, frame, prev_t)
        if oncpu:
            oncpu_by_tid[st.tid] += 1
            running += 1
        if facts is not None:   # (the order of facts.OBS_FIELDS)
            facts.obs(st, (t, prev_t, mod, dom, label, fair, oncpu, off, rqn, kf, kns, kblk, st.kio, first_iv, marks,
                           cpu, dcpu, gil_free, voluntary, perf_pending, torch_seen, st.perf is not None,
                           st.clk is not None, perf_off, perf_on_at, st.perf_at))
        cls, label, fallback = _tick_class(env, st, mod, dom, label, fair, oncpu, off, kf, kblk, gil_free, voluntary,
                                           perf_pending, torch_seen)
        _queue(s, st, facts, t, prev_t, cls, label, fallback, fair, gil_free, oncpu, off, rqn, kf, kns, kblk,
               first_iv, marks, cpu, dcpu, perf_off, perf_on_at)
        s.samples += 1
    return seen, running, registered, idmap, probe
