"""One test per finding rule (analyze/diagnosis.py RULES), each on a hand-built trace whose numbers
are known: the rule fires with the expected severity and evidence, and a near miss does not."""
import pytest

from inferscope import thresholds as T
from inferscope.analyze import diagnosis as D
from inferscope.analyze.options import AnalyzeOptions
from inferscope.analyze.pipeline import analyze
from inferscope.trace import CopyKind, MemKind, SpanKind, TrackKind

from helpers import Synth, add_counter


def run(t: Synth, window: str | None = None) -> dict:
    return analyze(t.done(), AnalyzeOptions(window=window))


def finding(res: dict, fid: str):
    return next((f for f in res["findings"] if f["id"] == fid), None)


def idle_gpu():
    t = Synth()
    t.launch(0, 2, 2, 10)                                    # kernel 2-10 us
    t.span(SpanKind.CPU_OP, "aten::cat", 10, 100)            # host busy, GPU idle 90 %
    return t


def case_gpu_idle():
    res = run(idle_gpu())
    f = finding(res, "gpu_idle")
    assert f["severity"] == "high" and f["evidence"]["gpu_idle_pct"] == pytest.approx(92.0)
    assert f["evidence"]["largest_host_category_while_idle"] == "framework_overhead"
    t = Synth()
    t.launch(0, 1, 1, 100)                                    # busy 99 %
    assert finding(run(t), "gpu_idle") is None


def case_sync_stall():
    t = Synth()
    t.launch(0, 1, 1, 10)
    t.span(SpanKind.RUNTIME, "cudaStreamSynchronize", 10, 60)   # 50 of 60 us blocked, GPU idle
    f = finding(run(t), "sync_stall")
    assert f["severity"] == "high" and f["evidence"]["sync_wait_ms"] == pytest.approx(0.05)
    assert f["evidence"]["top_sync_api"] == "cudaStreamSynchronize"
    t = Synth()
    t.launch(0, 1, 1, 100)
    t.span(SpanKind.RUNTIME, "cudaStreamSynchronize", 2, 99)    # blocked while the GPU computes: benign
    assert finding(run(t), "sync_stall")["severity"] == "low"


def case_pageable_copy():
    t = Synth()
    t.copy(0, 50, 40, 50, ck=CopyKind.H2D, host=MemKind.PAGEABLE)  # the call blocks the host 50 us
    t.span(SpanKind.CPU_OP, "aten::add", 50, 100)
    res = run(t)
    f = finding(res, "pageable_copy")
    assert f["evidence"]["pageable_copy_calls_sum_ms"] == pytest.approx(0.05)
    assert f["evidence"]["pageable_copy_gpu_ms"] == pytest.approx(0.01)
    assert f["severity"] == "high"                              # 50 % of the window, like the sync it is
    assert finding(res, "sync_stall")["evidence"]["pageable_copy_calls_sum_ms"] == pytest.approx(0.05)
    t = Synth()
    t.copy(0, 5, 1, 5, ck=CopyKind.H2D, host=MemKind.PINNED)
    assert finding(run(t), "pageable_copy") is None


def case_small_copies():
    t = Synth()
    for i in range(T.SMALL_COPY_STORM_COUNT):
        t.copy(10 * i, 10 * i + 1, 10 * i + 2, 10 * i + 3, host=MemKind.PINNED, nbytes=1024)
    f = finding(run(t), "small_copies")
    assert f["evidence"]["small_copies"] == T.SMALL_COPY_STORM_COUNT and f["evidence"]["threshold_bytes"] == T.SMALL_COPY_BYTES
    t = Synth()
    for i in range(10):
        t.copy(10 * i, 10 * i + 1, 10 * i + 2, 10 * i + 3, host=MemKind.PINNED, nbytes=1 << 20)
    assert finding(run(t), "small_copies") is None


def case_launch_storm():
    t = Synth()
    for i in range(200):                                        # 100k launches/s, 2 us kernels
        t.launch(10 * i, 10 * i + 1, 10 * i + 2, 10 * i + 4)
    f = finding(run(t), "launch_storm")
    assert f["severity"] == "high" and f["evidence"]["kernel_p50_us"] == pytest.approx(2.0)
    t = Synth()
    for i in range(50):                                         # too few kernels for a rate
        t.launch(10 * i, 10 * i + 1, 10 * i + 2, 10 * i + 4)
    assert finding(run(t), "launch_storm") is None


def case_dominant_kernel():
    t = Synth()
    t.launch(0, 1, 1, 81, name="big_gemm")
    t.launch(1, 2, 81, 100, name="small_add")
    f = finding(run(t), "dominant_kernel")
    assert f["evidence"]["top_kernel"] == "big_gemm" and f["evidence"]["top_kernel_pct"] == pytest.approx(80.8, abs=0.1)
    t = Synth()
    t.launch(0, 1, 1, 34, name="a")
    t.launch(1, 2, 34, 67, name="b")
    t.launch(2, 3, 67, 100, name="c")
    assert finding(run(t), "dominant_kernel") is None


def case_warmup_in_window():
    t = Synth()
    t.span(SpanKind.RUNTIME, "cudaFree", 0, 60_000)              # 60 ms context creation
    t.launch(60_000, 60_010, 60_010, 100_000)
    res = run(t, "all")           # the whole trace: the default window leaves start-up out
    f = finding(res, "warmup_in_window")
    assert f["severity"] == "high" and f["evidence"]["longest_call"] == "cudaFree"
    assert res["verdict"]["id"] == "init_bound"
    res = run(t)                  # default: the steady state, start-up named but outside it
    assert res["window"]["kind"] == "steady" and finding(res, "warmup_in_window") is None
    assert res["run_phases"]["startup"]["top"][0]["name"] == "cudaFree"
    assert res["verdict"]["id"] != "init_bound"
    t = Synth()
    t.span(SpanKind.RUNTIME, "cudaFree", 0, 5_000)               # 5 ms < ONE_OFF_CALL_MIN_MS
    t.launch(5_000, 5_010, 5_010, 100_000)
    assert finding(run(t), "warmup_in_window") is None
    # issue 45 item 5: the window starts 1 s before the served steps, that second sampled CPU work (a model load in
    # Python: no long call) - start-up before the first step, 1,000 ms of the 1,200 ms window
    def served(lead_us, busy_us):
        t = Synth()
        t.span(SpanKind.CPU_SAMPLE, "user_code", 0, busy_us, detail=t.b.strings.intern("app.py:load"))
        if busy_us < lead_us:
            t.span(SpanKind.CPU_SAMPLE, "waiting", busy_us, lead_us)
        for k in range(20):                                       # 20 steps of 10 ms, back to back
            a = lead_us + k * 10_000
            t.span(SpanKind.STEP, f"ProfilerStep#{k}", a, a + 10_000)
            t.span(SpanKind.CPU_SAMPLE, "user_code", a, a + 10_000, detail=t.b.strings.intern("app.py:serve"))
        return run(t, "all")
    f = finding(served(1_000_000, 1_000_000), "warmup_in_window")
    assert f is not None and f["evidence"]["union_ms"] == pytest.approx(1000.0)
    assert f["evidence"]["union_pct"] == pytest.approx(100.0 * 1000 / 1200, abs=0.01)
    assert f["evidence"]["longest_call"].startswith("work before the first step")
    # near misses: a lead-in of 4 periods (40 ms < STARTUP_LEAD_IN_FACTOR x 10 ms), and one the program slept through
    assert finding(served(40_000, 40_000), "warmup_in_window") is None
    assert finding(served(1_000_000, 50_000), "warmup_in_window") is None


