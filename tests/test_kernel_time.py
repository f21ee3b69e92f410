"""Kernel-mode CPU time classified on its own (collect/kernel_time.py, the sampler's perf resolver;
issue 23 item 4): page-fault time is the memory work of the code that faulted, the CPU of a blocking
system call is part of the wait - never the thread's previous verdict."""
import mmap
import threading

import pytest

from inferscope import thresholds as T
from inferscope.collect import kernel_time as K
from inferscope.collect import perfip as P
from inferscope.collect import sampler as SM

from resolve_helpers import FakePerf, durations, resolve_thread
from test_sampler_ticks import IDENT, Clock, decode_loop

MS = 1_000_000


def test_parse_stat_with_odd_command_name():
    line = b"123 (a b) c)) R 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20\n"
    # fields after ")": state=R, ppid..., minflt=field 10 (7), majflt=12 (9), stime=15 (12)
    flt, sys_ns = K.parse_stat(line)
    assert flt == 7 + 9
    assert sys_ns == 12 * K._CLK_NS


def test_thread_stat_counts_this_threads_faults():
    ts = K.ThreadStat(threading.get_native_id())
    try:
        m = mmap.mmap(-1, 256 * 4096)
        for off in range(0, len(m), 4096):       # one write per fresh page: one minor fault each
            m[off] = 1
        kf, kns = ts.step(10 * MS, False)
        m.close()
        assert kf >= 200
        assert 0 <= kns <= 10 * MS
    finally:
        ts.close()


def test_fault_counter_counts_this_threads_faults():
    """The perf page-fault counter (what the sampler reads every tick: ~2 us, the stat file ~85 us)."""
    fc = K.FaultCounter.open(threading.get_native_id())
    if fc is None:
        pytest.skip("perf_event unavailable (perf_event_paranoid > 2, seccomp)")
    try:
        m = mmap.mmap(-1, 128 * 4096)
        for off in range(0, len(m), 4096):
            m[off] = 1
        assert 128 <= fc.delta() <= 160
        m.close()
    finally:
        fc.close()


def test_rules():
    # faults: native code -> cpu_compute, the interpreter -> its stack's class
    assert K.kernel_class(5, False, True, "user_code", "cpu_compute", "waiting") == ("cpu_compute", K.FAULTS)
    assert K.kernel_class(5, True, False, "user_code", "cpu_compute", "waiting") == ("user_code", K.FAULTS)
    # a page or two faulted by an I/O call's buffer is not memory work: the I/O rule holds
    assert K.kernel_class(2, True, False, "user_code", "cpu_compute", "waiting", io=True) == ("waiting", K.IO)
    assert K.kernel_class(50, True, True, "user_code", "cpu_compute", "waiting", io=True) == ("cpu_compute", K.FAULTS)
    # no faults, blocked: the system call's CPU is part of the wait; neither: no rule
    assert K.kernel_class(0, True, False, "user_code", "cpu_compute", "waiting") == ("waiting", K.IO)
    assert K.kernel_class(0, False, True, "user_code", "cpu_compute", "waiting") is None


def test_carry_step():
    cap = T.KERNEL_CARRY_MAX_NS
    assert K.carry_step(0, 10 * MS, 4 * MS, False) == (6 * MS, 4 * MS)   # 10 ms unit arrives, 4 ms used
    assert K.carry_step(6 * MS, 0, 4 * MS, True) == (2 * MS, 0)          # a waiting interval uses it up
    assert K.carry_step(0, 50 * MS, 1 * MS, False) == (cap - MS, MS)      # capped
    assert K.carry_step(-3 * MS, 0, 4 * MS, False) == (-3 * MS, 0)        # a debt: nothing to place


def _resolve(samples, pend, cls0="user_code", native=None):
    buf, s, _ = resolve_thread(samples, pend, cls0, native)
    return durations(buf), s


LBL = ("app.py:touch", 3)


