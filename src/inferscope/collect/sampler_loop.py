"""The live sampler's tick loop (Sampler._run, on the sampler's own thread): set-up, then per tick the
pacing (GIL budget, import rate), the tick's time and GIL verdict, perf adoption, the per-thread part
(sampler_tick.py) and the housekeeping (switch interval, perf drains, native threads, counters, threads
that ended).  collect/sampler.py explains the rules."""
from __future__ import annotations

import importlib._bootstrap as _bs
import sys
import threading

from . import classify as C
from . import kernel_time as K
from .gcpauses import collector_off, collector_on
from .layout import LONG_INTERVAL_TICKS
from .native_threads import NATIVE_PERIOD_NS, NativeThreads
from .sampler_tick import TickEnv, tick_threads
from .thread_state import (GIL_WAIT_NS, IMPORT_RATE_DIVISOR, PERF_PERIOD_NS, RESOLVE_NS, _decides, _import_probe,
                           _runq_ns, _switch_interval_s)


def loop_setup(s):
    """Before the first tick: the perf set-up thread started, the sampler's own threads skipped, the
    off-CPU probe made, and what the per-thread part reads (TickEnv).  Returns (env, idmap, probe)."""
    if s.use_perf:
        th = s._perf_thread = threading.Thread(target=s._setup_perf, name="inferscope-perf-setup", daemon=True)
        th.start()
        s.skip.add(th.ident)
    s.my_clk = s._getclk(threading.get_ident())
    s.skip.add(threading.get_ident())
    clock = s._clock
    cputime = s._cputime
    getclk = s._getclk
    sig = s._sig if (s._sig is not None and s._sig.active) else None
    main_ident = threading.main_thread().ident
    idmap = s._native_ids()
    s.started_ns = clock()
    schedstat = _runq_ns(threading.get_native_id()) >= 0
    probe = None
    if s.probe_blocking:
        try:
            from .blocking import Probe  # lazy: the off-CPU probe and import-lock view only where enabled
            s.blocking = Probe(s.buffer.append, _decides)
            probe = s.blocking.probe
        except Exception:
            probe = None
    try:
        module_locks = _bs._module_locks      # non-empty while a module import is in progress
    except (ImportError, AttributeError):
        module_locks = None
    kgate_fn = K.Gate() if (s.kernel_time and schedstat) else None
    # the main thread's CPU clock read now: its first tick then classifies the interval since the
    # sampler started (a thread met at a tick is otherwise only registered there); the first tick can
    # come tens of ms late while start-up imports run, and a short program's window began in that gap
    # (zoo_disk_io at 6 iterations: 7-15 ms of a 42 ms window read 'other')
    # (start() reads it again once this thread runs: that reading is used when it came before the tick)
    pre = {}
    try:
        mclk = getclk(main_ident)
        pre[main_ident] = (cputime(mclk), clock(), -1)
    except Exception:      # noqa: BLE001 - no CPU clock for it: registered at its first tick as any thread
        pass
    env = TickEnv(s=s, threads=s.threads, skip=s.skip, active_get=threading._active.get, getclk=getclk,
                  cputime=cputime, clock=clock, pre=pre, schedstat=schedstat, kgate_fn=kgate_fn,
                  oncpu_by_tid=s.oncpu_by_tid, thread_ticks=s.thread_ticks, walk=C.walk, scope_stacks=s.scope_stacks,
                  names=C.DOMAIN_NAMES, module_locks=module_locks, importing_module=_import_probe(module_locks),
                  main_tid=s.main_tid, main_ident=main_ident, sig=sig, USER=C.USER, FW=C.FW)
    return env, idmap, probe


def run(s) -> None:
    """The sampler thread's body: ticks until stop() (and one final tick after it)."""
    s._gc_held = False
    try:
        _ticks(s)
    finally:
        _gc_release(s)            # (after the last tick, or one that raised)


def _gc_hold(s) -> None:
    """The collector off while the sampler works (gcpauses.collector_off: no program collection in this thread)."""
    if not s._gc_held:
        s._gc_held = collector_off()


def _gc_release(s) -> None:
    """... and on again while it sleeps or waits."""
    collector_on(s._gc_held)
    s._gc_held = False