def case_gpu_compute_bound():
    t = Synth()
    t.launch(0, 1, 1, 90, name="sm80_xmma_gemm")
    t.span(SpanKind.CPU_OP, "aten::copy_", 90, 100)
    res = run(t)
    f = finding(res, "gpu_compute_bound")
    assert f["evidence"]["gpu_compute_pct"] == pytest.approx(89.0) and f["evidence"]["kernel_class_gemm_pct"] == 100.0
    assert res["verdict"]["id"] == "gpu_bound"
    assert finding(run(idle_gpu()), "gpu_compute_bound") is None


def case_gpu_communication():
    t = Synth()
    t.launch(0, 1, 1, 20, name="sm80_gemm")
    t.launch(1, 2, 20, 80, name="ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*)")
    t.span(SpanKind.CPU_OP, "aten::add", 80, 100)
    res = run(t)
    f = finding(res, "gpu_communication")
    assert f["severity"] == "high" and f["evidence"]["exposed_comm_ms"] == pytest.approx(0.06)
    assert f["evidence"]["compute_comm_overlap_pct"] == 0.0
    assert res["verdict"]["id"] == "communication_bound"
    t = Synth()                                                  # the same collective hidden under compute
    t.launch(0, 1, 1, 100, name="sm80_gemm")
    t.span(SpanKind.KERNEL, "ncclDevKernel_AllReduce", 20, 80, track=t.b.track(TrackKind.GPU_STREAM, pid=100, tid=8, device=0))
    res = run(t)
    assert finding(res, "gpu_communication") is None and res["gpu"]["compute_comm_overlap_pct"] == pytest.approx(100.0)


def case_cpu_preprocessing():
    t = Synth()
    t.span(SpanKind.ANNOTATION, "tokenize_batch", 0, 50)
    t.launch(50, 51, 51, 100)
    f = finding(run(t), "cpu_preprocessing")
    assert f["severity"] == "high" and f["evidence"]["tokenization_ms"] == pytest.approx(0.05)
    t = Synth()
    t.span(SpanKind.ANNOTATION, "decode", 0, 50)                  # an LLM phase, not tokenization
    t.launch(50, 51, 51, 100)
    assert finding(run(t), "cpu_preprocessing") is None


def case_host_launch_bound():
    t = Synth()
    for i in range(20):                                          # 10 us launch calls for 2 us kernels
        t.launch(20 * i, 20 * i + 10, 20 * i + 12, 20 * i + 14)
    res = run(t)
    f = finding(res, "host_launch_bound")
    assert f["evidence"]["launch_api_typical_vs_kernel_ratio"] == pytest.approx(5.0)
    assert finding(res, "framework_overhead") is None
    assert finding(run(idle_gpu()), "host_launch_bound") is None   # one kernel


def case_framework_overhead():
    res = run(idle_gpu())
    f = finding(res, "framework_overhead")
    assert f["evidence"]["framework_overhead_pct"] == pytest.approx(92.0) and f["evidence"]["framework_ops_ms"] == pytest.approx(0.09)
    t = Synth()
    t.launch(0, 1, 1, 100)
    assert finding(run(t), "framework_overhead") is None


def case_cpu_compute():
    t = Synth()
    t.span(SpanKind.CPU_OP, "aten::mm", 0, 80)
    t.span(SpanKind.CPU_SAMPLE, "waiting", 80, 100)
    f = finding(run(t), "cpu_compute")
    assert f["evidence"]["cpu_compute_pct"] == pytest.approx(80.0)
    t = Synth()
    t.span(SpanKind.CPU_OP, "aten::mm", 0, 10)
    t.span(SpanKind.CPU_SAMPLE, "waiting", 10, 100)
    assert finding(run(t), "cpu_compute") is None


def case_host_waiting():
    t = Synth()
    t.span(SpanKind.OS_RUNTIME, "read", 0, 30)
    t.span(SpanKind.CPU_OP, "aten::mm", 30, 100)
    f = finding(run(t), "host_waiting")
    assert f["severity"] == "medium" and f["evidence"]["waiting_ms"] == pytest.approx(0.03)
    t = Synth()
    t.span(SpanKind.OS_RUNTIME, "read", 0, 5)
    t.span(SpanKind.CPU_OP, "aten::mm", 5, 100)
    assert finding(run(t), "host_waiting") is None


def case_low_coverage():
    t = Synth()
    t.launch(0, 1, 1, 10)
    t.span(SpanKind.MARK, "m", 50, 50)
    t.span(SpanKind.CPU_OP, "aten::add", 95, 100)                # 10-95 nothing recorded
    f = finding(run(t), "low_coverage")
    assert f["evidence"]["other_pct"] == pytest.approx(85.0)
    t = Synth()
    t.launch(0, 1, 1, 100)
    assert finding(run(t), "low_coverage") is None


def gpu_window(t=None):
    """GPU busy 0-1000 us (one kernel), host launching: a 1 ms window with NVML samples every 100 us."""
    t = t or Synth()
    t.launch(0, 1, 1, 1000)
    t.b.meta["devices"] = [{"id": 0, "name": "Fake", "total_memory_bytes": 80 * 2**30}]
    return t


def case_gpu_throttling():
    t = gpu_window()
    ts = list(range(0, 1000, 100))                       # 10 samples, each holds 100 us
    add_counter(t, "gpu.clock_event_reasons", ts, [0, 0, 0, 0, 0, 0, 0, 4, 4, 4 | 0x20], device=0)
    add_counter(t, "gpu.sm_clock_mhz", ts, [1980] * 7 + [1500] * 3, device=0)
    res = run(t)
    f = finding(res, "gpu_throttling")
    assert f["severity"] == "high" and f["evidence"]["affected_pct_of_window"] == pytest.approx(30.0, abs=0.2)
    assert f["evidence"]["top_reason"] == "sw_power_cap" and f["evidence"]["top_reason_pct_of_window"] == pytest.approx(30.0, abs=0.2)
    assert f["evidence"]["sm_clock_mhz_throttled"] == 1500 and f["evidence"]["sm_clock_mhz_other"] == 1980
    th = res["counters"]["throttle"][0]
    assert {r["reason"]: r["samples"] for r in th["reasons"]} == {"sw_power_cap": 3, "sw_thermal_slowdown": 1}
    t = gpu_window()                                     # idle (0x1) and app-clocks (0x2) bits are no slowdown
    add_counter(t, "gpu.clock_event_reasons", ts, [1, 2] * 5, device=0)
    assert finding(run(t), "gpu_throttling") is None


