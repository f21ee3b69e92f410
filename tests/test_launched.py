"""analyze/launched.py: the one launched-GPU-time function, on a planted trace with kernels straddling the
window's edges (whole and clipped sums computed by hand below), and every caller's field against it."""
from __future__ import annotations

import numpy as np
import pytest

from helpers import Synth
from inferscope.analyze.copies import copies
from inferscope.analyze.culprits import culprits
from inferscope.analyze.launched import by_owner, in_ranges, launched_gpu
from inferscope.analyze.llm import llm
from inferscope.analyze.nsys_extras import analyze_nsys_extras
from inferscope.analyze.nvtx_attribution import analyze_nvtx
from inferscope.analyze.per_pid import analyze_per_pid
from inferscope.analyze.phases import phases
from inferscope.analyze.window import Window
from inferscope.fleet.cross_rank_comm import collective_steps
from inferscope.trace import CopyKind, FlowKind, SpanKind, TrackKind

EXEC = "execute_1_context_0(sq0sk0sqsq0sqsk0)_generation_1(sq1sk10sqsq1sqsk10)"
W = Window(100_000, 200_000, "planted", "time")     # [100, 200) us


def _trace():
    """Main thread (us): ProfilerStep#1 [80,180] > EXEC [85,150] > aten::mm [90,130] launching k1 at 95 (GPU
    [95,110], before the window's start) and k2 at 105 ([120,140]); a pageable H2D copy launched at 140 ([150,160]);
    ProfilerStep#2 [180,260] > aten::add [185,215] launching the NCCL all-reduce k3 at 190 ([195,230], past the
    window's end); k6 launched at 240 ([250,260], outside).  A second thread launches the all-gather k7 at 110
    ([125,131]); k5 [170,180] has no launch flow."""
    t = Synth()
    t.span(SpanKind.STEP, "ProfilerStep#1", 80, 180)
    t.span(SpanKind.ANNOTATION, EXEC, 85, 150)
    t.span(SpanKind.CPU_OP, "aten::mm", 90, 130)
    t.launch(95, 96, 95, 110, name="k1")
    t.launch(105, 106, 120, 140, name="k2")
    t.copy(140, 141, 150, 160, ck=CopyKind.H2D)
    t.span(SpanKind.STEP, "ProfilerStep#2", 180, 260)
    t.span(SpanKind.CPU_OP, "aten::add", 185, 215)
    t.launch(190, 191, 195, 230, name="ncclDevKernel_AllReduce_Sum_f32")
    t.launch(240, 241, 250, 260, name="k6")
    t.span(SpanKind.KERNEL, "k5", 170, 180, track=t.gpu)
    comm = t.b.track(TrackKind.CPU_THREAD, pid=100, tid=101, name="comm")
    a = t.span(SpanKind.RUNTIME, "cudaLaunchKernel", 110, 111, track=comm, correlation=99)
    g = t.span(SpanKind.KERNEL, "ncclKernel_AllGather", 125, 131, track=t.gpu, correlation=99)
    t.b.add_flows([a], [g], FlowKind.LAUNCH)
    return t.done()


def _by_name(tr, lg):
    return {tr.strings[int(n)]: (w, c) for n, w, c in zip(tr.spans.name[lg.gpu].tolist(), lg.whole_ns.tolist(),
                                                            lg.clipped_ns.tolist())}


def test_whole_and_clipped_by_hand():
    tr = _trace()
    st = launched_gpu(tr, W)                          # GPU work starting in [100, 200)
    assert _by_name(tr, st) == {"k2": (20_000, 20_000), "ncclKernel_AllGather": (6_000, 6_000),
                                "Memcpy H2D": (10_000, 10_000), "k5": (10_000, 10_000),
                                "ncclDevKernel_AllReduce_Sum_f32": (35_000, 5_000)}
    assert (int(st.whole_ns.sum()), int(st.clipped_ns.sum())) == (81_000, 51_000)
    assert int((st.launcher < 0).sum()) == 1 and tr.strings[int(tr.spans.name[st.gpu[st.launcher < 0][0]])] == "k5"
    ov = launched_gpu(tr, W, select="overlaps")       # + k1, which starts before the window
    assert _by_name(tr, ov)["k1"] == (15_000, 10_000)
    assert (int(ov.whole_ns.sum()), int(ov.clipped_ns.sum())) == (96_000, 61_000)
    whole = launched_gpu(tr, None)                    # no window: clipped is whole, k6 too
    assert np.array_equal(whole.whole_ns, whole.clipped_ns) and int(whole.whole_ns.sum()) == 96_000 + 10_000
    for bad in ({"select": "ends"}, {"select": "launcher_in"}):
        with pytest.raises(ValueError):
            launched_gpu(tr, W, **bad)
    # by owner: the launching call's track (main thread 0, GPU stream 1: none, comm thread 2)
    owner = np.where(ov.launcher >= 0, tr.spans.track[np.maximum(ov.launcher, 0)], -1)
    assert by_owner(owner, ov.whole_ns, 3).tolist() == [15_000 + 20_000 + 10_000 + 35_000, 0, 6_000]
    assert by_owner(owner, ov.clipped_ns, 3).tolist() == [10_000 + 20_000 + 10_000 + 5_000, 0, 6_000]
    # ranges: launches starting in [80,180) and [180,260) - on the main thread, then on any thread
    s = tr.spans
    stp = np.flatnonzero(s.kind == SpanKind.STEP)
    rl = in_ranges(tr, st, s.start_ns[stp], s.end_ns[stp], s.track[stp])
    assert rl.sum(st.whole_ns).tolist() == [30_000, 35_000] and rl.sum(st.clipped_ns).tolist() == [30_000, 5_000]
    rl = in_ranges(tr, st, s.start_ns[stp], s.end_ns[stp])
    assert rl.sum(st.whole_ns).tolist() == [36_000, 35_000]


