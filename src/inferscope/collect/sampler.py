"""CPU/Python sampler: one daemon thread, ``sys._current_frames()`` at 500 Hz by default (cpu_sampling_frequency_hz).

Per sample and thread:
  on/off CPU   the thread's CPU clock (pthread_getcpuclockid) advanced by less than a quarter of the
               wall time since its previous sample -> ``waiting`` (sleep, I/O, locks, GIL),
               unless /proc/self/task/<tid>/schedstat shows it was runnable on a run queue
               (CPU contention: it wanted the CPU; one pread of a kept-open fd, off-CPU samples only).
  domain       walk the stack from the innermost frame outwards; the innermost frame that is
               not transparent (stdlib, unknown libraries, InferScope) decides (classify.py).
               A user-code frame defers to an enclosing tokenization/preprocessing frame or
               an enclosing scope() whose name says so.  While an import holds a module lock the
               whole stack is walked: a sample taken inside an import (importlib frames) is
               ``framework`` (library loading), whatever the module.
  cpu_compute  an on-CPU thread whose domain is framework (or user code once torch is imported)
               and which is executing native torch code: decided by Linux perf_event task-clock
               sampling of the thread's instruction pointer (perfip.py; 1 sample per 2 ms of the
               thread's CPU time, user space only, unprivileged at perf_event_paranoid <= 2):
               majority of the interval's IP samples inside torch's libraries (libtorch*, libc10,
               oneDNN/MKL/OpenBLAS/OpenMP, JIT code) -> cpu_compute, else framework; a tick with
               no new IP sample keeps the thread's last verdict.
               Fallback when perf_event is unavailable (or no IP sample fell in the interval): the
               GIL heuristic - the sampler woke on time (no thread held the GIL), so the thread
               runs native code that released the GIL, as torch ops do.  The fallback is biased
               (measured on the demo's generate(): 87 % cpu_compute vs 64 % inside ops by the
               torch profiler) because the main thread hands the GIL over at the next op entry.
Consecutive samples of one class on one thread are merged into one CPU_SAMPLE span covering
the wall time between samples (spans tile the thread's observed time); its detail is the most
frequent innermost function ("file:func").
"""
from __future__ import annotations

import sys
import threading
import time

from . import classify as C
from .rawio import ProcFile

CPU_SAMPLE = 11   # SpanKind.CPU_SAMPLE
GIL_WAIT_NS = 250_000
# Sampling rate divisor while a module import is in progress (measured on the demo, 6 pairs:
# process wall ratio 1.077 at a flat 500 Hz vs 1.010 at 250 Hz; imports are ~90 % of its process).
IMPORT_RATE_DIVISOR = 4
PERF_PERIOD_NS = 2_000_000   # one IP sample per 2 ms of a thread's CPU time (kernel cost ~0.7 %)
MAX_DEPTH = 96
CLS_WAITING = "waiting"
CLS_COMPUTE = "cpu_compute"
CLS_FRAMEWORK = "framework"


def _runq_ns(tid: int) -> int:
    """Time the thread spent runnable on a run queue (ns), from /proc (Linux schedstats); -1 n/a."""
    try:
        with open(f"/proc/self/task/{tid}/schedstat", "rb") as f:
            return int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return -1


def _close(st) -> None:
    if st.perf is not None:
        st.perf.close()
        st.perf = None
    if st.rq_t is not None:
        st.rq_t.close()
        st.rq_t = None


class _ThreadState:
    __slots__ = ("tid", "clk", "cpu", "t", "cls", "start", "counts", "oncpu", "rq", "rq_t", "rq_at", "perf", "native")

    def __init__(self, tid, clk, cpu, t):
        self.tid = tid
        self.clk = clk
        self.cpu = cpu
        self.t = t
        self.cls = None
        self.start = t
        self.counts = {}
        self.oncpu = 0
        self.rq = -1      # run-queue wait (ns) from /proc schedstat
        self.rq_t = None  # ProcFile of /proc/self/task/<tid>/schedstat
        self.rq_at = 0    # sample time of the rq reading
        self.perf = None  # PerfIP of this thread (perf_event task-clock IP samples)
        self.native = None  # last perf verdict: in torch native code


