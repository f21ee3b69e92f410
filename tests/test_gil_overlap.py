"""contention.gil on planted sampler output: the live sampler lays out each thread's on-CPU and off-CPU
parts of a tick interval as one block each, so threads that take turns on the GIL inside one interval
show side by side.  The overlap of the critical thread's waiting with the others' Python is matched per
bin of two tick intervals (thresholds.GIL_OVERLAP_BIN_TICKS); imported traces (no rate) keep the exact
intersection."""
import numpy as np

from inferscope import thresholds as T
from inferscope.analyze.contention import gil_wait
from inferscope.trace import SpanKind, TraceBuilder, TrackKind

MS = 1_000_000


def _trace(rate_hz):
    """10 tick intervals of 20 ms.  main: 5 ms user code then 15 ms waiting; spinners A and B: 8 and 7 ms
    of Python at the start of each interval, then waiting (each block placed at the interval start, as the
    sampler does for a thread whose off-CPU part comes last)."""
    b = TraceBuilder()
    main = b.track(TrackKind.CPU_THREAD, pid=1, tid=1, name="main")
    spin = [b.track(TrackKind.CPU_THREAD, pid=1, tid=t, name=f"spinner{t}") for t in (2, 3)]
    uc, wt = b.strings.intern("user_code"), b.strings.intern("waiting")
    for k in range(10):
        t0 = k * 20 * MS
        for tr, on in ((main, 5), (spin[0], 8), (spin[1], 7)):
            b.add_spans(start_ns=[t0, t0 + on * MS], end_ns=[t0 + on * MS, t0 + 20 * MS], track=tr,
                        kind=SpanKind.CPU_SAMPLE, name=[uc, wt])
    if rate_hz:
        b.meta["collection"] = {"cpu_sampling_hz_steady": rate_hz}
    t = b.finalize()
    crit = np.zeros(len(t.tracks), dtype=bool)
    crit[main] = True
    return t, crit


def test_gil_overlap_per_tick_bins_recovers_interleaved_hand_overs():
    t, crit = _trace(50.0)
    g = gil_wait(t, 0, 200 * MS, crit)
    # truth per interval: main off-CPU 15 ms while the spinners ran 15 ms of Python between them (the GIL
    # passes between the three threads inside the interval): 150 ms in all
    assert g["critical_waiting_ms"] == 150.0
    assert g["waiting_while_python_ms"] == 150.0, g
    assert g["bin_ms"] == T.GIL_OVERLAP_BIN_TICKS * 20.0
    rows = {r["thread"].split()[0]: r for r in g["threads"]}
    # per thread: min(waiting, its Python) per bin = its own Python, 80 and 70 ms
    assert sorted(r["overlap_ms"] for r in g["threads"]) == [70.0, 80.0], rows


def test_gil_overlap_exact_without_a_sampler_rate():
    t, crit = _trace(None)
    g = gil_wait(t, 0, 200 * MS, crit)
    # exact intersection of the blocks: [5, 8) ms of each interval
    assert g["waiting_while_python_ms"] == 30.0 and g["bin_ms"] is None, g


def test_culprit_function_counts_every_thread_not_one_stretched_tick():
    """A starved sampler can stretch one tick's function over a long on-CPU span of one thread (zoo_gil:
    206 ms of a spinner labelled with its start-up helper `cpu_mark`, outweighing its loop there).  The
    culprit is the function with the most overlap over all the other threads: here `spin` (3 threads x
    60 ms) against `setup` (one 90 ms span); per thread, thread 2's own top stays `setup`."""
    b = TraceBuilder()
    main = b.track(TrackKind.CPU_THREAD, pid=1, tid=1, name="main")
    th = [b.track(TrackKind.CPU_THREAD, pid=1, tid=t, name=f"worker{t}") for t in (2, 3, 4)]
    uc, wt = b.strings.intern("user_code"), b.strings.intern("waiting")
    spin, setup = b.strings.intern("app.py:spin:10"), b.strings.intern("app.py:setup:3")
    b.add_spans(start_ns=[0], end_ns=[200 * MS], track=main, kind=SpanKind.CPU_SAMPLE, name=[wt])
    b.add_spans(start_ns=[0, 100 * MS], end_ns=[90 * MS, 160 * MS], track=th[0], kind=SpanKind.CPU_SAMPLE,
                name=[uc, uc], detail=[setup, spin])
    for tr in th[1:]:
        b.add_spans(start_ns=[20 * MS], end_ns=[80 * MS], track=tr, kind=SpanKind.CPU_SAMPLE, name=[uc], detail=[spin])
    t = b.finalize()
    crit = np.zeros(len(t.tracks), dtype=bool)
    crit[main] = True
    g = gil_wait(t, 0, 200 * MS, crit)
    top = g["functions"][0]
    assert (top["function"], top["overlap_ms"], top["threads"]) == ("spin", 180.0, 3), g["functions"]
    assert (g["functions"][1]["function"], g["functions"][1]["overlap_ms"]) == ("setup", 90.0)
    own = {r["thread"].split()[0]: r["function"] for r in g["threads"]}
    assert own["worker2"] == "setup" and own["worker3"] == own["worker4"] == "spin", own


def test_culprit_named_when_the_blocks_do_not_intersect():
    """The blocks of one tick interval side by side with no exact intersection at all: main 12 ms of user
    code then 8 ms waiting, each spinner 4 ms of Python at the interval start (a loaded CI run: the
    headline matched 100+ ms, the culprit row was empty).  The functions are ranked by the per-bin match
    that gives the totals: each bin of two intervals matches 16 ms (waiting 16, Python 16), shared by the
    spans in proportion to their time - 8 ms per spinner per bin, 40 ms each over the 5 bins."""
    b = TraceBuilder()
    main = b.track(TrackKind.CPU_THREAD, pid=1, tid=1, name="main")
    spin = [b.track(TrackKind.CPU_THREAD, pid=1, tid=t, name=f"spinner{t}") for t in (2, 3)]
    uc, wt = b.strings.intern("user_code"), b.strings.intern("waiting")
    loop, poll = b.strings.intern("zoo.py:spin:7"), b.strings.intern("zoo.py:poll:20")
    for k in range(10):
        t0 = k * 20 * MS
        b.add_spans(start_ns=[t0, t0 + 12 * MS], end_ns=[t0 + 12 * MS, t0 + 20 * MS], track=main,
                    kind=SpanKind.CPU_SAMPLE, name=[uc, wt])
        for tr, fn in zip(spin, (loop, poll)):
            b.add_spans(start_ns=[t0, t0 + 4 * MS], end_ns=[t0 + 4 * MS, t0 + 20 * MS], track=tr,
                        kind=SpanKind.CPU_SAMPLE, name=[uc, wt], detail=[fn, -1])
    b.meta["collection"] = {"cpu_sampling_hz_steady": 50.0}
    t = b.finalize()
    crit = np.zeros(len(t.tracks), dtype=bool)
    crit[main] = True
    g = gil_wait(t, 0, 200 * MS, crit)
    assert g["waiting_while_python_ms"] == 80.0, g
    assert sorted((f["function"], round(f["overlap_ms"], 6)) for f in g["functions"]) == [("poll", 40.0), ("spin", 40.0)]
    assert sum(f["overlap_ms"] for f in g["functions"]) == g["waiting_while_python_ms"]
    assert {r["function"] for r in g["threads"]} == {"spin", "poll"}, g["threads"]
    # without a rate (imported trace) the exact intersection is empty and so is the match
    t.meta.pop("collection")
    assert gil_wait(t, 0, 200 * MS, crit)["waiting_while_python_ms"] == 0.0