def test_callers_agree_with_the_function():
    tr = _trace()
    s = tr.spans
    st, ov = launched_gpu(tr, W), launched_gpu(tr, W, select="overlaps")
    # phases (whole, starting in the window, same thread): steps, ranges, coverage = launches inside a range / all
    ph = phases(tr, W)
    assert [(r["name"], r["gpu_ms"]) for r in ph["steps"]] == [("ProfilerStep#1", 0.030), ("ProfilerStep#2", 0.035)]
    assert [(r["name"], r["gpu_ms"]) for r in ph["ranges"]] == [(EXEC, 0.030)]
    assert ph["gpu_attribution_coverage_pct"] == pytest.approx(100.0 * (20 + 10 + 35) / int(st.whole_ns.sum() / 1e3))
    # llm steps (the same rule): the EXEC step, and the span of its GPU work (k2 start 120 .. copy end 160)
    sec, _, _ = llm(tr, W)
    row = [r for r in sec["steps"] if r["name"] == EXEC][0]
    assert row["gpu_ms"] == pytest.approx(0.030) and row["gpu_span_ms"] == pytest.approx(0.040)
    # culprits (clipped, overlapping): the innermost op around each launching call
    dev = {r["name"]: r["device_ms"] for r in culprits(tr, W)["ops"]}
    owner = np.full(len(ov.gpu), -1)
    for j, op in enumerate(("aten::mm", "aten::add")):
        o = np.flatnonzero(s.name == tr.strings.get(op))[0]
        owner[(ov.launcher >= 0) & (s.parent[np.maximum(ov.launcher, 0)] == o)] = j
    assert dev == pytest.approx({"aten::mm": 0.030, "aten::add": 0.005})
    assert by_owner(owner, ov.clipped_ns, 2).tolist() == [30_000, 5_000]
    # nvtx (clipped kernels): EXEC owns k1 (10 of 15 us in the window) and k2
    nv = analyze_nvtx(tr, W, None)
    k = ov.gpu[s.kind[ov.gpu] == SpanKind.KERNEL]
    assert nv["attribution"]["kernel_sum_ms"] == pytest.approx(int(ov.clipped_ns[np.isin(ov.gpu, k)].sum()) / 1e6)
    assert nv["attribution"]["attributed_ms"] == pytest.approx(0.030)
    assert analyze_per_pid(tr, W)["pids"][0]["kernel_sum_ms"] == pytest.approx(0.051)
    # copies: clipped ms by launching API
    assert copies(tr, W)["pageable"]["by_api"] == [{"api": "cudaMemcpyAsync", "count": 1, "ms": 0.010}]
    # nsys extras (whole, launched by an API call in the window: not k1, launched at 95): k2, k3, k7; the copy
    ex = analyze_nsys_extras(tr, W)
    api_in = (s.kind == SpanKind.RUNTIME) & (s.start_ns >= 100_000) & (s.start_ns < 200_000)
    lw = launched_gpu(tr, W, select="launcher_in", launcher_mask=api_in)
    assert _by_name(tr, lw).keys() == {"k2", "ncclKernel_AllGather", "Memcpy H2D", "ncclDevKernel_AllReduce_Sum_f32"}
    kern = s.kind[lw.gpu] == SpanKind.KERNEL
    assert ex["launch_latency"]["linked_kernel_sum_ms"] == int(lw.whole_ns[kern].sum()) / 1e6 == 0.061
    assert ex["memory_ops"]["pageable_async_ms"] == int(lw.whole_ns[~kern].sum()) / 1e6 == 0.010
    # collectives per step: any thread; offsets from the step's first GPU start (k2 at 120; k3 at 195)
    cs = collective_steps(tr, W)
    assert cs["names"] == ["ncclKernel_AllGather", "ncclDevKernel_AllReduce_Sum_f32"]
    assert [x["coll"] for x in cs["steps"]] == [[[0, 0, 5.0, 6.0]], [[1, 0, 0.0, 35.0]]]