class _Loop:
    """The tick loop's state between ticks (was the locals of one 160-line loop)."""
    __slots__ = ("s", "env", "idmap", "probe", "clock", "cputime", "threads", "skip", "module_locks", "kgate_fn",
                 "my_clk", "getframes", "stop", "sleep", "periodic", "period_ns", "next_periodic", "per_tick",
                 "perf_maps", "ema_busy", "perf_off", "last_tick", "forced_ns", "short_s", "manage_switch",
                 "next_resolve", "next_native", "native_period", "setup_thread", "perf_on_at", "ticked", "final")

    def __init__(self, s) -> None:
        self.s = s
        env, self.idmap, self.probe = loop_setup(s)
        self.env = env
        self.clock, self.cputime, self.threads, self.skip, self.module_locks, self.kgate_fn = (
            env.clock, env.cputime, env.threads, env.skip, env.module_locks, env.kgate_fn)
        self.my_clk = s.my_clk
        self.getframes = s._frames
        self.stop = s._stop
        self.sleep = s._sleep
        self.periodic, self.period_ns = s.periodic or (None, 0)
        self.next_periodic = 0
        self.per_tick = s.per_tick
        self.perf_maps = None        # set when the side thread has perf ready (_adopt_perf)
        self.ema_busy = 0.0          # moving average of the sampler CPU time per tick (ns), setup ticks excluded
        self.perf_off = False        # perf sampling switched off (while importing)
        self.last_tick = 0
        self.forced_ns = int(sys.getswitchinterval() * 1e9 * 0.9)
        self.short_s = _switch_interval_s()
        self.manage_switch = s._live and 0 < self.short_s < sys.getswitchinterval()
        self.next_resolve = 0
        self.next_native, self.native_period = 0, 0
        self.setup_thread = s._perf_thread
        self.perf_on_at = None       # when perf sampling last came on (adopted, or enabled after an import)
        self.ticked = False
        # (at least one tick: a program that ends before the first one - a 60 ms script on a loaded host,
        # the sampler thread's start-up still running - has its interval since start() classified then)
        # (and a final tick that began after stop(): a tick that was under way when stop() came - one that waited
        # 100+ ms for the GIL beside 3 spinning threads - must not be the last, or every thread's interval since
        # its previous tick is lost: zoo_gil read 100 % 'other' in 1 run of 3)
        self.final = False


def _ticks(s) -> None:
    L = _Loop(s)
    stop = L.stop
    while not stop.is_set() or not L.ticked or (s._stop_at and not L.final):
        if not s._running.is_set():      # paused
            _gc_release(s)
            s._running.wait()
            if stop.is_set():
                break
        t, cpu0, gil_free, voluntary = _wait_for_tick(s, L)
        setup, perf_pending, torch_seen = _perf_state(s, L, t)
        frames = L.getframes()
        kgate = L.kgate_fn is not None and L.kgate_fn()
        pr = probe = L.probe
        if L.final and probe is not None:
            # the final tick's off-CPU probe reads each thread now, after stop(): the main thread is in
            # stop()'s join of this thread, and that label covered its whole last interval - in zoo_gil (ticks
            # 50-100 ms apart) a timed futex in threading's _wait_for_tstate_lock read as the inference
            # thread's lock wait, lock_wait beside gil_contention (2 suite runs of 5 on a loaded box)
            mt = s.main_tid
            pr = lambda tid, *a: None if tid == mt else probe(tid, *a)   # noqa: E731
        seen, running, registered, L.idmap, L.probe = tick_threads(
            L.env, frames, t, L.idmap, pr, L.perf_maps, L.perf_off, L.perf_on_at, gil_free, voluntary, perf_pending,
            torch_seen, kgate)
        _after_tick(s, L, t, cpu0, setup or registered, running, seen, frames)
        frames = None
        s.busy_ns += L.clock() - t
    try:
        s.cpu_ns = L.cputime(L.my_clk)
    except OSError:
        pass


