"""Native code by role (issue 16 item 2): perf IP samples are classed by the shared object they fall
in (collect/perfip.role_of), and the sampler splits a tick interval by those roles."""
from pathlib import Path

import pytest

from inferscope.collect import perfip as P
from inferscope.collect import sampler as SM

from resolve_helpers import FakePerf, durations, resolve_thread

SP = "/root/.pyenv/versions/3.11.7/lib/python3.11/site-packages"   # as /proc/self/maps shows it here


@pytest.mark.parametrize("path,role", [
    (f"{SP}/numpy.libs/libscipy_openblas64_-32a4b2a6.so", P.COMPUTE),          # numpy's bundled BLAS
    (f"{SP}/numpy.libs/libgfortran-040039e1-0352e75f.so.5.0.0", P.COMPUTE),    # its LAPACK runtime
    (f"{SP}/numpy/_core/_multiarray_umath.cpython-311-x86_64-linux-gnu.so", P.COMPUTE),
    (f"{SP}/numpy/linalg/_umath_linalg.cpython-311-x86_64-linux-gnu.so", P.COMPUTE),
    (f"{SP}/torch/lib/libtorch_cpu.so", P.COMPUTE),
    (f"{SP}/torch/lib/libc10.so", P.COMPUTE),
    (f"{SP}/torch/lib/libgomp-a34b3233.so.1", P.COMPUTE),
    ("/opt/intel/oneapi/mkl/lib/libmkl_core.so.2", P.COMPUTE),
    ("", P.COMPUTE),                                                            # anonymous: JIT code
    (f"{SP}/tokenizers/tokenizers.abi3.so", P.TOKENIZER),                      # HF tokenizers (Rust)
    (f"{SP}/sentencepiece/_sentencepiece.cpython-311-x86_64-linux-gnu.so", P.TOKENIZER),
    (f"{SP}/tiktoken/_tiktoken.cpython-311-x86_64-linux-gnu.so", P.TOKENIZER),
    ("/root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0", P.PYTHON),
    ("/root/.pyenv/versions/3.11.7/bin/python3.11", P.PYTHON),
    ("/usr/lib/x86_64-linux-gnu/libc.so.6", P.OTHER),
    ("/usr/lib/x86_64-linux-gnu/libm.so.6", P.OTHER),
    ("/root/.pyenv/versions/3.11.7/lib/python3.11/lib-dynload/_json.cpython-311-x86_64-linux-gnu.so", P.OTHER),
    (f"{SP}/torch/_C.cpython-311-x86_64-linux-gnu.so", P.OTHER),               # the binding stub
    (f"{SP}/PIL/_imaging.cpython-311-x86_64-linux-gnu.so", P.OTHER),           # image prep: the caller's class
])
def test_role_of_real_library_paths(path, role):
    assert P.role_of(path) == role, (path, P.ROLE_NAMES[P.role_of(path)])


def test_this_process_maps_numpy_blas_as_compute():
    """The live table: numpy's BLAS and core loops, as this interpreter maps them, are COMPUTE."""
    np = pytest.importorskip("numpy")
    np.ones((4, 4)) @ np.ones((4, 4))
    roles = {}
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) > 5 and "x" in parts[1]:
                roles[parts[5].strip()] = P.role_of(parts[5].strip())
    core = [p for p in roles if "_multiarray_umath" in p]
    assert core and all(roles[p] == P.COMPUTE for p in core)
    assert any(roles[p] == P.PYTHON for p in roles)


def _durations(samples, pend, cls0="user_code"):
    buf, _, st = resolve_thread(samples, pend, cls0)
    return durations(buf), st


def test_split_by_role_tokenizer_compute_and_other():
    """One 10 ms user-code interval: 6 tokenizer, 2 compute, 2 interpreter and 4 libc samples -> the libc
    samples follow the mix of the classified ones: 60 % tokenization, 20 % cpu_compute, 20 % user code."""
    ms = 1_000_000
    kinds = [P.TOKENIZER] * 6 + [P.COMPUTE] * 2 + [P.PYTHON] * 2 + [P.OTHER] * 4
    samples = [(int((i + 0.5) * 10 * ms / len(kinds)), k) for i, k in enumerate(kinds)]
    dur, st = _durations(samples, [(10 * ms, None, "app.py:encode", "user_code", False, 0)])
    assert dur == {"cpu_compute": 2 * ms, "tokenization": 6 * ms, "user_code": 2 * ms}
    assert (st.native, st.native_tok) == (0.2, 0.6)