def case_gpu_temperature():
    t = gpu_window()
    add_counter(t, "gpu.temp_c", range(0, 1000, 100), [60] * 9 + [97], device=0)
    f = finding(run(t), "gpu_temperature")
    assert f["severity"] == "high" and f["evidence"]["temp_c_max"] == 97 and f["evidence"]["temp_c_mean"] == pytest.approx(63.7)
    t = gpu_window()
    add_counter(t, "gpu.temp_c", range(0, 1000, 100), [60] * 9 + [86], device=0)
    assert finding(run(t), "gpu_temperature")["severity"] == "medium"
    t = gpu_window()
    add_counter(t, "gpu.temp_c", range(0, 1000, 100), [84] * 10, device=0)
    assert finding(run(t), "gpu_temperature") is None


def case_gpu_memory_pressure():
    t = gpu_window()
    add_counter(t, "gpu.mem_used_bytes", range(0, 1000, 100), [40 * 2**30] * 9 + [77 * 2**30], device=0)
    res = run(t)                                        # 96.25 %: at capacity, one finding (oom) with the numbers
    assert finding(res, "gpu_memory_pressure") is None
    f = finding(res, "oom")
    assert f["severity"] == "high" and f["evidence"]["gpu_mem_peak_pct"] == pytest.approx(96.25)
    assert f["evidence"]["gpu_mem_headroom_bytes"] == 3 * 2**30 and f["evidence"]["gpu_mem_total_bytes"] == 80 * 2**30
    t = gpu_window()
    add_counter(t, "gpu.mem_used_bytes", range(0, 1000, 100), [40 * 2**30] * 9 + [75 * 2**30], device=0)   # 93.75 %
    res = run(t)
    f = finding(res, "gpu_memory_pressure")
    assert f["severity"] == "medium" and f["evidence"]["peak_pct"] == pytest.approx(93.75) and finding(res, "oom") is None
    assert f["evidence"]["headroom_bytes"] == 5 * 2**30
    t = gpu_window()
    add_counter(t, "gpu.mem_used_bytes", range(0, 1000, 100), [65 * 2**30] * 10, device=0)   # 81 %
    assert finding(run(t), "gpu_memory_pressure")["severity"] == "medium"
    t = gpu_window()
    add_counter(t, "gpu.mem_used_bytes", range(0, 1000, 100), [60 * 2**30] * 10, device=0)   # 75 %
    assert finding(run(t), "gpu_memory_pressure") is None


def case_gpu_util_counter():
    t = gpu_window()                                    # the trace says busy 100 %, NVML says 5 %
    add_counter(t, "gpu.util_pct", range(0, 1000, 100), [5] * 10, device=0)
    f = finding(run(t), "gpu_util_counter")
    assert f["severity"] == "medium" and f["evidence"]["nvml_util_mean_pct"] == 5 and f["evidence"]["trace_busy_pct"] == 99.9
    t = gpu_window()
    add_counter(t, "gpu.util_pct", range(0, 1000, 100), [50] * 10, device=0)
    f = finding(run(t), "gpu_util_counter")
    assert f["severity"] == "low" and f["evidence"]["disagreement_pts"] == 49.9
    t = gpu_window()
    add_counter(t, "gpu.util_pct", range(0, 1000, 100), [95] * 10, device=0)
    assert finding(run(t), "gpu_util_counter")["severity"] == "info"
    t = gpu_window()
    add_counter(t, "gpu.util_pct", range(0, 1000, 100), [80] * 10, device=0)     # agrees within 25 points
    assert finding(run(t), "gpu_util_counter") is None
    t = gpu_window()
    add_counter(t, "gpu.util_pct", range(0, 400, 100), [1] * 4, device=0)        # too few samples to judge
    assert finding(run(t), "gpu_util_counter") is None


def case_numa_placement():
    t = gpu_window()
    t.b.meta["numa"] = {"numa_nodes": 2, "process_numa_nodes": [0], "gpu_numa_nodes": [{"pci_bus_id": "0000:3b:00.0", "numa_node": 1}],
                        "gpu_local": False, "remote_numa_possible": True}
    f = finding(run(t), "numa_placement")
    assert f["severity"] == "medium" and f["evidence"]["gpu_numa_node"] == 1 and "--cpunodebind=1" in f["suggestion"]
    t = gpu_window()
    t.b.meta["numa"] = {"numa_nodes": 1, "process_numa_nodes": [0], "gpu_numa_nodes": [{"pci_bus_id": "x", "numa_node": -1}],
                        "gpu_local": True, "remote_numa_possible": False}
    assert finding(run(t), "numa_placement") is None


def case_cpu_oversubscription():
    t = gpu_window()
    t.b.meta["numa"] = {"numa_nodes": 1, "process_numa_nodes": [0], "process_cpus": "0-3", "torch_threads": 16}
    f = finding(run(t), "cpu_oversubscription")
    assert f["evidence"] == {"torch_threads": 16, "process_cpus": 4} and "set_num_threads(4)" in f["suggestion"]
    t = gpu_window()
    t.b.meta["numa"] = {"numa_nodes": 1, "process_numa_nodes": [0], "process_cpus": "0-3", "torch_threads": 4}
    assert finding(run(t), "cpu_oversubscription") is None
    # 2 torch threads + 2 busy DataLoader workers on 2 CPUs (issue 24): oversubscribed, the workers cited
    res = run(_cpu_threads(torch_threads=2, cpus="0-1", workers=(0.6, 0.5)), "all")
    f = finding(res, "cpu_oversubscription")
    ev = f["evidence"]
    assert ev["torch_threads"] == 2 and ev["process_cpus"] == 2 and ev["busy_workers"] == 2 and ev["busy_threads"] == 4
    assert ev["worker0_cpu_s_in_window"] == pytest.approx(0.6) and f["evidence_source"]["worker0_cpu_s_in_window"] == \
        "children.processes[0].cpu_s_in_window"
    assert "torch.set_num_threads(1)" in f["suggestion"] and "num_workers=1" in f["suggestion"]
    assert "cpu_oversubscription" in finding(res, "cpu_compute")["suggestion"]     # not just "use bf16 or a GPU"
    # the main process mostly waits for its busy workers (they are the bottleneck): keep them, cut torch threads
    res = run(_cpu_threads(torch_threads=2, cpus="0-1", workers=(0.6, 0.5), compute_us=200_000), "all")
    f = finding(res, "cpu_oversubscription")
    assert "torch.set_num_threads(1)" in f["suggestion"] and "num_workers" not in f["suggestion"]
    assert "keep the 2 worker(s)" in f["suggestion"] and f["evidence"]["main_waiting_pct"] == 80.0
    # idle workers (a full queue) are not competing: 1 torch thread + workers at 5 % of the window fit 2 CPUs
    assert finding(run(_cpu_threads(torch_threads=1, cpus="0-1", workers=(0.05, 0.05)), "all"), "cpu_oversubscription") is None
    # 1 torch thread + 1 busy worker on 2 CPUs: fits
    assert finding(run(_cpu_threads(torch_threads=1, cpus="0-1", workers=(0.6,)), "all"), "cpu_oversubscription") is None


