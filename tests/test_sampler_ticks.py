"""Tick classification of the live sampler, driven deterministically: the clock, sleep, frame source
and CPU clocks are injected (collect/sampler.py), so every tick's time and class is known."""
import sys

import pytest

from inferscope.collect import sampler as SM

MS = 1_000_000
IDENT = 1 << 40            # a thread ident no real thread has (no /proc schedstat for it)


def tokenize_text():       # user code named like a tokenizer: tokenization
    yield sys._getframe()


def preprocess_images():   # user code named like preprocessing: preprocessing
    yield sys._getframe()


def decode_loop():         # plain user code (module level: a nested function's qualname carries the test's name)
    yield sys._getframe()


class Clock:
    """Fake time: only sleep advances it; the watched thread's CPU clock advances by the slept time
    while it is on CPU."""

    def __init__(self, script, stop):
        self.now = 0
        self.cpu = 0
        self.script = script          # per tick: (frame, on_cpu)
        self.tick = 0
        self.stop = stop

    def clock(self):
        return self.now

    def sleep(self, s):
        dt = int(round(s * 1e9))
        self.now += dt
        frame, on_cpu = self.script[min(self.tick, len(self.script) - 1)]
        self.frame = frame
        if on_cpu:
            self.cpu += dt
        self.tick += 1
        if self.tick >= len(self.script):
            self.stop()               # the loop finishes this tick, then exits

    def frames(self):
        return {IDENT: self.frame}

    def cputime(self, clk):
        return self.cpu if clk == "fake-clk" else 0


def drive(script, scopes=None):
    """Run the sampler loop in this thread over ``script``: (sampler, its buffer)."""
    buf = []
    c = Clock(script, None)
    s = SM.Sampler(buf, 200, scopes or {}, set(), clock=c.clock, sleep=c.sleep, frames=c.frames, cputime=c.cputime,
                   getclk=lambda ident: "fake-clk" if ident == IDENT else 0)
    c.stop = s._stop.set
    loop(s)                                             # the sampler loop, in this thread
    return s, buf


def loop(s):
    """Run a constructed sampler's loop in this thread (no perf), then close its runs."""
    s.use_perf = False
    s._perf_maps = s._PerfIP = s._perf_main = None
    s._run()
    s._close_all()


def resolved(pending, cls0="user_code", clk=None):
    """A thread's queued ticks decided and emitted: [(class, start, end, ticks)] of its runs."""
    buf = []
    s = SM.Sampler(buf, 200, {}, set())
    st = SM._ThreadState(tid=1, clk=clk, cpu=0, t=0)
    st.cls, st.start, st.end = cls0, 0, 0
    st.pending = pending
    s._resolve(st)
    s._emit(st)
    return [(ev[5], ev[3], ev[4], ev[8]) for ev in buf]


def run_script(script, scopes=None):
    _, buf = drive(script, scopes)
    return [(e[5], e[3], e[4]) for e in buf if e[2] == IDENT]