def test_interval_with_only_libc_samples_keeps_the_last_fractions():
    ms = 1_000_000
    samples = [(2 * ms, P.TOKENIZER), (7 * ms, P.TOKENIZER), (15 * ms, P.OTHER)]
    dur, _ = _durations(samples, [(10 * ms, None, "app.py:encode", "user_code", False, 0),
                                  (20 * ms, None, "app.py:encode", "user_code", False, 0)], cls0="tokenization")
    assert dur == {"tokenization": 20 * ms}          # not user code: no classified sample in (10, 20] ms


def test_libc_only_interval_after_no_classified_sample_is_the_stacks_class():
    """hashlib (libcrypto: role OTHER) right after a phase decided without perf: user code, not the
    GIL heuristic's cpu_compute and not an old fraction (the bug a collect test caught: 596 ms of
    sha256 read as cpu_compute)."""
    ms = 1_000_000
    samples = [(2 * ms, P.OTHER), (7 * ms, P.OTHER), (12 * ms, P.OTHER)]
    dur, st = _durations(samples, [(10 * ms, None, "app.py:digest", "user_code", True, 0),
                                   (20 * ms, None, "app.py:digest", "user_code", True, 0)])
    assert dur == {"user_code": 20 * ms} and st.native is None


def test_native_threads_emit_cpu_time_by_role_laid_end_to_end(monkeypatch):
    """Two native threads with 15 and 24 ms of CPU in a 25 ms period: tokenizer / compute spans by
    their IP roles, laid end to end from the period's start (wrapping), a libc-only thread ignored.
    Next period: run-queue time (schedstat field 2) of a thread whose role is known is class run_queue,
    laid after every thread's CPU blocks."""
    from inferscope.collect import native_threads as N

    class Sched:
        def __init__(self, vals):
            self.vals = list(vals)

        def read(self):
            run, rq = self.vals.pop(0)
            return f"{run} {rq} 0\n".encode()

        def close(self):
            pass

    ms = 1_000_000
    out = []
    nt = N.NativeThreads(out.append, 4 * ms)
    monkeypatch.setattr(nt, "_native_tids", lambda: [11, 12, 13])
    nt.threads = {
        11: N._Native(11, Sched([(15 * ms, 0), (20 * ms, 8 * ms)]),
                      FakePerf([(1, P.TOKENIZER), (2, P.TOKENIZER), (3, P.OTHER)]), 0, 0, 0, "native thread a"),
        12: N._Native(12, Sched([(24 * ms, 0), (24 * ms, 0)]), FakePerf([(1, P.COMPUTE), (2, P.TOKENIZER)]), 0, 0, 0,
                      "native thread b"),
        13: N._Native(13, Sched([(9 * ms, 0), (9 * ms, 30 * ms)]), FakePerf([(1, P.OTHER)]), 0, 0, 0, "native thread poller"),
    }
    for n in nt.threads.values():
        n.perf.close = lambda: None
    nt.tick(25 * ms, maps=None)
    got = [(e[2], e[3], e[4], e[5]) for e in out]
    assert got == [(11, 0, 15 * ms, "tokenization"),       # a: all tokenizer (its libc sample follows)
                   (12, 15 * ms, 25 * ms, "cpu_compute"),  # b: 12 ms compute from a's end, wrapping ...
                   (12, 0, 2 * ms, "cpu_compute"),
                   (12, 2 * ms, 14 * ms, "tokenization")], got  # ... then 12 ms tokenizer
    assert nt.seen == {11, 12} and nt.names[12] == "native thread b"      # the libc-only poller: nothing
    out.clear()
    for n in nt.threads.values():
        n.perf = FakePerf([(1, P.TOKENIZER)] if n.tid == 11 else [])
        n.perf.close = lambda: None
    nt.tick(50 * ms, maps=None)
    got = [(e[2], e[3], e[4], e[5]) for e in out]
    # a: 5 ms tokenizer from the period's start, then its 8 ms run queue after it; the poller (no role) and
    # b (no CPU, no run queue) add nothing
    assert got == [(11, 25 * ms, 30 * ms, "tokenization"), (11, 30 * ms, 38 * ms, "run_queue")], got
    nt.close()


