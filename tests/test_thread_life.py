"""collect/thread_life.py: every Python thread's first and last (clock, CPU) readings, taken inside the
thread itself, so a sampler that ticks rarely still gets the CPU a thread ran before its first tick and
after its last one."""
import threading
import time

from inferscope.collect import thread_life as TL


def _burn(ns: int) -> None:
    t0 = time.thread_time_ns()
    while time.thread_time_ns() - t0 < ns:
        pass


def test_start_and_end_readings_bracket_the_threads_own_cpu_time():
    TL.install()
    try:
        seen = {}

        def work():
            seen["tid"] = threading.get_native_id()
            seen["c0"] = time.thread_time_ns()
            _burn(30_000_000)
            seen["c1"] = time.thread_time_ns()

        t_before = time.perf_counter_ns()
        th = threading.Thread(target=work)
        th.start()
        th.join()
        t_after = time.perf_counter_ns()
        tid = seen["tid"]
        (ts, cs), (te, ce) = TL.started.pop(tid), TL.ended.pop(tid)
        # taken in the thread: around its own run(), inside the caller's start()..join()
        assert t_before <= ts <= te <= t_after
        assert cs <= seen["c0"] and ce >= seen["c1"]
        assert 30_000_000 <= ce - cs < 30_000_000 + 20_000_000      # its 30 ms of CPU, plus the wrapper's bit
    finally:
        TL.uninstall()
    assert not hasattr(threading.Thread._bootstrap_inner, "__wrapped__")


def test_install_is_idempotent_and_the_tables_are_bounded(monkeypatch):
    monkeypatch.setattr(TL, "MAX_KEPT", 3)
    TL.install()
    TL.install()
    try:
        assert threading.Thread._bootstrap_inner.__wrapped__.__name__ == "_bootstrap_inner"
        assert getattr(threading.Thread._bootstrap_inner.__wrapped__, "__wrapped__", None) is None  # wrapped once
        for _ in range(6):
            th = threading.Thread(target=lambda: None)
            th.start()
            th.join()
        assert len(TL.started) == 3 and len(TL.ended) == 3
    finally:
        TL.uninstall()
