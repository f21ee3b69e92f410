"""Seed 001's clock-sync rule (issue 46 item 5): a live run's GPU clock alignment is warned about when its
error exceeds 5 % of the collection's duration and the fixed sync_error_margin_us (the floor).  The error
is planted: CUPTI calibration reads (perf0, cupti, perf1) whose offset drifts by a known amount between
start and stop, fed to a real CuptiCollector merged by a real Session; the truth is recomputed here from
the planted drift and bracket width (gpu_activity.clock: drift / 2 + half the bracket)."""
import pytest

from inferscope.collect.gpu_merge import clock_sync_limit_us, clock_sync_warning
from inferscope.collect.torchprof import clock_offset as torch_clock_offset
from inferscope.thresholds import CLOCK_SYNC_ERROR_MAX_FRACTION

from test_gpu_records import _collector_of, _load

HALF_NS = 100          # planted half bracket width of every calibration read
OFF0_NS = 5_000_000    # planted cupti - perf_counter offset at start


def _reads(off_ns: int, base: int) -> list:
    out = []
    for i in range(9):
        p0 = base + 10_000 * i
        p1 = p0 + 2 * HALF_NS
        out.append((p0, (p0 + p1) // 2 + off_ns, p1))
    return out


def _session_trace(drift_ns: int, dur_ms: float, margin_us: float = 1000.0):
    """A session with a CUPTI collector whose planted clock drifts by drift_ns over a dur_ms collection."""
    import time
    from inferscope.collect import session as S
    from inferscope.config import Config
    s = S.Session(Config(cpu_sampling_frequency_hz=0, system_sampling_hz=0, torch_profiler="off",
                         sync_error_margin_us=margin_us), mode="library")
    col = _collector_of(_load("torch"))
    del col.clock        # the real CuptiCollector.clock() on the planted reads
    col.clock_start = _reads(OFF0_NS, 0)
    col.clock_stop = _reads(OFF0_NS + drift_ns, 10**9)
    col.callback_cpu_ns = 0
    s.gpu_act = col
    end = time.perf_counter_ns()
    s.start_ns, s.wall_start_ns = end - int(dur_ms * 1e6), time.time_ns()
    s.cpu_start_ns = time.process_time_ns() - 1_000_000_000
    return s.build_trace(final=True, end_ns=end)


def _clock_warnings(t):
    return [w for w in t.meta.get("warnings", []) if "clock sync error" in w]


def test_planted_drift_recovered_and_error_within_5_pct_not_warned():
    # 100 ms collection: 5 % = 5000 us. Error 3000 us: above the 1000 us margin (the old fixed rule warned),
    # within the seed's 5 %.
    drift = 2 * 2_999_900       # error = drift/2 + half bracket = 2999.9 + 0.1 us
    t = _session_trace(drift, 100.0)
    c = t.meta["collection"]
    assert c["clock_sync_error_us"] == pytest.approx(drift / 2e3 + HALF_NS / 1e3)
    assert c["clock_sync_limit_us"] == pytest.approx(CLOCK_SYNC_ERROR_MAX_FRACTION * 100.0 * 1e3)
    assert _clock_warnings(t) == []


def test_error_above_5_pct_of_the_collection_is_warned_with_both_figures():
    drift = 2 * 7_999_900       # error 8000 us = 8 % of 100 ms
    t = _session_trace(drift, 100.0)
    ws = _clock_warnings(t)
    assert len(ws) == 1, t.meta.get("warnings")
    w = ws[0]
    assert w.startswith("CUPTI clock sync error 8000 us is 8.0 % of the 100.0 ms collection")
    assert "limit of 5000 us" in w and "INFERSCOPE_SYNC_ERROR_MARGIN_US=1000 us" in w


def test_the_fixed_margin_is_the_floor_for_short_collections():
    # 4 ms collection: 5 % = 200 us; the 1000 us margin is the limit
    t = _session_trace(2 * 899_900, 4.0)          # 900 us: 22 % of the run, under the floor
    assert t.meta["collection"]["clock_sync_limit_us"] == 1000.0 and _clock_warnings(t) == []
    t = _session_trace(2 * 1_499_900, 4.0)        # 1500 us: over both
    ws = _clock_warnings(t)
    assert len(ws) == 1 and "1500 us is 37.5 %" in ws[0] and "limit of 1000 us" in ws[0]


def test_a_larger_configured_margin_raises_the_floor():
    t = _session_trace(2 * 7_999_900, 100.0, margin_us=10_000)
    assert t.meta["collection"]["clock_sync_limit_us"] == 10_000 and _clock_warnings(t) == []


def test_torch_profiler_markers_error_goes_through_the_same_rule():
    # planted marker brackets: offset 1_000_000 ns, one marker 4 ms off the median -> error 4000 + 0.05 us
    markers = [("inferscope::sync#0", 0, 100)] + [(f"inferscope::sync#{k}", 10**6 * k, 10**6 * k + 100)
                                                   for k in range(1, 6)]
    starts = {n: (t0 + t1) // 2 + 1_000_000 for n, t0, t1 in markers}
    starts["inferscope::sync#5"] += 4_000_000
    off, err_us, n = torch_clock_offset(starts, markers)
    assert off == 1_000_000 and n == 5 and err_us == pytest.approx(4000.05)
    assert clock_sync_warning("torch profiler", err_us, 100.0, 1000) is None      # 4 % of 100 ms
    w = clock_sync_warning("torch profiler", err_us, 50.0, 1000)                   # 8 % of 50 ms
    assert w is not None and w.startswith("torch profiler clock sync error 4000 us is 8.0 % of the 50.0 ms")
    assert clock_sync_limit_us(50.0, 1000) == 2500.0
    assert clock_sync_warning("CUPTI", None, 50.0, 1000) is None