class Sampler:
    def __init__(self, buffer, hz: float, scope_stacks: dict, skip_idents: set) -> None:
        self.buffer = buffer
        self.interval_ns = int(1e9 / hz) if hz > 0 else 0
        self.scope_stacks = scope_stacks
        self.skip = skip_idents
        self.threads: dict[int, _ThreadState] = {}
        self.oncpu_by_tid: dict[int, int] = {}
        self.main_tid = threading.main_thread().native_id
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.samples = 0
        self.ticks = 0
        self.busy_ns = 0         # wall time spent in ticks (holding the GIL), sleeps excluded
        self.cpu_ns = 0          # the sampler thread's own CPU time
        self.started_ns = 0
        self.torch_seen = False
        self.use_perf = True
        self.perf_active = False
        self.periodic = None     # (fn(t_ns), period_ns): system counters, called between ticks

    # ---------------------------------------------------------------------
    def start(self) -> None:
        if not self.interval_ns:
            return
        # perf_event setup in the caller's thread: done in the sampler thread it delayed the
        # first sample by >100 ms (imports fighting a busy main thread for the GIL)
        self._perf_maps = self._PerfIP = None
        if self.use_perf:
            try:
                from .perfip import Maps, PerfIP
                probe = PerfIP.open(threading.get_native_id())
                if probe is not None:
                    probe.close()
                    self._perf_maps, self._PerfIP = Maps(), PerfIP
            except Exception:
                self._perf_maps = None
        self.perf_active = self._perf_maps is not None
        self._thread = threading.Thread(target=self._run, name="inferscope-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
        self._close_all(time.perf_counter_ns())

    @property
    def achieved_hz(self) -> float:
        dur = (time.perf_counter_ns() - self.started_ns) / 1e9 if self.started_ns else 0
        return self.ticks / dur if dur > 0 else 0.0

    # ---------------------------------------------------------------------
    def _native_ids(self) -> dict:
        return {t.ident: t.native_id for t in threading.enumerate()}

    def _emit(self, st: _ThreadState) -> None:
        if st.cls is None or st.t <= st.start:
            return
        detail = max(st.counts, key=st.counts.get) if st.counts else None
        self.buffer.append((0, CPU_SAMPLE, st.tid, st.start, st.t, st.cls, detail, "sample"))

    def open_runs(self) -> list:
        """Spans for the runs still open (used by snapshots; not appended to the buffer)."""
        out = []
        for st in list(self.threads.values()):
            cls, start, t, counts = st.cls, st.start, st.t, dict(st.counts)
            if cls is not None and t > start:
                detail = max(counts, key=counts.get) if counts else None
                out.append((0, CPU_SAMPLE, st.tid, start, t, cls, detail, "sample"))
        return out

    def _close_all(self, now: int) -> None:
        for st in list(self.threads.values()):
            self._emit(st)
            st.cls = None
            _close(st)
        self.threads.clear()

    def idle_tids(self) -> set:
        """Threads never seen on CPU (the main thread is always kept)."""
        return {tid for tid, n in self.oncpu_by_tid.items() if n == 0 and tid != self.main_tid}

    # ---------------------------------------------------------------------
    def _run(self) -> None:
        my_clk = self.my_clk = time.pthread_getcpuclockid(threading.get_ident())
        self.skip.add(threading.get_ident())
        getframes = sys._current_frames
        clock = time.perf_counter_ns
        cputime = time.clock_gettime_ns
        getclk = time.pthread_getcpuclockid
        code_get = C.CODE_CACHE.get
        code_entry = C.code_entry
        interval = self.interval_ns
        threads = self.threads
        oncpu_by_tid = self.oncpu_by_tid
        scope_stacks = self.scope_stacks
        skip = self.skip
        idmap = self._native_ids()
        stop = self._stop
        sleep = time.sleep
        self.started_ns = clock()
        USER, FW, TOK, PRE, IMPORT = C.USER, C.FW, C.TOK, C.PRE, C.IMPORT
        names = C.DOMAIN_NAMES
        schedstat = _runq_ns(threading.get_native_id()) >= 0
        periodic, period_ns = self.periodic or (None, 0)
        next_periodic = 0
        perf_maps = self._perf_maps
        PerfIP = self._PerfIP
        try:
            import importlib._bootstrap as _bs
            module_locks = _bs._module_locks      # non-empty while a module import is in progress
            import_aware = True
        except (ImportError, AttributeError):
            module_locks = {0: None}              # unknown: always walk the whole stack
            import_aware = False
        slow_interval = interval * IMPORT_RATE_DIVISOR
        while not stop.is_set():
            # never catch up on missed ticks: always release the GIL for a full interval,
            # otherwise a late sampler would hold the GIL back-to-back and starve the workload.
            # While a module import runs (start-up, reported as one bucket) sample less often:
            # every tick takes the GIL from an import-heavy main thread.
            iv = slow_interval if (import_aware and module_locks) else interval
            target = clock() + iv
            sleep(iv / 1e9)
            t = clock()
            gil_free = (t - target) < GIL_WAIT_NS
            self.ticks += 1
            torch_seen = self.torch_seen or ("torch" in sys.modules)
            self.torch_seen = torch_seen
            frames = getframes()
            seen = 0
            for ident, frame in frames.items():
                if ident in skip:
                    continue
                seen += 1
                st = threads.get(ident)
                if st is None:
                    tid = idmap.get(ident)
                    if tid is None:
                        idmap = self._native_ids()
                        tid = idmap.get(ident, ident)
                    try:
                        clk = getclk(ident)
                        cpu = cputime(clk)
                    except (OSError, OverflowError):
                        clk, cpu = None, 0
                    st = threads[ident] = _ThreadState(tid, clk, cpu, t)
                    if schedstat:
                        try:
                            st.rq_t = ProcFile(f"/proc/self/task/{tid}/schedstat", 128)
                            st.rq, st.rq_at = int(st.rq_t.read().split()[1]), t
                        except (OSError, ValueError, IndexError):
                            _close(st)
                    if perf_maps is not None:
                        try:
                            st.perf = PerfIP.open(tid, PERF_PERIOD_NS)
                        except Exception:
                            st.perf = None
                    oncpu_by_tid.setdefault(tid, 0)
                    continue
                if st.clk is not None:
                    try:
                        cpu = cputime(st.clk)
                    except OSError:
                        cpu = st.cpu
                    dcpu = cpu - st.cpu
                    oncpu = dcpu * 4 >= (t - st.t)
                    if not oncpu and st.rq_t is not None:
                        # runnable but descheduled (CPU contention) is not "waiting": check the
                        # run-queue delay from schedstat (fd kept open; read only when off-CPU)
                        try:
                            rq = int(st.rq_t.read().split()[1])
                            dt = t - st.t
                            if st.rq >= 0:
                                if st.rq_at == st.t:      # reading from the previous sample: exact
                                    oncpu = (dcpu + rq - st.rq) * 4 >= dt
                                else:                     # older reading: an upper bound
                                    oncpu = (rq - st.rq) * 4 >= dt
                            st.rq, st.rq_at = rq, t
                        except (OSError, ValueError, IndexError):
                            _close(st)
                    st.cpu = cpu
                else:
                    oncpu = True
                # classify the stack
                # walk outwards until a framework/tokenization/preprocessing frame decides;
                # user frames keep walking (an enclosing tokenizer wins).  The full walk (to see
                # importlib frames) only while some import holds a module lock.
                f = frame
                dom = 0
                label = None
                depth = 0
                importing = False
                full = bool(module_locks)
                while f is not None and depth < MAX_DEPTH:
                    co = f.f_code
                    e = code_get(id(co))
                    if e is None or e[0] is not co:
                        e = code_entry(co)
                    d = e[1]
                    if d:
                        if d == IMPORT:
                            importing = True
                            if label is None:   # name the module being loaded (innermost import)
                                g = f
                                for _ in range(40):
                                    if g is None:
                                        break
                                    if g.f_code.co_name == "_find_and_load":
                                        try:
                                            label = str(g.f_locals.get("name"))
                                        except Exception:
                                            pass
                                        break
                                    g = g.f_back
                            break
                        if dom == 0:
                            dom, label = d, e[2]
                            if d != USER and not full:
                                break
                        elif dom == USER and (d == TOK or d == PRE):
                            dom = d
                            if not full:
                                break
                    f = f.f_back
                    depth += 1
                if dom == 0:
                    dom = USER
                if dom == USER:
                    ss = scope_stacks.get(ident)
                    if ss:
                        sd = C.scope_domain(ss)
                        if sd:
                            dom = sd
                if not oncpu:
                    cls = CLS_WAITING
                    if st.perf is not None:
                        st.perf.drain(perf_maps)
                else:
                    oncpu_by_tid[st.tid] += 1
                    native = gil_free
                    if st.perf is not None:
                        nt, py, ot = st.perf.drain(perf_maps)
                        if nt + py + ot:
                            # majority of the task-clock IP samples taken since the last tick
                            native = nt > py + ot if nt * 2 != nt + py + ot else gil_free
                            st.native = native
                        elif st.native is not None:
                            native = st.native             # no new IP sample: keep the last verdict
                    if importing:
                        cls = CLS_FRAMEWORK   # module loading (library import) counts as framework
                        label = "import " + label if label else "import"
                    elif native and (dom == FW or (dom == USER and torch_seen)):
                        cls = CLS_COMPUTE
                    else:
                        cls = names[dom]
                if cls is not st.cls:
                    self._emit(st)
                    st.cls = cls
                    st.start = st.t
                    st.counts = {}
                if label is not None:
                    counts = st.counts
                    counts[label] = counts.get(label, 0) + 1
                st.t = t
                self.samples += 1
            if periodic is not None and t >= next_periodic:
                next_periodic = t + period_ns
                try:
                    periodic(t)
                except Exception:
                    pass
            if seen != len(threads):
                live = set(frames)
                for ident in [i for i in threads if i not in live]:
                    gone = threads.pop(ident)
                    self._emit(gone)
                    _close(gone)
            frames = frame = f = None
            self.busy_ns += clock() - t
        try:
            self.cpu_ns = cputime(my_clk)
        except OSError:
            pass

    def own_cpu_ns(self) -> int:
        clk = getattr(self, "my_clk", None)
        if clk is not None and self._thread is not None and self._thread.is_alive():
            try:
                return time.clock_gettime_ns(clk)
            except OSError:
                pass
        return self.cpu_ns