def test_fault_interval_after_python_is_compute_not_inherited():
    """After a Python phase (last verdict: interpreter, 0 % native), a 10 ms interval with page faults and
    no user-space IP sample (perf samples user space only) used to keep user code; the GIL was free at
    the tick (native code released it): page-fault kernel time of native code (class page_faults, a part of
    cpu_compute: issue 45) from the interval's midpoint (the class changed somewhere in it)."""
    # (t, cls, label, fallback, gil_free, off, rq, faults, kernel ns, blocked)
    dur, s = _resolve([], [(10 * MS, None, LBL, "user_code", True, 0, 0, 900, 8 * MS, False)], native=0.0)
    assert dur == {"user_code": 5 * MS, "page_faults": 5 * MS}
    assert s.kernel_totals.faults == 900 and s.kernel_totals.fault_ns == 10 * MS
    # the GIL held (the interpreter faulted) and no native evidence: the stack's class
    dur, _ = _resolve([], [(10 * MS, None, LBL, "user_code", False, 0, 0, 900, 8 * MS, False)], native=0.0)
    assert dur == {"user_code": 10 * MS}
    # ... unless the thread's next user-space sample is in a numeric library
    dur, _ = _resolve([(12 * MS, P.COMPUTE)], [(10 * MS, None, LBL, "user_code", False, 0, 0, 900, 8 * MS, False)],
                      native=0.0)
    assert dur == {"user_code": 5 * MS, "page_faults": 5 * MS}
    # no faults, no sample: the old rule (the last fractions) holds
    dur, _ = _resolve([], [(10 * MS, None, LBL, "user_code", True, 0, 0, 0, 0, False)], native=0.0)
    assert dur == {"user_code": 10 * MS}


def test_keep_after_a_fault_part_is_the_compute_that_faulted():
    """A KEEP tick (an isolated GIL hand-over) continues the thread's class; after a page-fault part that is the native
    compute that faulted, not more fault time (the interval had no faults)."""
    pend = [(10 * MS, None, LBL, "user_code", True, 0, 0, 900, 8 * MS, False),
            (20 * MS, SM.KEEP, LBL, "user_code", True, 0, 0, 0, 0, False)]
    dur, s = _resolve([], pend, native=0.0)
    assert dur == {"user_code": 5 * MS, "page_faults": 5 * MS, "cpu_compute": 10 * MS}, dur
    assert s.kernel_totals.fault_ns == 10 * MS


def test_fault_interval_with_interpreter_samples_is_split():
    """12 ms with one interpreter sample (one perf period of user time) and faults: the rest the samples
    leave uncovered is kernel memory work (page_faults: GIL free), the sample's period user code."""
    pp = SM.PERF_PERIOD_NS
    dur, _ = _resolve([(11 * MS, P.PYTHON)], [(12 * MS, None, LBL, "user_code", True, 0, 0, 500, 2 * MS, False)],
                      native=0.0)
    assert dur == {"page_faults": 12 * MS - pp, "user_code": pp}