def _cpu_threads(torch_threads, cpus, workers=(), util=50.0, compute_us=900_000):
    """A 1 s CPU-only window: torch ops for ``compute_us``, then waiting; busy child processes using ``workers``
    CPU-s each in it (/proc counters); both cores ``util`` % busy (all processes)."""
    t = Synth()
    t.span(SpanKind.CPU_OP, "aten::mm", 0, compute_us)
    t.span(SpanKind.CPU_SAMPLE, "waiting", compute_us, 1_000_000)
    t.b.meta["numa"] = {"numa_nodes": 1, "process_numa_nodes": [0], "process_cpus": cpus, "torch_threads": torch_threads}
    for pid, cpu_s in zip((501, 502), workers):
        ct = t.b.track(TrackKind.COUNTER, name=f"child.cpu_s[{pid}] python")
        t.b.add_counters(ct, [0, 500_000_000, 1_000_000_000], [0.0, cpu_s / 2, cpu_s])
    for core in (0, 1):
        add_counter(t, f"cpu.core{core}.util_pct", [0, 500_000, 1_000_000], [util] * 3)
    return t


def case_cpu_underuse():
    # torch.set_num_threads(1) on 2 CPUs half idle, CPU compute 90 % of the window (issue 24)
    f = finding(run(_cpu_threads(torch_threads=1, cpus="0-1", util=50.0), "all"), "cpu_underuse")
    ev = f["evidence"]
    assert ev["torch_threads"] == 1 and ev["process_cpus"] == 2 and ev["cpu_compute_pct"] == pytest.approx(90.0)
    assert ev["process_cores_util_pct"] == pytest.approx(50.0) and ev["idle_cores"] == pytest.approx(1.0)
    assert ev["busy_workers"] == 0 and "torch.set_num_threads(2)" in f["suggestion"]
    assert "cpu_underuse" in finding(run(_cpu_threads(torch_threads=1, cpus="0-1"), "all"), "cpu_compute")["suggestion"]
    # the cores are busy (other processes): no spare core, no finding
    assert finding(run(_cpu_threads(torch_threads=1, cpus="0-1", util=90.0), "all"), "cpu_underuse") is None
    # as many threads as CPUs, a busy worker filling the other core, or compute not dominant: none
    assert finding(run(_cpu_threads(torch_threads=2, cpus="0-1"), "all"), "cpu_underuse") is None
    assert finding(run(_cpu_threads(torch_threads=1, cpus="0-1", workers=(0.6,)), "all"), "cpu_underuse") is None
    assert finding(run(_cpu_threads(torch_threads=1, cpus="0-1", compute_us=300_000), "all"), "cpu_underuse") is None


def _gil_trace(other_pid=100, other_cls="user_code"):
    """Main thread: Python 0-400 us, then off-CPU 400-1000 us; another thread runs ``other_cls`` 300-1000 us."""
    t = Synth()
    t.span(SpanKind.CPU_SAMPLE, "user_code", 0, 400, detail=t.b.strings.intern("app.py:handle"))
    t.span(SpanKind.CPU_SAMPLE, "waiting", 400, 1000, detail=t.b.strings.intern("app.py:handle"))
    other = t.b.track(TrackKind.CPU_THREAD, pid=other_pid, tid=101, name="poller")
    t.span(SpanKind.CPU_SAMPLE, other_cls, 300, 1000, track=other, detail=t.b.strings.intern("app.py:spin_poll"))
    return t


def case_gil_contention():
    res = run(_gil_trace())
    f = finding(res, "gil_contention")
    assert f["severity"] == "medium" and f["evidence"]["gil_wait_ms"] == pytest.approx(0.6)
    assert f["evidence"]["gil_wait_pct"] == pytest.approx(60.0) and f["evidence"]["pct_of_waiting"] == pytest.approx(100.0)
    assert f["evidence"]["culprit"] == "spin_poll" and f["evidence"]["culprit_thread"] == "poller"
    assert res["verdict"]["id"] == "gil_bound"                   # not waiting_bound: the waiting is the GIL
    assert "gil_contention" in finding(res, "host_waiting")["suggestion"]
    for kw in ({"other_pid": 200}, {"other_cls": "cpu_compute"}):   # another process / native code: no GIL shared
        r = run(_gil_trace(**kw))
        assert finding(r, "gil_contention") is None and r["verdict"]["id"] == "waiting_bound", kw


def case_page_fault_storm():
    def trace(faults_per_interval, sys_pct):
        t = Synth()
        t.span(SpanKind.CPU_SAMPLE, "user_code", 0, 500, detail=t.b.strings.intern("app.py:parse"))
        t.span(SpanKind.CPU_SAMPLE, "cpu_compute", 500, 1000, detail=t.b.strings.intern("app.py:touch"))
        ts = [0, 250, 500, 750, 1000]
        add_counter(t, "proc.page_faults", ts, [0, 0, 0, faults_per_interval, 2 * faults_per_interval])
        add_counter(t, "proc.sys_cpu_pct", ts, [sys_pct] * 5)
        return run(t)
    res = trace(1000, 30.0)               # none in the first half, 1000 per 250 us (4M/s) in the second
    f = finding(res, "page_fault_storm")
    assert f["severity"] == "medium" and f["evidence"]["sys_cpu_pct"] == pytest.approx(30.0)
    assert f["evidence"]["culprit"] == "touch" and f["evidence"]["culprit_ms"] == pytest.approx(0.5)
    assert f["evidence"]["storm_faults"] == 2000 and f["evidence"]["storm_ms"] == pytest.approx(0.5)
    assert finding(trace(1000, T.PAGE_FAULT_KERNEL_PCT / 2), "page_fault_storm") is None   # faults, little kernel time
    assert finding(trace(0, 30.0), "page_fault_storm") is None                             # kernel time, no faults
    # live runs: kernel time per sampler tick (proc.sys_cpu_s) ranks the functions.  Faults come at a
    # storm rate under forward and touch alike (THP: a page-touching call takes no more faults than a
    # forward); touch's intervals hold the kernel time, so touch is named though forward ran longer
    t = Synth()
    t.span(SpanKind.CPU_SAMPLE, "cpu_compute", 0, 600, detail=t.b.strings.intern("app.py:forward"))
    t.span(SpanKind.CPU_SAMPLE, "cpu_compute", 600, 1000, detail=t.b.strings.intern("app.py:touch"))
    ts = [0, 200, 400, 600, 800, 1000]
    add_counter(t, "proc.page_faults", ts, [0, 0, 100, 200, 300, 400])     # none in 0-200 us, then 500k/s
    # 1 ms of kernel time in 0-200 us (no faults there: not charged), 0.05 ms in 400-600, 0.15 ms in each
    # of touch's two intervals
    add_counter(t, "proc.sys_cpu_s", ts, [0, 1e-3, 1e-3, 1.05e-3, 1.2e-3, 1.35e-3])
    add_counter(t, "proc.sys_cpu_pct", ts, [30.0] * 6)
    res = run(t)
    pf = res["contention"]["page_faults"]
    assert pf["ranked_by"] == "kernel_ms" and pf["kernel_ms"] == pytest.approx(0.35)
    assert [(r["function"], round(r["kernel_ms"], 6), round(r["ms"], 6)) for r in pf["functions"]] == \
        [("touch", 0.3, 0.4), ("forward", 0.05, 0.4)]
    f = finding(res, "page_fault_storm")
    assert f["evidence"]["culprit"] == "touch" and f["evidence"]["culprit_kernel_ms"] == pytest.approx(0.3)
    assert "Culprit: touch (app.py) was running during 0.3 ms of the" in " ".join(f["evidence_text"])