def test_ticks_classified_and_split_at_midpoints():
    tok = next(tokenize_text())
    pre = next(preprocess_images())
    I = 5 * MS                                          # 200 Hz
    script = [(tok, True)] * 11 + [(pre, True)] * 10 + [(pre, False)] * 10
    runs = run_script(script)
    # tick 1 (t = I) only opens the thread's state; ticks 2..11 tokenization, 12..21 preprocessing,
    # 22..31 off-CPU; a class change between two ticks, read from the frames, is placed at their midpoint; the
    # change to off-CPU is exact: the thread's CPU clock did not move in the interval before tick 22
    assert runs == [("tokenization", 1 * I, 11 * I + I // 2),
                    ("preprocessing", 11 * I + I // 2, 21 * I),
                    ("waiting", 21 * I, 31 * I)]


def test_scope_decode_is_not_tokenization():
    """scope("decode") around plain user code: an LLM phase, not tokenization (the old rule made such a
    loop "96.6 % tokenization"); the scope changes nothing, and a tokenizer frame still decides."""
    frame = next(decode_loop())
    plain = run_script([(frame, True)] * 4)
    scoped = run_script([(frame, True)] * 4, scopes={IDENT: ["decode"]})
    assert scoped == plain and [r[0] for r in scoped] in (["user_code"], ["cpu_compute"])
    tok = next(tokenize_text())
    assert [r[0] for r in run_script([(tok, True)] * 4, scopes={IDENT: ["decode"]})] == ["tokenization"]


@pytest.mark.parametrize("scope,cls", [(["tokenize"], "tokenization"), (["preprocess"], "preprocessing")])
def test_scope_names_classify_user_code(scope, cls):
    def work():
        yield sys._getframe()
    frame = next(work())
    # plain user code on CPU: the innermost scope that says tokenize/preprocess decides
    runs = run_script([(frame, True)] * 4, scopes={IDENT: scope})
    assert [r[0] for r in runs] == [cls]


class PacedClock(Clock):
    """Also records the sampler's sleeps and gives it a CPU clock of its own ("sampler-clk")."""

    def __init__(self, script, stop, *, register_cost_ns=0, stall_at=None, stall_ns=0, tick_cpu_ns=0):
        super().__init__(script, stop)
        self.sleeps = []
        self.sampler_cpu = 0
        self.register_cost_ns = register_cost_ns
        self.stall_at, self.stall_ns, self.tick_cpu_ns = stall_at, stall_ns, tick_cpu_ns

    def sleep(self, s):
        self.sleeps.append(int(round(s * 1e9)))
        super().sleep(s)

    def frames(self):
        if self.tick == self.stall_at:       # descheduled while holding the GIL: wall time, no CPU
            self.now += self.stall_ns
        self.sampler_cpu += self.tick_cpu_ns
        return super().frames()

    def getclk(self, ident):
        if ident == IDENT:                   # registering the thread (perf_event_open, /proc files)
            self.now += self.register_cost_ns
            self.sampler_cpu += self.register_cost_ns
            return "fake-clk"
        return "sampler-clk"

    def cputime(self, clk):
        return self.sampler_cpu if clk == "sampler-clk" else super().cputime(clk)


def paced_sleeps(n_ticks, **kw):
    c = PacedClock([(next(decode_loop()), True)] * n_ticks, None, **kw)
    s = SM.Sampler([], 200, {}, set(), clock=c.clock, sleep=c.sleep, frames=c.frames, cputime=c.cputime,
                   getclk=c.getclk)
    c.stop = s._stop.set
    s.use_perf = False
    s._perf_maps = s._PerfIP = s._perf_main = None
    s._run()
    s._close_all()
    return c.sleeps


def test_setup_tick_does_not_slow_sampling():
    """A 30 ms thread registration (the first perf_event_open) used to feed the GIL budget: the
    interval stretched to 100 ms for the next second and a 150 ms scope got no tick."""
    assert set(paced_sleeps(40, register_cost_ns=30 * MS)) == {5 * MS}


def test_descheduled_tick_does_not_slow_sampling():
    """Wall time of a tick spent descheduled (host load) is not the sampler's cost: paced by CPU."""
    assert set(paced_sleeps(40, stall_at=3, stall_ns=30 * MS)) == {5 * MS}


def test_expensive_ticks_still_paced_by_budget():
    """Ticks that really cost CPU (deep stacks, many threads) stretch the interval to the budget."""
    sleeps = paced_sleeps(200, tick_cpu_ns=300_000)        # 0.3 ms per tick / 1.5 % budget = 20 ms
    assert sleeps[0] == 5 * MS and 15 * MS < sleeps[-1] <= 20 * MS


def test_low_sampling_rate_warning():
    from types import SimpleNamespace
    from inferscope.collect.session_meta import sampling_rate_warning
    slow = SimpleNamespace(steady_ticks=29, steady_ns=2_000_000_000)       # 14.5 Hz
    assert "14 Hz of the 200 Hz" in sampling_rate_warning(slow, 200)
    assert sampling_rate_warning(SimpleNamespace(steady_ticks=300, steady_ns=2_000_000_000), 200) is None
    assert sampling_rate_warning(SimpleNamespace(steady_ticks=1, steady_ns=100_000_000), 200) is None   # too short to judge
    assert sampling_rate_warning(None, 200) is None


def test_gil_free_tick_in_library_plumbing_keeps_class():
    """Without perf, a tick that gets the GIL at once while the thread has only stdlib frames on its
    stack (a Pool worker blocked on its task queue) is a blocking wait, not native compute: the
    thread keeps the class of what it did before (a spawn worker's resize read 40 % cpu_compute)."""
    import threading
    pre = next(preprocess_images())
    box = {}
    ev, done = threading.Event(), threading.Event()

    def waiter():
        box["f"] = sys._getframe()
        ev.set()
        done.wait(5)
    th = threading.Thread(target=waiter)
    th.start()
    ev.wait(5)
    try:
        lib = box["f"].f_back          # threading.Thread.run and its callers: stdlib frames only
        runs = run_script([(pre, True)] * 4 + [(lib, True)] * 4)
        assert [r[0] for r in runs] == ["preprocessing"], runs
        # a labelled frame still decides (user code after the preprocessing)
        runs = run_script([(pre, True)] * 4 + [(next(decode_loop()), True)] * 4)
        assert [r[0] for r in runs][0] == "preprocessing" and runs[-1][0] in ("user_code", "cpu_compute"), runs
    finally:
        done.set()
        th.join()


def test_fault_ticks_are_sparse_and_exact():
    """SystemSampler.faults_tick: samples only around ticks where the page-fault count moved, each
    faulting tick interval bounded by the counts at both of its ticks (recounted with getrusage)."""
    import mmap
    import resource

    import numpy as np

    from inferscope.collect.system import SystemSampler

    def faults():
        ru = resource.getrusage(resource.RUSAGE_SELF)
        return ru.ru_minflt + ru.ru_majflt

    out = []
    s = SystemSampler(out.append)
    s.close()
    # 8 MiB of fresh anonymous pages (np.empty may reuse heap pages touched earlier in this process: a
    # fresh-clone CI run saw no fault at all); touched through numpy, untouched until then
    m = mmap.mmap(-1, 8 << 20)
    a = np.frombuffer(m, dtype=np.uint8)
    s.faults_tick(1 * MS)                   # (may emit: faults since the sampler was made)
    c1, n1 = faults(), len(out)
    for k in (2, 3, 4):                     # no allocation between these ticks
        s.faults_tick(k * MS)
    c4 = faults()
    quiet = out[n1:]
    a[::4096] = 1                            # first touches: page faults
    s.faults_tick(5 * MS)
    c5 = faults()
    del a
    m.close()
    if c4 == c1:                             # nothing faulted between the quiet ticks: nothing emitted
        assert quiet == []
    pf = [e for e in out if e[1] == "proc.page_faults"]
    ks = [e for e in out if e[1] == "proc.sys_cpu_s"]
    # the tick before the faults (4 ms) comes first with its count, then the faulting tick's
    assert [e[3] for e in pf[-2:]] == [4 * MS, 5 * MS] and [e[3] for e in ks[-2:]] == [4 * MS, 5 * MS]
    assert pf[-2][4] <= c4 <= pf[-1][4] <= c5
    assert pf[-1][4] - pf[-2][4] >= 2       # the touched pages' faults (THP: ~1 per 2 MiB, else 2048)
    assert ks[-1][4] >= ks[-2][4] >= 0


def post_process():        # plain user code, a second function of the same class as decode_loop
    yield sys._getframe()


def test_one_function_per_run_with_its_tick_count_and_line():
    """Two user-code functions alternating in blocks: each block is its own run (split at the midpoint),
    names its own function with its line, and carries the ticks that named it (issue 24 item 1: a run of
    one class used to give all its time to its most frequent function; the samples column counted runs)."""
    a = next(decode_loop())
    b = next(post_process())
    I = 5 * MS
    _, buf = drive([(a, True)] * 7 + [(b, True)] * 3 + [(a, True)] * 4)
    runs = [e for e in buf if e[2] == IDENT]
    # tick 1 opens the state; ticks 2..7 decode_loop (6), 8..10 post_process (3), 11..14 decode_loop (4)
    # one class throughout (user_code; cpu_compute by the GIL heuristic once torch is imported in this process)
    cls = runs[0][5]
    assert [(e[5], e[3], e[4]) for e in runs] == [(cls, 1 * I, 7 * I + I // 2),
                                                  (cls, 7 * I + I // 2, 10 * I + I // 2),
                                                  (cls, 10 * I + I // 2, 14 * I)]
    la, lb = a.f_lineno, b.f_lineno
    assert [e[6].rsplit(":", 2)[1:] for e in runs] == [["decode_loop", str(la)], ["post_process", str(lb)],
                                                       ["decode_loop", str(la)]]
    assert [e[8] for e in runs] == [6, 3, 4]


def test_switch_interval_short_only_while_one_python_thread_runs():
    """The live sampler shortens the interpreter's switch interval while one thread of the program is on CPU
    (a tick then waits <= 0.5 ms for the GIL instead of until the next GIL-releasing call), gives the
    program's own back when a second busy thread appears (an idle one does not count), and restores it at stop."""
    import threading
    import time as _t
    prev = sys.getswitchinterval()
    # threads other tests of this process left behind are not the program's: skipped like InferScope's own
    others = {t.ident for t in threading.enumerate() if t is not threading.main_thread()}
    s = SM.Sampler([], 200, {}, others)
    s.use_perf = False
    s.start()

    def spin_until(cond, limit_s=5.0):
        t0 = _t.perf_counter()
        while not cond() and _t.perf_counter() - t0 < limit_s:
            sum(range(2000))
        return cond()
    try:
        assert spin_until(lambda: sys.getswitchinterval() == pytest.approx(SM.SWITCH_INTERVAL_S))
        stop = threading.Event()
        idle = threading.Thread(target=lambda: stop.wait(5))      # an idle thread (an executor's) changes nothing
        idle.start()
        spin_until(lambda: False, 0.2)
        assert sys.getswitchinterval() == pytest.approx(SM.SWITCH_INTERVAL_S)

        def busy():
            while not stop.is_set():
                sum(range(2000))
        th = threading.Thread(target=busy)                         # a second busy Python thread: the program's own
        th.start()
        try:
            assert spin_until(lambda: sys.getswitchinterval() == prev)
        finally:
            stop.set()
            th.join()
            idle.join()
        assert spin_until(lambda: sys.getswitchinterval() == pytest.approx(SM.SWITCH_INTERVAL_S))
    finally:
        s.stop()
    assert sys.getswitchinterval() == prev


def test_thread_ticks_count_rate_per_thread():
    """Per-thread achieved rate (issue 23 item 5): ticks that saw the thread outside imports and the
    time they covered; the registering tick only opens the thread's state."""
    tok = next(tokenize_text())
    s, _ = drive([(tok, True)] * 21)
    (n, ns), = s.thread_ticks.values()
    assert n == 20 and ns == 20 * 5 * MS                # 200 Hz on this thread


def test_low_rate_warning_names_the_thread():
    from types import SimpleNamespace
    from inferscope.collect.session_meta import sampling_rate_warning, thread_rates
    smp = SimpleNamespace(steady_ticks=400, steady_ns=2_000_000_000, main_tid=10,      # 200 Hz overall
                          thread_ticks={10: [400, 2_000_000_000], 11: [60, 1_000_000_000], 12: [5, 100_000_000]})
    rows = thread_rates(smp, {11: "model_0", 12: "short"})
    assert [(r["name"], r["hz"]) for r in rows] == [("main", 200.0), ("model_0", 60.0), ("short", 50.0)]
    w = sampling_rate_warning(smp, 200, {11: "model_0", 12: "short"})
    assert "model_0 (60 Hz)" in w and "short" not in w and "main" not in w      # 0.1 s: too short to judge
    smp.thread_ticks[11] = [150, 1_000_000_000]
    assert sampling_rate_warning(smp, 200, {11: "model_0"}) is None


def test_program_ending_before_the_first_tick_is_classified():
    """Run edges (issue 25 item 4): the main thread's CPU clock and time are read by start(), and a
    program that stops the sampler before its first tick (a 60 ms script while the sampler thread's own
    start-up runs on a loaded host) still gets one tick, without the sleep: its 30 ms on CPU since start()
    read user code, not 'other' (nothing sampled) nor cpu_compute."""
    import threading
    main = threading.main_thread()
    now = {"t": 0, "cpu": 0}
    frame = next(decode_loop())
    buf = []
    s = SM.Sampler(buf, 200, {}, set(), clock=lambda: now["t"], sleep=lambda _s: pytest.fail("slept"),
                   frames=lambda: {main.ident: frame}, cputime=lambda clk: now["cpu"] if clk == "main" else 0,
                   getclk=lambda ident: "main" if ident == main.ident else 0)
    s.use_perf, s.probe_blocking, s.kernel_time = False, False, False
    s._perf_maps = s._PerfIP = s._perf_main = None
    s._pre = (main.ident, 0, 0, -1)                   # what start() reads
    now["t"] = now["cpu"] = 30 * MS                   # the program runs 30 ms, then exits
    s._stop_at = now["t"]
    s._stop.set()
    th = threading.Thread(target=s._run)          # the sampler's own thread is skipped: not this one
    th.start()
    th.join()
    s._close_all()
    # user code, also once another test imported torch: the GIL free at the final tick is the main thread's
    # wait for stop()'s join, not native code (the GIL heuristic read it cpu_compute)
    assert [(e[5], e[3], e[4]) for e in buf if e[2] == main.native_id] == [("user_code", 0, 30 * MS)]


def test_final_tick_ends_when_stop_was_called():
    """The final tick (stop() waits for it, up to a tick interval) classifies up to stop()'s call, the
    program's end: the main thread's wait in that join is not the program's (zoo_short60: 12 % of its
    window read off-CPU at the end)."""
    dec = next(decode_loop())
    buf = []
    c = Clock([(dec, True)] * 4, None)
    s = SM.Sampler(buf, 200, {}, set(), clock=c.clock, sleep=c.sleep, frames=c.frames, cputime=c.cputime,
                   getclk=lambda ident: "fake-clk" if ident == IDENT else 0)

    def stop():                      # called 2 ms before the last sleep ends (the program's exit)
        s._stop_at = c.now - 2 * MS
        s._stop.set()
    c.stop = stop
    loop(s)
    spans = [(e[3], e[4]) for e in buf if e[2] == IDENT]
    # ticks at 5, 10, 15 ms; stop() at 18 ms (the last sleep ends at 20); the spans tile 5-18 ms (one class,
    # or two once another test imported torch: the GIL heuristic's cpu_compute, then the final tick's)
    assert spans[0][0] == 5 * MS and spans[-1][1] == 18 * MS, spans
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:])), spans


def test_tick_under_way_at_stop_is_followed_by_a_final_tick():
    """A tick still under way when stop() is called (beside 3 spinning Python threads one waited 100+ ms for
    the GIL) is not the last: the final tick follows, and the spans reach stop()'s call.  Before, zoo_gil read
    100 % 'other' in 1 run of 3: the main thread's interval since its previous tick was never classified."""
    dec = next(decode_loop())
    buf = []
    c = Clock([(dec, True)] * 10, lambda: None)
    s = SM.Sampler(buf, 200, {}, set(), clock=c.clock, sleep=c.sleep, frames=None, cputime=c.cputime,
                   getclk=lambda ident: "fake-clk" if ident == IDENT else 0)

    def frames():                    # the third tick: the program ends while it holds on (50 ms)
        if c.tick == 3 and not s._stop.is_set():
            c.now += 50 * MS
            c.cpu += 50 * MS
            s._stop_at = c.now - 5 * MS
            s._stop.set()
        return c.frames()
    s._frames = frames
    loop(s)
    spans = [(e[3], e[4]) for e in buf if e[2] == IDENT]
    # ticks at 5, 10, 15 ms (the third held on to 65 ms); stop() at 60 ms: the final tick classifies 15-60 ms
    assert spans and spans[-1][1] == 60 * MS, spans
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:])), spans


