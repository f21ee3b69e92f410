"""collect/sigframes.py: the main thread's frame at timer signals, late handlers marked stale."""
import signal
import sys
import time

import pytest

from inferscope.collect import sigframes

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POSIX timers with SIGEV_THREAD_ID: Linux")


def _name(frame):
    return (0, (frame.f_code.co_name, frame.f_lineno))


def py_part(deadline_ns):
    s = 0
    while time.perf_counter_ns() < deadline_ns:      # pure Python: the handler runs within microseconds
        s += 1
    return s


def native_part(n):
    return sum(range(n))     # one C call holding the GIL: no bytecode boundary until it returns


def test_handler_installed_and_given_back():
    assert signal.getsignal(signal.SIGPROF) in (signal.SIG_DFL, None)
    sf = sigframes.SignalFrames(2_000_000, _name)
    assert sf.start(), sf.why_not
    try:
        assert signal.getsignal(signal.SIGPROF) == sf._handler
        py_part(time.perf_counter_ns() + 50_000_000)
    finally:
        sf.stop()
    assert signal.getsignal(signal.SIGPROF) == signal.SIG_DFL
    assert sf.count >= 5           # 50 ms at 2 ms: ~25 signals; a loaded host still delivers some
    # the recent signals' (time, domain), in order, for the perf resolver's interpreter samples
    rec = list(sf.recent)
    assert len(rec) == sf.count - sf.stale and all(d == 0 and not o for _, d, o in rec), rec
    assert [r[0] for r in rec] == sorted(r[0] for r in rec)
    out = []
    sf.drain(out, {0: "user_code"})       # moved to a thread state's list, by class name
    assert out == [(t, "user_code", o) for t, _, o in rec] and not sf.recent


def test_foreign_handler_left_alone():
    def other(signum, frame):
        pass
    signal.signal(signal.SIGPROF, other)
    try:
        sf = sigframes.SignalFrames(2_000_000, _name)
        assert not sf.start()
        assert "already has a handler" in sf.why_not
        assert signal.getsignal(signal.SIGPROF) == other
    finally:
        signal.signal(signal.SIGPROF, signal.SIG_DFL)


def test_late_handlers_after_native_calls_are_stale():
    """A loop alternating pure Python (py_part) and a GIL-holding C call (native_part): a signal
    raised during the C call is handled only after it, in the Python code that follows; such late
    records carry no frame, and the records that do name the Python part."""
    n = 200_000
    t = time.perf_counter_ns()
    native_part(n)
    while (time.perf_counter_ns() - t) < 2_000_000 and n < 50_000_000:   # the C call >= ~2 ms
        n *= 2
        t = time.perf_counter_ns()
        native_part(n)
    seen = []
    sf = sigframes.SignalFrames(1_000_000, lambda f: seen.append(_name(f)[1][0]) or _name(f))
    assert sf.start(), sf.why_not
    try:
        end = time.perf_counter_ns() + 600_000_000
        while time.perf_counter_ns() < end:
            py_part(time.perf_counter_ns() + 2_000_000)
            native_part(n)
    finally:
        sf.stop()
    assert sf.stale >= 10, (sf.stale, sf.count)     # ~half of ~600 signals came during C calls
    assert len(sf.recent) == min(len(seen), sigframes.RECENT_MAX)     # late ones keep no domain
    fresh_py = sum(1 for s in seen if s == "py_part")
    assert len(seen) >= 20 and fresh_py / len(seen) >= 0.8, (fresh_py, len(seen), set(seen))


def test_a_long_collection_lends_its_time_to_the_code_that_triggered_it():
    """A garbage collection holds the GIL with no bytecode boundary: no signal handler runs in it.  A full one
    leaves the domain of the code that triggered it in ``recent`` as it starts (open: the perf resolver's
    interpreter samples after it take that class until the next record) and as it ends."""
    import gc

    def collector():
        junk = []
        for i in range(400_000):            # objects in reference cycles: a full collection walks them all
            a = [i]
            a.append(a)
            junk.append(a)
        del junk
        t0 = time.perf_counter_ns()
        gc.collect()
        return t0, time.perf_counter_ns()

    sf = sigframes.SignalFrames(1_000_000, lambda f: (7 if f.f_code.co_name == "collector" else 0, None))
    assert sf.start(), sf.why_not
    try:
        t0, t1 = collector()
    finally:
        sf.stop()
    assert gc.callbacks.count(sf._gc) == 0                     # given back
    assert t1 - t0 >= 500_000, "the planted collection should take milliseconds (400k objects in cycles)"
    rec = list(sf.recent)
    assert [r[0] for r in rec] == sorted(r[0] for r in rec)
    # the explicit collection (the allocation loop's own automatic ones are the collector's too): opened
    # within it, closed at its end (a finalizer run by the collection is Python code: signal records of its
    # frames can come between)
    opened = [r for r in rec if r[2] and t0 <= r[0] <= t1]
    assert sf.gc_long >= 1 and len(opened) == 1 and opened[0][1] == 7, (sf.gc_long, rec[-5:])
    closed = [r for r in rec[rec.index(opened[0]) + 1:] if r[1] == 7 and not r[2] and r[0] <= t1]
    assert len(closed) == 1, rec[rec.index(opened[0]):]


def test_records_stay_in_time_order_when_a_collections_start_is_recorded_late():
    """A young collection long enough to record is recorded at its end, with its start time: a finalizer's signal
    record made inside it is later than that start, so the start goes in before it (the resolver reads the
    records in order; a suite run once found them out of order)."""
    sf = sigframes.SignalFrames(1_000_000, lambda f: (0, None))
    q = sf.recent
    q.extend([(10, 0, False), (20, 1, False), (30, 1, False)])
    sf._insert((25, 2, True))
    sf._insert((40, 2, False))
    sf._insert((5, 3, True))
    assert [r[0] for r in q] == [5, 10, 20, 25, 30, 40]
    q.clear()
    q.extend((i, 0, False) for i in range(q.maxlen))          # full: the oldest drops
    sf._insert((3.5, 1, True))
    assert len(q) == q.maxlen and [r[0] for r in q][:4] == [1, 2, 3, 3.5]
    sf._insert((-1, 1, True))                                  # older than all of a full deque: dropped
    assert q[0][0] == 1