def test_blocking_call_cpu_is_waiting():
    """10 ms: 6 ms off-CPU (an O_DSYNC write), then 4 ms on CPU of which 3 ms kernel (stime): the 3 ms
    are the write's CPU -> waiting, next to the wait; the last 1 ms by the usual rule."""
    dur, s = _resolve([], [(10 * MS, None, LBL, "user_code", False, 6 * MS, 0, 0, 3 * MS, True)], native=0.0)
    assert dur == {"waiting": 9 * MS, "user_code": 1 * MS}
    assert s.kernel_totals.io_ns == 3 * MS
    # stime not reported yet (10 ms units): the on-CPU time the user-space samples leave uncovered is the
    # call's CPU when the wait was an I/O call (blocking.py probe: kb=2) ...
    dur, _ = _resolve([], [(10 * MS, None, LBL, "user_code", False, 6 * MS, 0, 0, 0, 2)], native=0.0)
    assert dur == {"waiting": 10 * MS}
    # ... with user-space samples covering its 4 ms (one per perf period): nothing left for the kernel
    pp = SM.PERF_PERIOD_NS
    dur, _ = _resolve([(6 * MS + k * pp + pp // 2, P.PYTHON) for k in range(4 * MS // pp)],
                      [(10 * MS, None, LBL, "user_code", False, 6 * MS, 0, 0, 0, 2)], native=0.0)
    assert dur == {"waiting": 6 * MS, "user_code": 4 * MS}
    # ... one sample only: the rest of its on-CPU time is the call's
    dur, _ = _resolve([(9 * MS, P.PYTHON)], [(10 * MS, None, LBL, "user_code", False, 6 * MS, 0, 0, 0, 2)],
                      native=0.0)
    assert dur == {"waiting": 10 * MS - pp, "user_code": pp}
    # ... and a lock/GIL wait (kb=1) scales it by the thread's kernel share (0 here: no stat reads)
    dur, _ = _resolve([], [(10 * MS, None, LBL, "user_code", False, 6 * MS, 0, 0, 0, 1)], native=0.0)
    assert dur == {"waiting": 6 * MS, "user_code": 4 * MS}
    # not blocked (no wait in this interval or the previous one): no I/O rule
    dur, _ = _resolve([], [(10 * MS, None, LBL, "user_code", False, 0, 0, 0, 3 * MS, False)], native=0.0)
    assert dur == {"user_code": 10 * MS}


def test_fault_interval_of_a_tokenizer_is_tokenization():
    """Page faults in an interval with no user-space sample, the GIL free, right after intervals whose samples
    were a native tokenizer's (a Rust encode_batch allocating its Encodings): the fault rule's class is the
    tokenizer's - it was decided, then dropped to the stack's class (user code: 9 of 24 ms of zoo_tokenizers'
    misread user code in one run)."""
    buf = []
    s = SM.Sampler(buf, 200, {}, set())
    s._perf_maps = object()
    st = SM._ThreadState(tid=1, clk=None, cpu=0, t=0)
    st.cls, st.start, st.end = "tokenization", 0, 0
    st.native, st.native_tok, st.native_fresh = 0.0, 0.9, True
    st.perf = FakePerf([])
    st.pending = [(5 * MS, None, LBL, "user_code", True, 0, 0, 400, 3 * MS, False)]
    s._resolve(st)
    s._emit(st)
    dur = {}
    for ev in buf:
        dur[ev[5]] = dur.get(ev[5], 0) + ev[4] - ev[3]
    assert dur == {"tokenization": 5 * MS}, dur


def test_blocked_interval_without_user_samples_few_faults_is_the_calls():
    """10 ms: 8 ms off-CPU in a call the probe's tick missed (kb=1: a ~90 us O_DIRECT read), then 2 ms on CPU,
    all kernel time, one page fault, the GIL free, and no user-space IP sample: the call's CPU (waiting), not
    native memory work - read as cpu_compute, 2-8 % of zoo_disk_io's window in 8 of 16 runs.  With a user-space
    sample in the interval (a Rust tokenizer descheduled mid-batch) the fault rule holds as before."""
    pend = [(10 * MS, None, LBL, "user_code", True, 8 * MS, 0, 1, 2 * MS, 1)]
    dur, s = _resolve([], list(pend), native=0.0)
    assert dur == {"waiting": 10 * MS}, dur
    assert s.kernel_totals.io_ns == 2 * MS and s.kernel_totals.fault_ns == 0
    dur, _ = _resolve([(9 * MS, P.TOKENIZER)], list(pend), native=0.0)
    assert dur.get("waiting") == 8 * MS and "tokenization" in dur, dur
    # (a fault storm is memory work either way)
    dur, _ = _resolve([], [(10 * MS, None, LBL, "user_code", True, 8 * MS, 0, 40, 2 * MS, 1)], native=0.0)
    assert dur == {"waiting": 8 * MS, "page_faults": 2 * MS}, dur


def test_unnamed_wait_cpu_by_perf_kernel_share():
    """Blocked intervals whose call the probe could not name (kb=1: it read the thread 'running' between
    90 us O_DIRECT reads, issue 25) and no stat reads: the on-CPU part the user-space samples leave uncovered
    is kernel time at the thread's kernel share by perf (1 - samples x period / CPU time over its recent
    intervals).  30 intervals of 5 ms: 3.5 ms off-CPU, then 1.5 ms on CPU (the last field: its CPU time,
    perf on all the interval)."""
    assert SM.perf_kernel_share(0, 0) == 0.0                       # nothing known: no kernel share
    pp = SM.PERF_PERIOD_NS
    assert SM.perf_kernel_share(100 * MS, 100 * MS // pp) == 0.0     # one sample per period: all user time
    assert 0.98 < SM.perf_kernel_share(100 * MS, 0) < 1.0          # none: kernel time (the prior: < 1)
    pend = [((k + 1) * 5 * MS, None, LBL, "user_code", False, int(3.5 * MS), 0, 0, 0, 1, int(1.5 * MS))
            for k in range(30)]
    dur, s = _resolve([], list(pend), native=0.0)
    assert sum(dur.values()) == 150 * MS
    assert dur.get("user_code", 0) < 0.1 * 45 * MS, dur             # the reads' kernel CPU: the wait's
    assert s.kernel_totals.io_ns > 0.9 * 45 * MS
    # the same with one interpreter sample per perf period of its CPU time (Python between lock waits): user code
    n = 45 * MS // pp
    samples = []
    for k in range(30):
        cnt = (k + 1) * n // 30 - k * n // 30
        samples += [(int(k * 5 * MS + 3.5 * MS + (j + 0.5) * 1.5 * MS / cnt), P.PYTHON) for j in range(cnt)]
    dur, _ = _resolve(samples, list(pend), native=0.0)
    assert dur.get("user_code", 0) > 0.85 * 45 * MS, dur
    # without the CPU time field (perf off for part of the interval: an import) the share stays unknown
    dur, _ = _resolve([], [p[:10] for p in pend], native=0.0)
    assert dur.get("user_code", 0) == 45 * MS, dur


class FakeStat:
    """Stands for kernel_time.ThreadStat: faults/kernel time per step from a script keyed by fake time."""
    script = None
    clock = None

    def __init__(self, tid, path=None):
        pass

    def step(self, cpu_ns, waiting, blocked=True, gate=True):
        return FakeStat.script(FakeStat.clock.now, cpu_ns)

    def kernel_share(self):
        return 1.0

    def fault_cost(self):
        return T.KERNEL_FAULT_NS_PRIOR

    def add_counter(self, tid):
        pass

    def close(self):
        pass


class FakePerfIP:
    """perf for the fake thread: interpreter samples every 2 ms up to the fake clock's time while the
    script says Python runs; none while it faults (kernel samples are excluded)."""
    clock = None
    python_until = 0

    def __init__(self):
        self.last = 0

    @classmethod
    def open(cls, tid, period, stack_bytes=0):
        return cls()

    def enable(self, on):
        pass

    def read(self, maps):
        now = min(self.clock.now, self.python_until)
        out = [(t, P.PYTHON) for t in range(self.last + 2 * MS, now + 1, 2 * MS)]
        self.last = max(self.last, now)
        return out

    def close(self):
        pass


def test_ticks_page_fault_phase_after_python_phase(monkeypatch):
    """The sampler loop driven by fakes: 20 ticks of Python (interpreter samples), then 20 ticks of a
    page-touching phase (faults every tick, no user-space sample, GIL free at the ticks).  The fault
    phase is page-fault kernel time (page_faults, a part of cpu_compute); before, it inherited the Python phase's
    user code."""
    f = next(decode_loop())
    I = 5 * MS
    script = [(f, True)] * 41
    c = Clock(script, None)
    FakeStat.clock = FakePerfIP.clock = c
    FakePerfIP.python_until = 21 * I
    FakeStat.script = staticmethod(lambda now, cpu: (0, 0) if now <= 21 * I else (300, cpu))
    monkeypatch.setattr(K, "ThreadStat", FakeStat)
    monkeypatch.setattr(K, "Gate", lambda: (lambda: True))
    buf = []
    s = SM.Sampler(buf, 200, {}, set(), clock=c.clock, sleep=c.sleep, frames=c.frames, cputime=c.cputime,
                   getclk=lambda ident: "fake-clk" if ident == IDENT else 0)
    c.stop = s._stop.set
    s.use_perf = False
    s._perf_main = None
    s._PerfIP = FakePerfIP
    s._perf_maps = object()          # perf "ready": adopted at the first tick
    s._run()
    s._close_all()
    dur = {}
    for e in buf:
        if e[0] == 0 and e[2] == IDENT:
            dur[e[5]] = dur.get(e[5], 0) + e[4] - e[3]
    assert dur.get("page_faults", 0) >= 18 * I, dur
    assert 18 * I <= dur.get("user_code", 0) <= 21 * I, dur
    assert s.kernel_totals.faults >= 18 * 300
    counters = {e[1] for e in buf if e[0] == 1}
    assert {"proc.kernel_fault_cpu_s", "proc.kernel_faults", "proc.kernel_io_cpu_s"} <= counters


def test_one_fault_does_not_make_an_interval_kernel_time():
    """5.7 ms of a pure-Python loop with one page fault (the torch op before it allocated) and one interpreter
    sample, the GIL free at the tick: the time the sample leaves uncovered (1.7 ms at a 4 ms perf period) is
    sampling noise, not the fault's kernel time - at most KERNEL_FAULT_COST_SPREAD x the cost of one fault goes
    to the fault rule (zoo py_between_ops_1.7ms read 10-20 ms of its loop as cpu_compute per run)."""
    pp = SM.PERF_PERIOD_NS
    dt = 5_700_000
    cap = int(T.KERNEL_FAULT_NS_PRIOR * T.KERNEL_FAULT_COST_SPREAD)
    dur, s = _resolve([(5 * MS, P.PYTHON)], [(dt, None, LBL, "user_code", True, 0, 0, 1, 12_000, False)], native=0.0)
    assert dur == {"page_faults": cap, "user_code": dt - cap}, dur
    assert s.kernel_totals.fault_ns == cap
    # many faults: the uncovered time is all kernel time, as before (a page-touching loop)
    dur, _ = _resolve([(5 * MS, P.PYTHON)], [(dt, None, LBL, "user_code", True, 0, 0, 300, 12_000, False)], native=0.0)
    assert dur == {"page_faults": dt - pp, "user_code": pp}, dur