def test_long_interval_laid_out_in_pieces():
    """A 100 ms interval (the sampler starved) of 30 ms CPU, 10 ms run queue and 60 ms off-CPU is laid out as
    20 pieces of 5 ms with those fractions (LONG_INTERVAL_TICKS), not one block per part: a window that starts
    inside the interval gets its fractions, and the tick's function counts once."""
    ent = (100 * MS, "user_code", ("app.py:spin", 7), None, False, -60 * MS, 10 * MS, 0, 0, 1, -1, True)
    pending = SM._pieces(ent, 0, 5 * MS)
    assert len(pending) == 20 and pending[-1][0] == 100 * MS
    runs = resolved(pending)
    assert runs[0][1] == 0 and runs[-1][2] == 100 * MS
    assert all(a[2] == b[1] for a, b in zip(runs, runs[1:])), runs

    def share(cls, lo, hi):
        return sum(max(0, min(b, hi) - max(a, lo)) for c, a, b, _ in runs if c == cls) / (hi - lo)
    for lo, hi in ((0, 100 * MS), (40 * MS, 60 * MS), (72 * MS, 97 * MS)):
        assert share("user_code", lo, hi) == pytest.approx(0.3, abs=0.05), (lo, hi)
        assert share("run_queue", lo, hi) == pytest.approx(0.1, abs=0.05), (lo, hi)
        assert share("waiting", lo, hi) == pytest.approx(0.6, abs=0.05), (lo, hi)
    assert sum(n for c, _, _, n in runs if c == "user_code") == 1
    # amounts are conserved exactly, remainders in the last piece
    p = SM._pieces((100 * MS + 7, "user_code", None, None, False, -60 * MS - 3, 10 * MS + 1, 0, 0, 1, 30 * MS + 11, True),
                   0, 5 * MS)
    assert sum(x[5] for x in p) == -60 * MS - 3 and sum(x[6] for x in p) == 10 * MS + 1
    assert sum(x[10] for x in p) == 30 * MS + 11 and [x[11] for x in p].count(True) == 1