def case_python_gc():
    def trace(pauses_ms):
        t = Synth()
        t.span(SpanKind.CPU_SAMPLE, "user_code", 0, 1_000_000)          # a 1 s window
        for a, d, gen in pauses_ms:
            t.span(SpanKind.GC_PAUSE, f"gc gen{gen}", a * 1000, (a + d) * 1000)
        return t
    res = run(trace([(100, 60, 2), (500, 30, 2), (700, 2, 0)]))        # 92 ms of 1 s, longest 60 ms
    f = finding(res, "python_gc")
    assert f["severity"] == "medium" and f["evidence"]["pauses"] == 3 and f["evidence"]["gc_ms"] == pytest.approx(92.0)
    assert f["evidence"]["longest_ms"] == pytest.approx(60.0) and f["evidence"]["longest_generation"] == 2
    assert f["evidence"]["culprit_thread"] == "main" and "gc.freeze()" in f["suggestion"]
    # near miss: 1.5 % of the window in 3 short young collections
    assert finding(run(trace([(100, 5, 0), (300, 5, 1), (600, 5, 0)])), "python_gc") is None


def case_cpu_run_queue():
    def trace(runq_pct):
        t = Synth()
        t.span(SpanKind.CPU_SAMPLE, "user_code", 0, 1000, detail=t.b.strings.intern("app.py:handle"))
        other = t.b.track(TrackKind.CPU_THREAD, pid=100, tid=101, name="omp")
        t.span(SpanKind.CPU_SAMPLE, "cpu_compute", 0, 800, track=other, detail=t.b.strings.intern("app.py:gemm"))
        add_counter(t, "proc.main_runq_pct", [0, 500, 1000], [runq_pct] * 3)
        add_counter(t, "proc.invol_ctx_switches", [0, 500, 1000], [0, 100, 200])
        return run(t)
    f = finding(trace(30.0), "cpu_run_queue")
    assert f["severity"] == "medium" and f["evidence"]["main_runq_pct"] == pytest.approx(30.0)
    assert f["evidence"]["culprit"] == "omp" and f["evidence"]["culprit_recorded_ms"] == pytest.approx(0.8)
    assert f["evidence"]["invol_ctx_switches_per_s"] == pytest.approx(200_000.0)
    assert finding(trace(T.RUNQ_WAIT_LOW_PCT - 1), "cpu_run_queue") is None
    # the sampler's run-queue part of the critical thread's waiting: its own breakdown part; when it is
    # most of the waiting the verdict is cpu_contention_bound and host_waiting counts only the off-CPU rest
    def sampled(rq_us, off_us):
        t = Synth()
        t.span(SpanKind.CPU_SAMPLE, "user_code", 0, 200, detail=t.b.strings.intern("app.py:handle"))
        t.span(SpanKind.CPU_SAMPLE, "run_queue", 200, 200 + rq_us)
        t.span(SpanKind.CPU_SAMPLE, "waiting", 200 + rq_us, 200 + rq_us + off_us)
        return run(t)
    res = sampled(750, 50)
    w = next(b for b in res["breakdown"] if b["category"] == "waiting")
    assert w["ms"] == pytest.approx(0.8) and {p["name"]: p["ms"] for p in w["parts"]} == \
        pytest.approx({"off_cpu": 0.05, "run_queue": 0.75})
    assert res["verdict"]["id"] == "cpu_contention_bound" and finding(res, "host_waiting") is None   # off-CPU 5 %
    res = sampled(100, 700)                                   # mostly off-CPU: waiting_bound, host_waiting
    assert res["verdict"]["id"] == "waiting_bound"
    assert finding(res, "host_waiting")["evidence"]["run_queue_pct"] == pytest.approx(10.0)
    w = next(b for b in sampled(0, 800)["breakdown"] if b["category"] == "waiting")
    assert w["parts"] == []                                   # no run queue: no parts, as before
    # issue 45 item 4: the finding's text says where the breakdown puts run-queue time (waiting/run_queue, the
    # figure cited from that part), never "under what the thread was doing"
    t = Synth()
    t.span(SpanKind.CPU_SAMPLE, "user_code", 0, 400, detail=t.b.strings.intern("app.py:handle"))
    t.span(SpanKind.CPU_SAMPLE, "run_queue", 400, 1000)
    add_counter(t, "proc.main_runq_pct", [0, 500, 1000], [60.0] * 3)
    f = finding(run(t), "cpu_run_queue")
    assert f["evidence"]["run_queue_ms"] == pytest.approx(0.6) and f["evidence"]["run_queue_pct"] == pytest.approx(60.0)
    text = " ".join(f["evidence_text"])
    assert "waiting/run_queue (0.6 ms, 60.0% of the window)" in text, text
    assert "under what the thread was doing, so" not in text


