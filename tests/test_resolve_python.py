"""The perf resolver's interpreter samples (collect/resolve.py): a tick interval's Python samples take the
Python class of the tick nearer to them, and a tokenizer's Python ticks are split by perf like the others."""
from inferscope.collect import perfip as P

from resolve_helpers import durations, resolve_thread

MS = 1_000_000
LBL = ("app.py:step", 3)


def _resolve(samples, pend, py_last=None):
    buf, _, _ = resolve_thread(samples, pend, "tokenization", py_last=py_last)
    return durations(buf)


def _tick(t, fallback):
    # (t, cls: perf decides, label, fallback: the tick frame's class, gil_free, off, rq, faults, kernel ns, blocked)
    return (t, None, LBL, fallback, True, 0, 0, 0, 0, False)


def test_python_samples_of_the_first_half_take_the_previous_ticks_class():
    """10 ms: the tick before it was in a tokenizer's Python (transformers), this one at a forward's first torch op
    (framework).  Interpreter samples at 1-4 ms (the tokenizer's Python), compute samples at 6-9 ms: 4 ms of
    tokenization first, then 4 ms of compute, then 2 ms of framework (the interpreter sample of the second half) -
    not 6 ms of framework."""
    samples = [(k * MS, P.PYTHON) for k in (1, 2, 3, 4)] + [(k * MS, P.COMPUTE) for k in (6, 7, 8, 9)] + \
        [(int(9.5 * MS), P.PYTHON), (int(9.7 * MS), P.PYTHON)]
    dur = _resolve(samples, [_tick(10 * MS, "framework")], py_last="tokenization")
    assert dur == {"tokenization": 4 * MS, "cpu_compute": 4 * MS, "framework": 2 * MS}, dur
    # the same class at both ticks: nothing moves (the stack's class for all interpreter samples)
    dur = _resolve(samples, [_tick(10 * MS, "framework")], py_last="framework")
    assert dur == {"cpu_compute": 4 * MS, "framework": 6 * MS}, dur
    # after a wait (no Python class before): as before
    dur = _resolve(samples, [_tick(10 * MS, "framework")], py_last=None)
    assert dur == {"cpu_compute": 4 * MS, "framework": 6 * MS}, dur


def test_previous_class_of_a_non_tokenizer_gets_its_own_part_first():
    """User code before, framework now: the first half's interpreter samples are user code, laid first."""
    samples = [(1 * MS, P.PYTHON), (2 * MS, P.PYTHON), (7 * MS, P.COMPUTE), (8 * MS, P.PYTHON)]
    buf, _, st = resolve_thread(samples, [_tick(8 * MS, "framework"), _tick(16 * MS, "framework")], "user_code",
                                py_last="user_code")
    runs = [(ev[5], ev[3], ev[4]) for ev in buf]
    # first interval: 2 of 4 samples early interpreter -> 4 ms user code, then 2 ms compute, 2 ms framework;
    # the second (no sample: the last fractions hold, the previous tick framework) - no user code in it
    assert runs[0] == ("user_code", 0, 4 * MS), runs
    user = sum(b - a for c, a, b in runs if c == "user_code")
    assert user == 4 * MS, runs
    # the resolver remembers this thread's last Python class for the next drain
    assert st.py_last == "framework"


def test_all_interpreter_samples_early_are_the_previous_class():
    samples = [(1 * MS, P.PYTHON), (2 * MS, P.PYTHON)]
    dur = _resolve(samples, [_tick(10 * MS, "framework")], py_last="user_code")
    assert dur == {"user_code": 10 * MS}, dur


def test_perf_period_override_never_raises_in_the_program():
    """INFERSCOPE_PERF_PERIOD_US is read in the profiled program at import: a value that is no number keeps the
    default (1 ms), others are held to 100 us - 1 s."""
    import os
    import subprocess
    import sys
    code = "from inferscope.collect import thread_state as t; print(t.PERF_PERIOD_NS)"
    got = {}
    for v in ("abc", "nan", "-5", "inf", "250", ""):
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                           env={**os.environ, "INFERSCOPE_PERF_PERIOD_US": v})
        assert r.returncode == 0, (v, r.stderr[-500:])
        got[v] = int(r.stdout)
    assert got == {"abc": 1_000_000, "nan": 1_000_000, "-5": 100_000, "inf": 1_000_000_000, "250": 250_000,
                   "": 1_000_000}, got


