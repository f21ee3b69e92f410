"""A live `inferscope run` trace captured on an H100 (tests/data/live_gpu): the merged GPU
timeline and its analysis, recounted independently from the raw spans.  Runs everywhere."""
from pathlib import Path

import numpy as np
import pytest

from helpers import load_gz_iscope
from inferscope.analyze.options import AnalyzeOptions
from inferscope.analyze.pipeline import analyze
from inferscope.trace.kinds import CopyKind, FlowKind, SpanKind

DATA = Path(__file__).parent / "data" / "live_gpu" / "h100_item_sync.iscope.gz"
STEPS = 1015      # the loop's steps (see the data README)


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    return load_gz_iscope(DATA, tmp_path_factory.mktemp("live"))


def test_merge_meta_and_clock(trace):
    c = trace.meta["collection"]
    assert c["torch_profiler"] == "on" and c["nvml"] == "on"
    assert c["clock_sources"] == ["perf_counter_ns", "torch_profiler"]
    assert 0 < c["clock_sync_error_us"] < 1000          # below the default sync_error_margin_us
    assert trace.meta["devices"][0]["name"].startswith("NVIDIA H100")


def test_every_gpu_activity_has_a_launch_flow_from_an_earlier_host_call(trace):
    s, f = trace.spans, trace.flows
    gpu = np.flatnonzero(np.isin(s.kind, [int(SpanKind.KERNEL), int(SpanKind.MEMCPY), int(SpanKind.MEMSET)]))
    lf = f.kind == int(FlowKind.LAUNCH)
    has = np.zeros(len(s), bool)
    has[f.dst[lf]] = True
    assert has[gpu].all()
    assert np.isin(s.kind[f.src[lf]], [int(SpanKind.RUNTIME), int(SpanKind.DRIVER)]).all()
    assert (s.start_ns[f.dst[lf]] >= s.start_ns[f.src[lf]]).all()   # GPU work starts after its launch call


def test_counters_lie_inside_the_collection(trace):
    t = trace
    names = {t.strings[int(t.tracks.name[i])]: i for i in range(len(t.tracks)) if t.tracks.name[i] >= 0}
    for m in ("gpu.power_w", "gpu.sm_clock_mhz", "gpu.util_pct", "gpu.mem_used_bytes", "gpu.temp_c"):
        v = t.counters.value[t.counters.track == names[m]]
        assert len(v) >= 20, m
    lo, hi = int(t.spans.start_ns.min()), int(t.spans.end_ns.max())
    assert (t.counters.ts_ns >= lo - 10**9).all() and (t.counters.ts_ns <= hi + 10**9).all()


def test_analysis_matches_a_recount(trace):
    res = analyze(trace, AnalyzeOptions())
    w = res["window"]
    assert w["kind"] == "scopes"
    s = trace.spans
    lo, hi = w["start_ns"], w["end_ns"]
    inwin = (s.start_ns >= lo) & (s.end_ns <= hi)
    # recount: one 4-byte D2H per step, issued by aten::_local_scalar_dense (.item())
    d2h = inwin & (s.kind == int(SpanKind.MEMCPY)) & (s.copy_kind == int(CopyKind.D2H)) & (s.bytes == 4)
    assert int(d2h.sum()) == STEPS
    assert res["syncs"]["tiny_d2h"]["count"] == STEPS
    assert res["syncs"]["tiny_d2h"]["issued_by"][0]["op"] == "aten::_local_scalar_dense"
    lsd = trace.strings.get("aten::_local_scalar_dense")
    assert int((inwin & (s.kind == int(SpanKind.CPU_OP)) & (s.name == lsd)).sum()) == STEPS
    # one GEMM kernel per step
    kern = inwin & (s.kind == int(SpanKind.KERNEL))
    assert int(kern.sum()) == res["kernels"]["count"] == STEPS
    # the host loop dominates: launch-bound, with the .item() sync named
    assert res["verdict"]["id"] == "launch_bound"
    assert {"sync_stall", "host_launch_bound"} <= {f["id"] for f in res["findings"]}
    assert abs(sum(b["pct"] for b in res["breakdown"]) - 100.0) < 1e-6


def test_collection_cost_estimate_is_reported_and_warned(trace):
    res = analyze(trace, AnalyzeOptions())
    cc = res["collection_cost"]
    s, w = trace.spans, res["window"]
    host = np.isin(s.kind, [int(SpanKind.CPU_OP), int(SpanKind.RUNTIME), int(SpanKind.DRIVER)])
    n = int((host & (s.end_ns > w["start_ns"]) & (s.start_ns < w["end_ns"])).sum())
    assert cc["profiler_host_events"] == n > 10 * STEPS       # >= 4 ops + 4 API calls per step
    lo, hi = cc["estimated_ms_range"]
    assert lo < cc["estimated_ms"] < hi
    assert cc["pct_of_window"] > 10
    assert any(x.startswith("Collection cost (estimate)") for x in res["warnings"])


def test_no_collection_cost_for_imported_traces():
    from inferscope.trace import TraceBuilder
    b = TraceBuilder()
    b.meta["source_format"] = "kineto"
    assert analyze(b.finalize(), AnalyzeOptions())["collection_cost"] is None