def case_slow_steps():
    t = Synth()
    for i in range(40):                                  # 40 steps of 100 us; steps 10 and 30 take 400 us
        a = i * 1000
        t.span(SpanKind.STEP, f"ProfilerStep#{i}", a, a + (400 if i in (10, 30) else 100))
    t.launch(0, 1, 1, 40_000)
    ts = [i * 1000 for i in range(40)]
    add_counter(t, "gpu.sm_clock_mhz", ts, [1400 if i in (10, 30) else 1980 for i in range(40)], device=0)
    add_counter(t, "gpu.temp_c", ts, [60] * 40, device=0)
    res = run(t)
    f = finding(res, "slow_steps")
    assert f["evidence"]["steps"] == 40 and f["evidence"]["slow_steps"] == 2
    assert f["evidence"]["slow_mean_ms"] == pytest.approx(0.4) and f["evidence"]["rest_mean_ms"] == pytest.approx(0.1)
    assert f["evidence"]["gpu.sm_clock_mhz_slow"] == 1400 and f["evidence"]["gpu.sm_clock_mhz_rest"] == 1980
    assert "gpu.temp_c_slow" not in f["evidence"]                 # no difference: not named
    t = Synth()                                          # same slow steps, counters flat: nothing to say
    for i in range(40):
        t.span(SpanKind.STEP, f"ProfilerStep#{i}", i * 1000, i * 1000 + (400 if i in (10, 30) else 100))
    add_counter(t, "gpu.sm_clock_mhz", ts, [1980] * 40, device=0)
    assert finding(run(t), "slow_steps") is None



def _generate_forwards(slow_decode: set):
    """4 live generate() calls of 1 prefill forward (5 ms) + 30 decode forwards (1 ms) each, hf.forward ranges
    with their counts; proc.cpu_pct is 190 % during prefills (more threads busy), 100 % otherwise; the decode
    forwards numbered in ``slow_decode`` take 3 ms with proc.cpu_pct 40 %."""
    import json
    t = Synth()
    ts, vals, a, k = [], [], 0, 0
    for g in range(4):
        for step in range(31):
            d = 5000 if step == 0 else (3000 if k in slow_decode else 1000)
            det = t.b.strings.intern(json.dumps({"step": step, "batch": 8, "tokens": 12 if step == 0 else 1,
                                                 "kv_len": 0 if step == 0 else 11 + step}))
            t.span(SpanKind.ANNOTATION, "hf.forward", a, a + d, detail=det)
            ts.append(a)
            vals.append(190.0 if step == 0 else (40.0 if k in slow_decode else 100.0))
            k += step > 0
            a += d + 100
    add_counter(t, "proc.cpu_pct", ts, vals)
    return t


def test_slow_steps_compare_decode_with_decode():
    # issue 24: prefill forwards are slower than decode forwards by design; comparing them fired slow_steps in
    # every generate() report.  Decode is compared with decode only: 120 equal decode forwards say nothing...
    res = run(_generate_forwards(set()))
    assert finding(res, "slow_steps") is None, finding(res, "slow_steps")
    # ... and 6 slow decode forwards (3 ms vs 1 ms, CPU 40 % vs 100 %) among 120 are still found, against decodes
    res = run(_generate_forwards({7, 30, 57, 80, 99, 110}))
    f = finding(res, "slow_steps")
    ss = res["counters"]["slow_steps"]
    assert ss["steps"] == 120 and ss["source"] == "decode steps (hf.forward)"
    assert f["evidence"]["slow_steps"] == 6 and f["evidence"]["rest_mean_ms"] == pytest.approx(1.0)
    assert f["evidence"]["slow_mean_ms"] == pytest.approx(3.0)
    assert f["evidence"]["proc.cpu_pct_slow"] == 40.0 and f["evidence"]["proc.cpu_pct_rest"] == 100.0

H100 = [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]


def _gemm_trace(n: int) -> Synth:
    import json
    t = Synth()
    t.b.meta["devices"] = H100
    op = t.span(SpanKind.CPU_OP, "aten::mm", 0, 100,
                detail=t.b.strings.intern(json.dumps({"dims": [[n, n], [n, n]], "types": ["c10::BFloat16"] * 2})))
    assert op >= 0
    t.launch(1, 2, 2, 100)
    return t


def case_low_mfu():
    res = run(_gemm_trace(1024))                    # 2*1024^3 FLOP in 100 us: 21.5 TFLOP/s = 2.2 % of 989.4
    f = finding(res, "low_mfu")
    assert f["severity"] == "medium" and f["evidence"]["mfu_pct"] == pytest.approx(100 * 2 * 1024 ** 3 / 1e-4 / 989.4e12, rel=1e-3)
    assert "small_gemms" in f["evidence"]["reasons"]          # the GEMM kernel itself runs at ~2 % of peak
    assert finding(run(_gemm_trace(2500)), "low_mfu") is None  # 31.6 %