def test_an_interval_its_samples_decide_starts_where_it_starts():
    """A split interval (0-10 ms: 4 compute, 4 Rust tokenizer, 2 interpreter samples - its last part the stack's
    class, user code) and then one whose 10 samples are all Rust (a tokenizer's encode_batch): tokenization from
    10 ms on.  The midpoint rule of a class seen at a tick gave the user-code part 5 ms of the second interval
    (zoo_tokenizers serial: +5-7 points of user code)."""
    samples = [(k * MS, P.COMPUTE) for k in (1, 2, 3, 4)] + [(k * MS, P.TOKENIZER) for k in (5, 6, 7, 8)] + \
        [(k * MS, P.PYTHON) for k in (9, 10)] + [(k * MS, P.TOKENIZER) for k in range(11, 21)]
    buf, _, _ = resolve_thread(samples, [_tick(10 * MS, "user_code"), _tick(20 * MS, "user_code")], "user_code")
    runs = [(ev[5], ev[3], ev[4]) for ev in buf]
    assert runs == [("cpu_compute", 0, 4 * MS), ("tokenization", 4 * MS, 8 * MS), ("user_code", 8 * MS, 10 * MS),
                    ("tokenization", 10 * MS, 20 * MS)], runs


def test_interpreter_samples_take_the_class_of_the_nearest_timer_signal():
    """A 10 ms interval whose tick before was in the program's own loop (user code) and this one in a tokenizer's
    Python: the main thread's timer signals (sigframes.py) saw the tokenizer's Python at 0.5 and 5.5 ms, so all
    nine interpreter samples are tokenization - the tick-midpoint rule gave the first four to user code (a 106 ms
    interval of zoo_hf_tokenizer read 51 ms of user code that way)."""
    samples = [(k * MS, P.PYTHON) for k in range(1, 10)]
    sig = [(MS // 2, "tokenization", False), (int(5.5 * MS), "tokenization", False)]
    dur = _resolve(samples, [_tick(10 * MS, "tokenization")], py_last="user_code")
    assert dur == {"user_code": 10 * MS * 4 // 9, "tokenization": 10 * MS - 10 * MS * 4 // 9}, dur   # (without)
    buf, _, st = resolve_thread(samples, [_tick(10 * MS, "tokenization")], "tokenization", py_last="user_code",
                                sigobs=sig)
    assert durations(buf) == {"tokenization": 10 * MS}
    assert st.sigobs == sig     # kept: within a signal period of the interval's end (and the last one before)


def test_a_signal_names_a_third_python_class_between_two_ticks():
    """Both ticks in the framework's Python, a signal at 2 ms in the program's own code: the interpreter samples
    nearer to it than to the next signal (7 ms: framework) are user code - 4 of 9 samples - and a signal farther
    than one signal period (5 ms) from a sample decides nothing for it."""
    samples = [(k * MS, P.PYTHON) for k in range(1, 10)]
    sig = [(2 * MS, "user_code", False), (7 * MS, "framework", False)]
    buf, _, _ = resolve_thread(samples, [_tick(10 * MS, "framework")], "framework", py_last="framework", sigobs=sig)
    assert durations(buf) == {"user_code": 10 * MS * 4 // 9, "framework": 10 * MS - 10 * MS * 4 // 9}
    # only a signal at -20 ms: too far from every sample - the ticks' rule (both framework)
    buf, _, _ = resolve_thread(samples, [_tick(10 * MS, "framework")], "framework", py_last="framework",
                               sigobs=[(-20 * MS, "user_code", False)])
    assert durations(buf) == {"framework": 10 * MS}


def test_an_open_collection_record_names_the_samples_after_it():
    """A full garbage collection began at 1 ms in a tokenizer's Python (sigframes._gc: an open record) and no
    signal record came after it: all interpreter samples after 1 ms are tokenization, however far from it - both
    ticks (the one before the collection, the one a finalizer let in) read user code."""
    samples = [(k * MS, P.PYTHON) for k in range(2, 31, 2)]
    sig = [(int(0.5 * MS), "user_code", False), (1 * MS, "tokenization", True)]
    buf, _, st = resolve_thread(samples, [_tick(30 * MS, "user_code")], "user_code", py_last="user_code", sigobs=sig)
    assert durations(buf) == {"tokenization": 30 * MS}
    # and a closed record at its end (20 ms): the samples after it are the nearest record's - the tick's class
    # beyond a signal period (5 ms) from it
    sig = sig + [(20 * MS, "tokenization", False)]
    buf, _, _ = resolve_thread(samples, [_tick(30 * MS, "user_code")], "user_code", py_last="user_code", sigobs=sig)
    dur = durations(buf)
    # samples at 2..24 ms: tokenization (12 of 15); 26, 28, 30 ms: the ticks' class
    assert dur == {"tokenization": 30 * MS * 12 // 15, "user_code": 30 * MS - 30 * MS * 12 // 15}, dur