def _wait_for_tick(s, L: _Loop):
    """Sleep until the next tick, then its time and GIL verdict: (t, the sampler's CPU clock then or None, the GIL was
    free at once, a thread released it voluntarily)."""
    # no garbage collection starts in this thread but while it sleeps: whichever thread allocates past the
    # threshold runs it, holding the GIL, and one run here is a pause of the program charged to the
    # profiler - its main thread blocked for the GIL read as 'waiting' (a 96 ms full collection in the
    # sampler read 21 % waiting in zoo_hf_tokenizer, truth 0; 1 run of 8).  Deferred, it runs at the
    # program's next allocation, in its own thread, where sigframes/gcpauses time it as the program's.
    # (A gc.disable() the program makes in another thread while this one waits in a system call is undone
    # at the sleep; the tick holds the GIL but for those calls.)
    _gc_hold(s)
    # never catch up on missed ticks: always release the GIL for a full interval,
    # otherwise a late sampler would hold the GIL back-to-back and starve the workload.
    # While a module import runs (start-up, reported as one bucket) sample less often:
    # every tick takes the GIL from an import-heavy main thread.  Overhead budget: never
    # hold the GIL more than its gil_budget (thread_state.GIL_BUDGET) of the wall time on average.
    interval = s.interval_ns
    iv = max(interval * IMPORT_RATE_DIVISOR if L.module_locks else interval, int(L.ema_busy / L.s.gil_budget))
    clock = L.clock
    target = clock() + iv
    if not L.stop.is_set():
        _gc_release(s)
        L.sleep(iv / 1e9)
    t = clock()
    _gc_hold(s)
    try:
        cpu0 = L.cputime(L.my_clk)
    except OSError:
        cpu0 = None
    gil_free = (t - target) < GIL_WAIT_NS
    # Got the GIL after a short wait: a thread released it voluntarily (a blocking call, a
    # torch op) before the switch interval forced it to.  What that thread is doing now is
    # not a fair sample - the moment was chosen by its state (in the zoo's tokenizer loop,
    # ticks piled up on the model step: 15-20 % "user_code" for 2 % of the time).  An
    # isolated such tick keeps the thread's current class; immediate (gil_free) and forced
    # ticks, whose timing does not depend on what the thread runs, classify, and so do
    # consecutive voluntary ones (else a thread releasing the GIL every few ms would keep
    # its first class for ever).
    voluntary = not gil_free and (t - target) < L.forced_ns
    if s._stop_at and L.stop.is_set():
        L.final = True
        # the final tick, which stop() waits for: its intervals end when stop() was called (the
        # program's end), not after the sleep - the main thread waited in that join up to a tick
        # interval, read as 'waiting' at the end of the whole-run window (zoo_short60: 12 % of a
        # 100 ms window, truth 0)
        t = max(L.last_tick, min(t, s._stop_at))
        # (the GIL free at once says nothing then: the main thread waits in that join - read as
        # native code by the GIL heuristic while perf was still being set up, zoo_short60 read
        # 19 % cpu_compute for its pure-Python work once)
        gil_free = voluntary = False
    s.ticks += 1
    L.ticked = True
    if not L.module_locks and L.last_tick:   # steady-state rate (imports run slower on purpose)
        s.steady_ticks += 1
        s.steady_ns += t - L.last_tick
    if L.last_tick and t - L.last_tick > LONG_INTERVAL_TICKS * s.interval_ns:
        s.starved_at = t     # scope() edges then read every thread's CPU clock (api._cpu_mark)
    L.last_tick = s.last_tick_ns = t
    return t, cpu0, gil_free, voluntary


def _perf_state(s, L: _Loop, t: int):
    """perf adopted once its side thread has it ready, switched off while a module import runs; returns (this tick
    did one-off set-up work, perf is still being set up, torch is imported)."""
    setup = False       # this tick did one-off setup work: it does not pace the budget
    if L.perf_maps is None and s._perf_maps is not None:
        L.perf_maps = s._perf_maps
        s._adopt_perf(L.perf_off)
        setup = True
        L.perf_on_at = t
    if L.perf_maps is not None and bool(L.module_locks) != L.perf_off:
        L.perf_off = not L.perf_off
        s._perf_enable(not L.perf_off)
        L.perf_on_at = t
    if L.setup_thread is not None and not L.setup_thread.is_alive():
        # glibc gives a finished thread's pthread_t (= its Python ident) to the next thread
        # created: left in the skip set, the workload's next thread would never be sampled
        L.skip.discard(L.setup_thread.ident)
        L.setup_thread = None
    # perf still being set up (its first perf_event_open takes 20-35 ms, longer on a loaded
    # host): user code is judged by the GIL heuristic meanwhile, as it will be by perf (a
    # numpy-only program's BLAS ran 56 % unclassified before perf came, measured under load)
    perf_pending = L.perf_maps is None and L.setup_thread is not None
    torch_seen = s.torch_seen or ("torch" in sys.modules)
    s.torch_seen = torch_seen
    return setup, perf_pending, torch_seen