def _generate_trace(step_us: list[float], param_bytes: int = 10 ** 9) -> Synth:
    t = Synth()
    t.b.meta["devices"] = H100
    t.b.meta["models"] = [{"name": "m", "params": param_bytes // 2, "param_bytes": param_bytes,
                           "params_by_dtype": {"bfloat16": param_bytes // 2}, "layers": 2, "heads": 4, "kv_heads": 4,
                           "head_dim": 8, "kv_elem_bytes": 2, "linear_weight_elems": param_bytes // 2, "lm_head_elems": 0}]
    cat = t.b.strings.intern("inferscope.llm")
    t0 = 0.0
    for i, d in enumerate(step_us):
        t.span(SpanKind.ANNOTATION, "hf.forward", t0, t0 + d, cat=cat,
               detail=t.b.strings.intern(f'{{"step":{i},"tokens":{8 if i == 0 else 1},"batch":1,"kv_len":{0 if i == 0 else 7 + i}}}'))
        t0 += d
    t.span(SpanKind.ANNOTATION, "hf.generate", 0, t0 + 1, cat=cat,
           detail=t.b.strings.intern(f'{{"batch":1,"prompt_tokens":8,"generated_tokens":{len(step_us)},"forwards":{len(step_us)}}}'))
    return t


def case_decode_low_mbu():
    res = run(_generate_trace([100.0] + [2000.0] * 5))      # 1 GB per 2 ms step = 500 GB/s = 14.9 % of 3,350
    f = finding(res, "decode_low_mbu")
    assert f["severity"] == "medium" and f["evidence"]["decode_mbu_pct"] == pytest.approx(100 * 1e9 / 2e-3 / 3350e9, rel=1e-3)
    assert finding(run(_generate_trace([100.0] + [500.0] * 5)), "decode_low_mbu") is None   # 59.7 %


def case_latency_tail():
    steps = [100.0] + [1000.0] * 30
    steps[15] = 5000.0                                         # one slow decode step
    f = finding(run(_generate_trace(steps)), "latency_tail")
    assert f["evidence"]["p50_ms"] == pytest.approx(1.0) and f["evidence"]["p99_over_p50"] >= 2
    assert f["evidence"]["slowest_step_start_ms"] == pytest.approx((100 + 14 * 1000) / 1e3)
    assert finding(run(_generate_trace([100.0] + [1000.0] * 30)), "latency_tail") is None


def case_kernel_limiter():
    from pathlib import Path
    from inferscope.analyze.pipeline import analyze
    from inferscope.ingest import load_trace
    res = analyze(load_trace(Path(__file__).parent / "data" / "ncu" / "demo_hot10_raw.csv.gz"))
    f = finding(res, "kernel_limiter")           # the fp32 SIMT sgemm: 18 % of the profiled time, latency-bound
    assert f["severity"] == "low" and f["evidence"]["limiter"] == "latency" and f["evidence"]["waves"] == 0.04
    k = res["kernel_deep_dive"]["kernels"][0]
    k.update(limiter="compute", tensor_pct=70.0)   # already on the tensor roof: no finding
    assert D.kernel_limiter(res, {}) is None
    k.update(tensor_pct=None, tensor_core=True)    # tensor ops counted, pipe % not captured: on Tensor Cores too
    assert D.kernel_limiter(res, {}) is None
    k.update(tensor_pct=0.0, tensor_core=False, share_pct=5.0)        # below KERNEL_LIMITER_MIN_SHARE_PCT
    assert D.kernel_limiter(res, {}) is None



def _offcpu_trace(marks, waiting=(200, 1000), other=None):
    """Main thread: Python 0-200 us, off-CPU ``waiting``; off-CPU marks [(t_us, syscall, info)] on it
    (collect/blocking.py); ``other``: (track name, [(cls, a, b)], marks) of a second thread of the process."""
    import json
    from inferscope.collect.blocking import CAT
    t = Synth()
    S = t.b.strings.intern
    t.span(SpanKind.CPU_SAMPLE, "user_code", 0, waiting[0], detail=S("app.py:handle"))
    t.span(SpanKind.CPU_SAMPLE, "waiting", waiting[0], waiting[1], detail=S("app.py:handle"))

    def mark(tr, at, name, info):
        t.span(SpanKind.MARK, name, at, at, track=tr, cat=S(CAT), detail=S(json.dumps(info)) if info else -1)
    for at, name, info in marks:
        mark(t.cpu, at, name, info)
    if other:
        tr = t.b.track(TrackKind.CPU_THREAD, pid=100, tid=101, name=other[0])
        for cls, a, b in other[1]:
            t.span(SpanKind.CPU_SAMPLE, cls, a, b, track=tr, detail=S("app.py:holder"))
        for at, name, info in other[2]:
            mark(tr, at, name, info)
    return t


def case_blocking_io():
    rd = {"fd": 3, "path": "/data/shard`0|<b>.bin", "flags": ["O_DIRECT"], "size": 4096, "frame": "app.py:12 load"}
    res = run(_offcpu_trace([(200, "pread64", rd), (700, "fsync", {"fd": 4, "path": "/out/log.bin", "frame": "app.py:20 save"}),
                             (900, "running", None)]))
    f = finding(res, "blocking_io")
    b = res["contention"]["blocking"]
    assert b["io_ms"] == pytest.approx(0.7) and b["attributed_ms"] == pytest.approx(0.7) and b["waiting_ms"] == pytest.approx(0.8)
    assert f["severity"] == "medium" and f["evidence"]["io_pct"] == pytest.approx(70.0)
    assert f["evidence"]["top_syscall"] == "pread64" and f["evidence"]["top_frame"] == "app.py:12 load"
    assert "O_DIRECT reads (4 KiB each)" in f["suggestion"] and "fsync per write" in f["suggestion"].lower()
    assert any("4,096 bytes per call" in x and "/data/shard" in x for x in f["evidence_text"])
    # sleeping is not I/O; a lock is not I/O; I/O below the threshold is no finding
    assert finding(run(_offcpu_trace([(200, "clock_nanosleep", {"frame": "app.py:5 main"})])), "blocking_io") is None
    low = run(_offcpu_trace([(200, "clock_nanosleep", {}), (1000 - 10 * T.BLOCKING_IO_LOW_PCT / 2, "read", {"fd": 3})]))
    assert finding(low, "blocking_io") is None and low["contention"]["blocking"]["io_ms"] > 0


def case_lock_wait():
    fut = {"frame": "app.py:30 infer", "timed": False}
    holder = ("holder", [("user_code", 0, 150), ("waiting", 150, 1000)],
              [(150, "clock_nanosleep", {"frame": "app.py:44 holder"})])
    res = run(_offcpu_trace([(200, "futex", fut)], other=holder))
    f = finding(res, "lock_wait")
    assert f["severity"] == "medium" and f["evidence"]["lock_ms"] == pytest.approx(0.8)
    assert f["evidence"]["top_frame"] == "app.py:30 infer"
    assert f["evidence"]["other_thread"] == "holder" and f["evidence"]["other_state"] == "off-CPU in clock_nanosleep at app.py:44 holder"
    assert "untimed" in " ".join(f["evidence_text"]) and "likely holder" in " ".join(f["evidence_text"])
    # the other thread runs Python meanwhile: GIL-like, not a lock wait (gil_contention's territory)
    busy = ("spinner", [("user_code", 0, 1000)], [])
    r = run(_offcpu_trace([(200, "futex", fut)], other=busy))
    assert finding(r, "lock_wait") is None and r["contention"]["blocking"]["python_overlap_ms"] == pytest.approx(0.8)
    # a futex whose deadline is within the switch interval is the GIL
    r = run(_offcpu_trace([(200, "futex", {"frame": "app.py:30 infer", "timed": True, "short_timeout": True})]))
    assert finding(r, "lock_wait") is None and r["contention"]["blocking"]["gil_ms"] == pytest.approx(0.8)

from test_serving import case_low_cache_hit_rate, case_oom, case_request_errors  # noqa: E402,F401  (serving rules)

CASES = {name[len("case_"):]: fn for name, fn in globals().items() if name.startswith("case_")}


def test_every_rule_has_a_case():
    assert set(CASES) == set(D.FINDING_IDS)
    assert len(D.RULES) == len(set(D.FINDING_IDS))


@pytest.mark.parametrize("fid", D.FINDING_IDS)
def test_rule(fid):
    CASES[fid]()


def test_get_path():
    res = {"breakdown": [{"category": "sync_wait", "ms": 2.0, "parts": [{"name": "x", "ms": 1.0}]}], "a": {"b": [5, 6]}}
    assert D.get_path(res, "breakdown[sync_wait].ms") == 2.0
    assert D.get_path(res, "breakdown[sync_wait].parts[x].ms") == 1.0
    assert D.get_path(res, "a.b[1]") == 6 and D.get_path(res, "a.b[2]") is None and D.get_path(res, "a.c") is None


def test_every_threshold_states_its_source():
    import inspect
    import re
    text = inspect.getsource(T)
    blocks = text.split("# ---")[1:]
    assert blocks
    for b in blocks:
        if re.search(r"^[A-Z_]+ =", b, re.M):
            assert "Source" in b, b.splitlines()[0]


def _sampled(classes_and_details):
    """A CPU-only trace of sampled runs: [(class, detail, start_us, end_us)]."""
    t = Synth()
    for cls, det, a, b in classes_and_details:
        t.span(SpanKind.CPU_SAMPLE, cls, a, b, detail=t.b.strings.intern(det))
    return t


def test_user_code_is_its_own_verdict_and_names_the_hot_function():
    t = _sampled([("user_code", "app.py:resize_bilinear", 0, 70_000), ("framework", "torch/nn/modules/linear.py:Linear.forward", 70_000, 80_000),
                  ("user_code", "app.py:main", 80_000, 85_000), ("tokenization", "app.py:tokenize", 85_000, 100_000)])
    res = run(t)
    assert res["verdict"]["id"] == "user_code_bound"
    f = finding(res, "cpu_preprocessing")
    assert f["title"] == "User code dominates CPU time"
    assert f["evidence"]["culprit"] == "resize_bilinear" and f["evidence"]["culprit_ms"] == pytest.approx(70.0)
    assert f["evidence"]["culprit_pct"] == pytest.approx(70.0)
    assert "resize_bilinear (app.py): 70.0 ms, 70.0%" in " ".join(f["evidence_text"])
    assert "DataLoader" not in f["suggestion"] and "resize_bilinear" in f["suggestion"]
    # tokenization-dominated: cpu_bound, the tokenizer function named, tokenizer advice
    t = _sampled([("tokenization", "app.py:tokenize", 0, 70_000), ("user_code", "app.py:main", 70_000, 80_000)])
    res = run(t)
    f = finding(res, "cpu_preprocessing")
    assert res["verdict"]["id"] == "cpu_bound" and f["evidence"]["culprit"] == "tokenize"
    assert "tokenizer" in f["suggestion"]


def test_culprit_tables_full_and_exact():
    # 30 distinct sampled functions: the table keeps all of them, result['culprits'] the top 20
    t = _sampled([("user_code", f"app.py:f{i}", 1000 * i, 1000 * i + 10 * (i + 1)) for i in range(30)])
    res = run(t)
    rows = res["tables"]["top_python_functions"]["rows"]
    assert len(rows) == 30 and len(res["culprits"]["functions"]) == 20
    assert rows[0][0] == "f29" and rows[0][4] == pytest.approx(0.3)      # 300 us self time
    assert res["culprits"]["counts"]["functions"] == 30


def test_critical_thread_helper_poll_is_not_waiting():
    # main thread launches GPU work and sits 10 ms in one OS call; a helper thread polls the whole
    # 100 ms window: waiting is the main thread's 10 ms, not the helper's poll
    t = Synth()
    helper = t.b.track(TrackKind.CPU_THREAD, pid=100, tid=101, name="helper")
    t.launch(0, 10, 10, 20)
    t.span(SpanKind.OS_RUNTIME, "read", 30_000, 40_000)
    t.span(SpanKind.OS_RUNTIME, "poll", 0, 100_000, track=helper)
    t.launch(99_990, 100_000, 100_000, 100_010)
    res = run(t)
    b = {r["category"]: r for r in res["breakdown"]}
    assert b["waiting"]["ms"] == pytest.approx(10.0, abs=1e-6)
    assert res["verdict"]["id"] != "waiting_bound"
    th = res["threads"]
    assert th["rule"] == "gpu_launch" and th["critical"] == ["main"]
    helper_row = next(r for r in th["threads"] if r["thread"] == "helper")
    assert not helper_row["critical"] and helper_row["waiting_ms"] == pytest.approx(100.0, abs=0.02)
    # the helper's poll is still named, as parallel activity, in the API culprit table
    assert {r["name"]: r for r in res["culprits"]["apis"]}["poll"]["total_ms"] == pytest.approx(100.0, abs=0.02)
    # one thread only: it is the critical one whatever it does
    t = Synth()
    t.span(SpanKind.OS_RUNTIME, "poll", 0, 100_000)
    assert run(t)["verdict"]["id"] == "waiting_bound"


def _waiting_main_with_children(child_cpu_s):
    t = Synth()
    t.span(SpanKind.CPU_SAMPLE, "waiting", 0, 1_000_000, detail=t.b.strings.intern("app.py:main"))   # 1 s waiting
    if child_cpu_s is not None:
        for pid, share in ((501, 0.6), (502, 0.4)):
            ct = t.b.track(TrackKind.COUNTER, name=f"child.cpu_s[{pid}] python")
            t.b.add_counters(ct, [0, 500_000_000, 1_000_000_000], [0.0, child_cpu_s * share / 2, child_cpu_s * share])
    return run(t)


def test_children_explain_waiting():
    res = _waiting_main_with_children(1.5)
    assert res["verdict"]["id"] == "child_process_bound"
    ch = res["children"]
    assert ch["count"] == 2 and ch["cpu_s_in_window"] == pytest.approx(1.5) and not ch["profiled"]
    assert any("2 child process(es) used" in w and "not profiled" in w for w in res["warnings"])
    f = finding(res, "host_waiting")
    assert f["evidence"]["children_cpu_s_in_window"] == pytest.approx(1.5) and "child processes" in f["suggestion"]
    # children that did little do not explain 1 s of waiting (below CHILD_WAIT_EXPLAINED_FRACTION)
    assert _waiting_main_with_children(0.2)["verdict"]["id"] == "waiting_bound"
    res = _waiting_main_with_children(None)
    assert res["verdict"]["id"] == "waiting_bound" and res["children"] is None


def _prep_res(followed: bool) -> dict:
    fn = lambda name, f, cls, thread, ms: {"function": name, "file": f, "class": cls, "thread": thread,
                                           "self_ms": ms, "self_pct": ms / 10.0}
    return {"breakdown": [{"category": "cpu_preprocessing", "ms": 800.0, "pct": 80.0,
                           "parts": [{"name": "tokenization", "ms": 0.0}, {"name": "preprocessing", "ms": 300.0},
                                     {"name": "user_code", "ms": 500.0}]}],
            "culprits": {"functions": [fn("<module>", "app.py", "user_code", "main (100)", 244.0),
                                       fn("import torch", "", "framework", "main (101)", 900.0),
                                       fn("resize", "app.py", "preprocessing", "main (101)", 200.0)]},
            "children": {"followed": 1 if followed else 0,
                         "processes": [{"pid": 101, "followed": followed}]}}


def test_cpu_preprocessing_names_the_followed_childs_function():
    # user code leads (the main process's own <module>), and part of the category is a followed worker's
    # work: the finding names both, the worker's function as such (its import is not a culprit)
    f = D.cpu_preprocessing(_prep_res(True), {})
    txt = " ".join(f["evidence_text"])
    assert "Culprit: <module> (app.py): 244.0 ms" in txt
    assert "Hottest function in the followed children: resize (app.py): 200.0 ms" in txt
    assert f["evidence"]["child_culprit"] == "resize"
    f = D.cpu_preprocessing(_prep_res(False), {})
    assert "followed children" not in " ".join(f["evidence_text"]) and "child_culprit" not in f["evidence"]