def test_native_thread_born_during_collection_keeps_its_first_periods(monkeypatch):
    """An OpenMP/Rayon pool made by the program's first call: the thread appears at a tick with CPU it ran
    since it was born, and its perf sampler has no sample yet.  That time is held back until samples tell
    the role and then laid from its birth (it was dropped: the first 0-25 ms of the zoo's oversubscribed
    OpenMP window read off-CPU, 0-8 points); a thread older than collection starts from its reading.
    A later period with CPU but no sample (below the perf period) keeps the role it had."""
    from inferscope.collect import native_threads as N
    ms = 1_000_000
    sched = {21: [(0, 0), (12 * ms, 3 * ms), (20 * ms, 5 * ms), (22 * ms, 5 * ms)],
             22: [(500 * ms, 0), (500 * ms, 0), (510 * ms, 0), (510 * ms, 0)]}
    perf = {21: [[], [(1, P.COMPUTE), (2, P.OTHER)], [], []], 22: [[], [(1, P.COMPUTE)], [], []]}
    start = {21: 30 * ms, 22: -400 * ms}

    class Sched:
        def __init__(self, path, size):
            self.tid = int(path.split("/")[4]) if path.count("/") > 3 else 0

        def read(self):
            run, rq = sched[self.tid].pop(0)
            return f"{run} {rq} 0\n".encode()

        def close(self):
            pass

    class Perf(FakePerf):
        def read(self, maps):
            return perf[self.tid].pop(0)

        def close(self):
            pass

    def open_perf(tid, period):
        p = Perf([])
        p.tid = tid
        return p

    monkeypatch.setattr(N, "ProcFile", Sched)
    monkeypatch.setattr(N.PerfIP, "open", staticmethod(open_perf))
    monkeypatch.setattr(N, "read_small", lambda path, size: b"worker")
    monkeypatch.setattr(N, "start_perf_ns", lambda path: start[int(path.split("/")[4])])
    out = []
    nt = N.NativeThreads(out.append, 4 * ms, since_ns=0)
    tids = []
    monkeypatch.setattr(nt, "_native_tids", lambda: list(tids))
    nt.tick(25 * ms, maps=None)                 # no native thread yet
    tids[:] = [21, 22]
    nt.tick(50 * ms, maps=None)    # 21 born at 30 ms: 12 ms CPU, no sample -> held back; 22 (older): from now
    assert out == []
    nt.tick(75 * ms, maps=None)    # 21: 20 ms CPU (all compute) + 5 ms run queue since 30 ms; 22: 10 ms
    assert [(e[2], e[3], e[4], e[5]) for e in out] == [(21, 30 * ms, 50 * ms, "cpu_compute"),
                                                       (22, 70 * ms, 75 * ms, "cpu_compute"),   # wraps
                                                       (22, 50 * ms, 55 * ms, "cpu_compute"),
                                                       (21, 60 * ms, 65 * ms, "run_queue")], out
    out.clear()
    nt.tick(100 * ms, maps=None)   # 21: 2 ms CPU, no sample: the role it had
    assert [(e[2], e[3], e[4], e[5]) for e in out] == [(21, 75 * ms, 77 * ms, "cpu_compute")], out
    nt.close()


def test_maps_see_a_library_loaded_after_they_were_read(tmp_path, monkeypatch):
    """An IP in a library dlopen()ed after the maps were read resolves at once (the maps are re-read
    on the miss), not 0.5 s later: a numpy MLP whose OpenBLAS loaded while perf was being set up read
    95 % user code in 2 runs of 4.  An IP that still misses right after a re-read costs no more re-reads."""
    import ctypes
    import shutil
    import sysconfig
    src = next(Path(sysconfig.get_config_var("DESTSHARED")).glob("_bz2*.so"), None)
    if src is None:
        pytest.skip("no _bz2 extension module to copy")
    monkeypatch.setattr(P, "MAPS_RELOAD_MIN_S", 0.0)
    maps = P.Maps()
    lib_path = tmp_path / "libzoo_late_loaded.so"
    shutil.copy(src, lib_path)
    lib = ctypes.CDLL(str(lib_path))
    ip = ctypes.cast(lib.PyInit__bz2, ctypes.c_void_p).value
    assert maps.kind(ip) == 0                       # not in the maps as they were read
    assert maps.kind_or_reload(ip) == P.role_of(str(lib_path)) != 0
    n = maps.n_loaded
    reloads = []
    monkeypatch.setattr(maps, "reload", lambda: reloads.append(1))
    assert maps.kind_or_reload(8) == 0 and maps.kind_or_reload(8) == 0   # page 0 is never mapped
    assert len(reloads) == 1 and maps.n_loaded == n