def _after_tick(s, L: _Loop, t: int, cpu0, setup: bool, running: int, seen: int, frames: dict) -> None:
    """The tick's housekeeping: the switch interval, the GIL budget's pacing (not by set-up ticks), the perf drains,
    native threads, per-tick and periodic callbacks, threads that ended."""
    if L.manage_switch:
        L.manage_switch, f_ns = _switch_step(s, running, L.short_s)
        if f_ns is not None:
            L.forced_ns = f_ns
    # the budget paces the per-tick work; the periodic work below is per unit of time
    pcpu = 0
    if L.probe is not None:          # the off-CPU probe has its own budget (blocking.PROBE_BUDGET)
        pcpu, s.blocking.tick_cpu = s.blocking.tick_cpu, 0
    if not setup and cpu0 is not None:
        try:
            L.ema_busy += (L.cputime(L.my_clk) - cpu0 - pcpu - L.ema_busy) * 0.05
        except OSError:
            pass
    if t >= L.next_resolve:
        L.next_resolve = t + RESOLVE_NS
        _drain(s, t)
    if t >= L.next_native and L.perf_maps is not None and not L.perf_off and s.follow_native:
        L.next_native, L.native_period = _native_step(s, t, L.perf_maps, L.native_period)
    if L.per_tick is not None:
        try:
            L.per_tick(t)
        except Exception:
            L.per_tick = None
    if L.periodic is not None and t >= L.next_periodic:
        L.next_periodic = t + L.period_ns
        try:
            L.periodic(t)
        except Exception:
            pass
    if seen != len(L.threads):
        _reap(s, frames)


def _switch_step(s, running: int, short_s: float):
    """One thread of the program on CPU: the short switch interval (SWITCH_INTERVAL_S); more: the
    program's own - threads that fight for the GIL would hand it over ten times as often (zoo_gil: the
    main thread's GIL wait became run-queue time and gil_contention vanished).  Idle threads (an
    executor's, a queue listener) do not count.  Returns (keep managing it, the new forced hand-over
    time in ns or None when unchanged)."""
    cur = sys.getswitchinterval()
    sw = s._switch
    if sw is not None and cur != sw[1]:          # the program set its own: leave it alone
        s._switch = None
        return False, None
    if running <= 1 and sw is None:
        s._switch = (cur, None)
        sys.setswitchinterval(short_s)
        s._switch = (cur, sys.getswitchinterval())
        return True, int(s._switch[1] * 1e9 * 0.9)
    if running > 1 and sw is not None:
        sys.setswitchinterval(sw[0])
        s._switch = None
        return True, int(sw[0] * 1e9 * 0.9)
    return True, None


def _drain(s, t: int) -> None:
    """Every RESOLVE_NS: the threads' pending ticks decided from their perf rings, kernel totals flushed."""
    for st in s.threads.values():
        if st.pending:
            s._resolve(st)
    s.kernel_totals.flush(s.buffer.append, t)


def _native_step(s, t: int, perf_maps, native_period: int):
    """The process's native threads by perf role (native_threads.py), every NATIVE_PERIOD_NS.  Returns
    (the next time, the period)."""
    if s.native_threads is None:
        s.native_threads = NativeThreads(s.buffer.append, PERF_PERIOD_NS, s.started_ns)
        native_period = NATIVE_PERIOD_NS
    next_native = t + native_period
    try:
        s.native_threads.tick(t, perf_maps)
    except Exception:
        s.follow_native = False   # never let the side collector stop sampling
    return next_native, native_period


def _reap(s, frames: dict) -> None:
    """Threads that ended since the previous tick (not in ``frames``): their runs finished and closed."""
    threads = s.threads
    live = set(frames)
    for ident in [i for i in threads if i not in live]:
        s._retire(threads.pop(ident), s.cpu_marks.pop(ident, None))
    # scope() edges' CPU readings of threads that ended (bounded per thread, not in number of threads)
    for ident in [i for i in s.cpu_marks if i not in live]:
        s.cpu_marks.pop(ident, None)