def test_cpu_clock_read_late_in_a_tick_ends_the_threads_interval_then():
    """A tick that loses the GIL part-way reads a thread's CPU clock later than the tick began: the interval
    ends at that reading.  Here the thread is off CPU until the second tick, which holds on 40 ms while the
    thread runs: its 40 ms of CPU fall in 5-50 ms (laid out in pieces: LONG_INTERVAL_TICKS), not in 5-10 ms (zoo_gil: 23 ms of the
    loop's CPU placed before the window, user code 4.6 % vs 27 % true)."""
    dec = next(decode_loop())
    buf = []
    c = Clock([(dec, False)] * 4, None)
    s = SM.Sampler(buf, 200, {}, set(), clock=c.clock, sleep=c.sleep, frames=None, cputime=c.cputime,
                   getclk=lambda ident: "fake-clk" if ident == IDENT else 0)
    held = []

    def frames():
        if c.tick == 2 and not held:         # the tick at 10 ms: 40 ms to get the GIL back, the thread on CPU
            held.append(1)
            c.now += 40 * MS
            c.cpu += 40 * MS
        return c.frames()
    s._frames = frames
    c.stop = s._stop.set
    loop(s)
    runs = [(e[5], e[3], e[4]) for e in buf if e[2] == IDENT]
    on = sum(min(b, 50 * MS) - max(a, 10 * MS) for cls, a, b in runs if cls != "waiting" and b > 10 * MS and a < 50 * MS)
    total = sum(b - a for cls, a, b in runs if cls != "waiting")
    # (before: the 5-10 ms interval took all 40 ms of CPU as 5 ms on CPU, and 10-55 ms read waiting)
    assert on >= 30 * MS and abs(total - 40 * MS) <= 3 * MS, runs   # (+2.5: a midpoint split after it)