def test_off_cpu_part_of_an_interval_is_waiting():
    """Issue 16 item 3: an interval's off-CPU time (measured by the thread's CPU clock) is 'waiting', the
    rest is classified.  A 2 ms model step after 8 ms blocked on native tokenizer threads (off first: the
    thread runs at the tick) and a 10 ms interval of which 3 ms ran the stack's code before it blocked
    (off last) - not 10 ms cpu_compute and 10 ms user code."""
    ms = 1_000_000
    samples = [(int(9.5 * ms), P.COMPUTE), (int(10.5 * ms), P.PYTHON), (int(11.5 * ms), P.PYTHON)]
    dur, _ = _durations(samples, [(10 * ms, None, "app.py:model", "user_code", False, 8 * ms),
                                  (20 * ms, None, "app.py:encode", "user_code", False, -7 * ms)], cls0="waiting")
    assert dur == {"waiting": 15 * ms, "cpu_compute": 2 * ms, "user_code": 3 * ms}
    # a decided class (no perf) splits the same way, and a KEEP keeps the class before the wait
    dur, _ = _durations([], [(10 * ms, "tokenization", "t.py:enc", None, False, 4 * ms),
                             (20 * ms, SM.KEEP, None, None, False, 5 * ms)], cls0="user_code")
    assert dur == {"waiting": 9 * ms, "tokenization": 11 * ms}


def test_run_queue_part_of_an_interval():
    """Runnable-but-not-running time (schedstat run-queue delay, the 7th field of a pending tick) is its
    own class, placed after the off-CPU part and before the on-CPU part, with exact boundaries (not the
    midpoint rule: that gave half of each on-CPU part to the run queue)."""
    ms = 1_000_000
    samples = [(int(9.5 * ms), P.PYTHON)]
    # 10 ms interval: 2 ms off-CPU, 5 ms run queue, 3 ms on-CPU (user code by perf)
    dur, _ = _durations(samples, [(10 * ms, None, "app.py:handle", "user_code", False, 2 * ms, 5 * ms)], cls0="user_code")
    assert dur == {"waiting": 2 * ms, "run_queue": 5 * ms, "user_code": 3 * ms}
    # a decided class; then an interval off-CPU last (ran 3 ms after 4 ms in the run queue, then blocked 3 ms)
    buf = []
    s = SM.Sampler(buf, 200, {}, set())
    st = SM._ThreadState(tid=1, clk=None, cpu=0, t=0)
    st.cls, st.start, st.end = "tokenization", 0, 0
    st.pending = [(10 * ms, "tokenization", "t.py:enc", None, False, 0, 6 * ms),
                  (20 * ms, "tokenization", "t.py:enc", None, False, -3 * ms, 4 * ms)]
    s._resolve(st)
    s._emit(st)
    runs = [(ev[5], ev[3], ev[4]) for ev in buf]
    assert runs == [("run_queue", 0, 6 * ms), ("tokenization", 6 * ms, 10 * ms), ("run_queue", 10 * ms, 14 * ms),
                    ("tokenization", 14 * ms, 17 * ms), ("waiting", 17 * ms, 20 * ms)]


def test_sampling_period_is_dithered_at_each_read():
    """A fixed perf period aliases against a periodic program (a 2.7 ms loop sampled every 4 ms of CPU read
    1-64 % compute for 15 % true): each read draws a new period within PERIOD_DITHER of the mean - the kernel
    takes it (PERF_EVENT_IOC_PERIOD), and the samples' mean spacing stays the mean period."""
    import threading
    import time
    p = P.PerfIP.open(threading.get_native_id(), 1_000_000)
    if p is None:
        pytest.skip("perf_event unavailable (perf_event_paranoid > 2, seccomp)")
    maps = P.Maps()
    periods = []
    try:
        orig = P.fcntl.ioctl

        def spy(fd, req, arg=0):
            if req == 0x40082404:
                periods.append(int.from_bytes(arg, "little"))
            return orig(fd, req, arg)
        P.fcntl.ioctl = spy
        n = 0
        for _ in range(8):
            t0 = time.thread_time()
            s = 0
            while time.thread_time() - t0 < 0.02:
                for i in range(2000):       # user-space work (the thread CPU clock itself is a system call)
                    s += i
            n += len(p.read(maps))
    finally:
        P.fcntl.ioctl = orig
        p.close()
    assert len(periods) == 8 and len(set(periods)) > 1, periods
    assert all(abs(x - 1_000_000) <= P.PERIOD_DITHER * 1_000_000 + 1 for x in periods), periods
    assert n > 0