def test_long_interval_cut_at_scope_edges_by_their_cpu_readings():
    """scope() reads its thread's CPU clock at entry and exit (api._cpu_mark); a long interval is cut there
    (_split_at_marks): the window that starts at the scope's entry gets the CPU that ran after it.  180 ms,
    32 ms CPU of which 0.5 ms before a scope entry at 100 ms, run queue 9 ms."""
    import types
    from inferscope.collect import api
    ent = (180 * MS, "user_code", ("app.py:spin", 7), None, False, -139 * MS, 9 * MS, 0, 0, 1, 32 * MS, True)
    pending = SM._split_at_marks(ent, 0, 0, 32 * MS, [(100 * MS, MS // 2)], 5 * MS)
    assert sum(e[6] for e in pending) == 9 * MS and [e[11] for e in pending].count(True) == 1
    runs = resolved(pending)
    assert runs[0][1] == 0 and runs[-1][2] == 180 * MS and all(a[2] == b[1] for a, b in zip(runs, runs[1:])), runs

    def ms(cls, lo, hi):
        return sum(max(0, min(b, hi) - max(a, lo)) for c, a, b, _n in runs if c == cls) / MS
    assert ms("user_code", 0, 100 * MS) == pytest.approx(0.5, abs=0.01)
    assert ms("user_code", 100 * MS, 180 * MS) == pytest.approx(31.5, abs=0.01)
    # the run queue in proportion to each part's time off CPU: 99.5 of 147.5 ms before, 48.5 after
    assert ms("run_queue", 0, 100 * MS) == pytest.approx(9 * 99.5 / 147.5, abs=0.05)   # (ns floors per piece)
    # uniform pieces alone (no reading) would have put 17.8 ms of CPU before the scope
    runs = resolved(SM._pieces(ent, 0, 5 * MS))
    assert ms("user_code", 0, 100 * MS) > 15
    # the readings: scope() at entry and exit, this thread's CPU clock, bounded per tick
    sess = types.SimpleNamespace(cpu_marks={})
    api._cpu_mark(sess, 7, 123)
    api._cpu_mark(sess, 7, 456)
    (t1, c1), (t2, c2) = sess.cpu_marks[7]
    assert (t1, t2) == (123, 456) and 0 < c1 <= c2
    for _ in range(2 * api.MAX_CPU_MARKS):
        api._cpu_mark(sess, 7, 789)
    assert len(sess.cpu_marks[7]) == api.MAX_CPU_MARKS


def test_run_queue_wait_under_way_at_a_tick_moves_back_from_off_cpu():
    """schedstat counts a run-queue wait when it ends: a thread still waiting for a CPU at a tick had that
    wait read as off-CPU, and the next interval, on CPU all along, has no room for it.  The excess goes back
    to the latest pending off-CPU parts (layout.owed_run_queue), or to the end of the open 'waiting' run.
    Measured (torch_preprocess and a CPU hog pinned to one CPU, 51.6 % run queue by the truth): run queue
    -17 points -> -8.5, off-CPU +17 -> +9 (2 runs each)."""
    from inferscope.collect.layout import owed_run_queue
    pend = [(10 * MS, "user_code", None, None, False, -4 * MS, 0, 0, 0, 1, -1, True),
            (20 * MS, "user_code", None, None, False, 3 * MS, 1 * MS, 0, 0, 1, -1, True),
            (30 * MS, "user_code", None, None, False, -5 * MS, 0, 0, 0, 1, -1, True)]
    left = owed_run_queue(pend, 7 * MS)
    assert left == 0
    assert [(e[5], e[6]) for e in pend] == [(-4 * MS, 0), (1 * MS, 3 * MS), (0, 5 * MS)]
    # it stops at a tick with no off-CPU part, and says what it could not place
    pend2 = [(10 * MS, "user_code", None, None, False, -4 * MS, 0, 0, 0, 1, -1, True),
             (20 * MS, "user_code", None, None, False, 0, 2 * MS, 0, 0, 1, -1, True)]
    assert owed_run_queue(pend2, 3 * MS) == 3 * MS and pend2[0][5] == -4 * MS
    # resolved: the moved time reads run_queue, the sum is unchanged
    dur = {}
    for c, a, b, _n in resolved(pend, clk="c"):
        dur[c] = dur.get(c, 0) + b - a
    assert dur["run_queue"] == 8 * MS and dur["waiting"] == 5 * MS and sum(dur.values()) == 30 * MS, dur
    # no pending tick: the open 'waiting' run's last part becomes a run_queue run
    buf = []
    s = SM.Sampler(buf, 200, {}, set())
    st = SM._ThreadState(tid=1, clk="c", cpu=0, t=0)
    st.cls, st.start, st.end = "waiting", 0, 20 * MS
    s._owed_open_run(st, 6 * MS)
    s._emit(st)
    assert [(e[5], e[3], e[4]) for e in buf] == [("waiting", 0, 14 * MS), ("run_queue", 14 * MS, 20 * MS)]


def _finished_runs(marks=None, alive=False, ended=(110 * MS, 40 * MS)):
    """A thread last ticked at 10 ms (10 ms CPU then), user code, whose end thread_life read at ``ended``."""
    from inferscope.collect import thread_life
    buf = []
    s = SM.Sampler(buf, 200, {}, set(), cputime=lambda clk: ended[1], clock=lambda: ended[0])
    st = SM._ThreadState(tid=77, clk="fake-clk", cpu=10 * MS, t=10 * MS)
    st.on_cls, st.on_label = "user_code", ("app.py:spin", 12)
    if not alive:
        thread_life.ended[77] = ended
    try:
        s._finish(st, marks, alive=alive)
        s._emit(st)
    finally:
        thread_life.ended.pop(77, None)
    return [(e[5], e[3], e[4]) for e in buf if e[2] == 77], s


def test_thread_that_ended_gets_its_last_interval():
    """A thread that ended between two ticks (its CPU clock is gone): its last interval comes from thread_life's
    reading at its end - 30 ms CPU of 100 ms at the class of its last on-CPU run, the rest off-CPU, laid in
    tick-sized pieces (the sampler starved: three spinners' CPU after their last tick was lost, zoo_gil)."""
    runs, s = _finished_runs()
    assert runs[0][1] == 10 * MS and runs[-1][2] == 110 * MS, runs
    assert all(a[2] == b[1] for a, b in zip(runs, runs[1:])), runs
    on = sum(b - a for c, a, b in runs if c == "user_code")
    assert on == pytest.approx(30 * MS, abs=MS) and {c for c, _, _ in runs} == {"user_code", "waiting"}, runs
    assert s.oncpu_by_tid.get(77) == 1          # on CPU after all: not dropped as an idle pool thread
    # cut at its CPU reading at a scope edge (60 ms: 25 ms of the CPU before it): each side gets its own
    runs, _ = _finished_runs(marks=[(60 * MS, 35 * MS)])
    before = sum(min(b, 60 * MS) - a for c, a, b in runs if c == "user_code" and a < 60 * MS)
    assert before == pytest.approx(25 * MS, abs=MS), runs
    # the sampler's stop with the thread still running: its CPU clock read now, up to the stop
    runs, _ = _finished_runs(alive=True)
    assert sum(b - a for c, a, b in runs if c == "user_code") == pytest.approx(30 * MS, abs=MS), runs
    # no reading (thread_life not installed, or the thread not a threading.Thread): nothing invented
    from inferscope.collect import thread_life
    s = SM.Sampler([], 200, {}, set())
    st = SM._ThreadState(tid=78, clk="fake-clk", cpu=0, t=0)
    thread_life.ended.pop(78, None)
    s._finish(st)
    assert st.cls is None and st.end == 0


def test_threads_no_tick_saw_are_adopted_at_the_stop():
    """A Python thread begun after the sampler and never seen by a tick (the sampler starved of the GIL) gets
    its CPU from its start (thread_life) up to the stop, at its stack's class then."""
    import threading
    import time

    from inferscope.collect import thread_life
    thread_life.install()
    buf = []
    s = SM.Sampler(buf, 200, {}, set())
    s.started_ns = time.perf_counter_ns()
    ev, ready = threading.Event(), threading.Event()

    def spin_then_wait():
        t0 = time.thread_time_ns()
        while time.thread_time_ns() - t0 < 20 * MS:
            pass
        ready.set()
        ev.wait()

    th = threading.Thread(target=spin_then_wait)
    try:
        th.start()
        ready.wait(10)
        s._stop_at = time.perf_counter_ns()
        s._adopt_unseen()
        st = s.threads[th.ident]
        s._finish(st, None, alive=True)
        s._emit(st)
    finally:
        ev.set()
        th.join()
        thread_life.uninstall()
    runs = [(e[5], e[3], e[4]) for e in buf if e[2] == th.native_id]
    on = sum(b - a for c, a, b in runs if c != "waiting")
    assert 20 * MS <= on <= 20 * MS + 15 * MS, runs       # its spin (and its start-up): not lost
    assert {c for c, _, _ in runs} <= {"user_code", "waiting"}, runs


def test_thread_that_began_and_ended_between_ticks_is_laid_out_at_the_stop():
    """Begun after the sampler and ended before any tick saw it (the sampler starved of the GIL): its CPU between
    its start and end readings (thread_life), at the class of the function it ran; a pool's stdlib worker loop
    (what it ran is unknown) is left out."""
    import threading
    import time

    from inferscope.collect import thread_life
    thread_life.install()
    buf = []
    s = SM.Sampler(buf, 200, {}, set())
    s.started_ns = time.perf_counter_ns()

    def preprocess_rows():
        t0 = time.thread_time_ns()
        while time.thread_time_ns() - t0 < 15 * MS:
            pass

    from concurrent.futures import ThreadPoolExecutor
    try:
        th = threading.Thread(target=preprocess_rows)
        th.start()
        th.join()
        with ThreadPoolExecutor(1) as pool:
            pool.submit(preprocess_rows).result()
        ended = s._ended_unseen()
        for st in ended:
            s._finish(st)
            s._emit(st)
    finally:
        thread_life.uninstall()
    assert [st.tid for st in ended] == [th.native_id]
    runs = [(e[5], e[3], e[4], e[6]) for e in buf if e[2] == th.native_id]
    on = sum(b - a for c, a, b, _ in runs if c == "preprocessing")
    assert 15 * MS <= on <= 15 * MS + 15 * MS, runs
    assert {c for c, *_ in runs} <= {"preprocessing", "waiting"} and "preprocess_rows" in runs[0][3], runs
