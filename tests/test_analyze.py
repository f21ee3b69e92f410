"""Analyses on synthetic traces with known ground truth."""
import numpy as np
import pytest

from inferscope.analyze.breakdown import breakdown
from inferscope.analyze.gpu import gpu_utilisation
from inferscope.analyze.idle_gaps import idle_gaps
from inferscope.analyze.kernels import kernels
from inferscope.analyze.options import AnalyzeOptions
from inferscope.analyze.phases import phases
from inferscope.analyze.pipeline import analyze
from inferscope.analyze.syncs import syncs
from inferscope.analyze.run_phases import run_phases
from inferscope.analyze.window import resolve_window
from inferscope.errors import ConfigError
from inferscope.trace import CopyKind, MemKind, SpanKind
from inferscope.trace import native

from helpers import Synth


def bd_ns(trace, window=None):
    w = window or resolve_window(trace, None, run_phases(trace))
    rows = breakdown(trace, w)["breakdown"]
    return {r["category"]: r["ns"] for r in rows}, rows


def test_breakdown_priorities_and_exact_sum():
    t = Synth()
    t.span(SpanKind.STEP, "ProfilerStep#1", 0, 1000)
    t.span(SpanKind.ANNOTATION, "tokenize_batch", 0, 200)          # 200 us tokenization
    t.span(SpanKind.CPU_OP, "aten::linear", 200, 300)               # framework op, launches
    t.launch(210, 220, 250, 500, name="gemm")                        # kernel 250-500
    t.span(SpanKind.RUNTIME, "cudaStreamSynchronize", 300, 600)     # sync: 500-600 visible
    t.copy(600, 610, 620, 700, ck=CopyKind.D2H, host=MemKind.PINNED, api="cudaMemcpyAsync")
    t.span(SpanKind.OS_RUNTIME, "read", 800, 900)                   # waiting
    tr = t.done()
    ns, rows = bd_ns(tr)
    assert sum(ns.values()) == 1000_000
    assert ns["gpu_compute"] == 250_000
    assert ns["d2h_copy"] == 80_000
    assert ns["sync_wait"] == 100_000       # 500-600; 300-500 is under the kernel
    assert ns["cpu_preprocessing"] == 200_000
    # framework: op 200-250 (kernel starts 250), api 600-610, 610-620 nothing? api ends 610
    assert ns["framework_overhead"] == 50_000 + 10_000
    assert ns["waiting"] == 100_000
    assert ns["other"] == 1000_000 - sum(v for k, v in ns.items() if k != "other")
    parts = {p["name"]: p["ns"] for r in rows for p in r["parts"]}
    assert parts["tokenization"] == 200_000
    assert abs(sum(r["pct"] for r in rows) - 100.0) < 1e-9


def test_breakdown_cpu_only_ops_are_cpu_compute():
    t = Synth()
    t.span(SpanKind.CPU_OP, "aten::mm", 0, 600)
    t.span(SpanKind.CPU_SAMPLE, "framework", 0, 1000)   # sampled framework python around ops
    t.span(SpanKind.CPU_SAMPLE, "tokenization", 1000, 1500)
    t.span(SpanKind.CPU_SAMPLE, "waiting", 1500, 1700)
    ns, _ = bd_ns(t.done())
    assert ns["cpu_compute"] == 600_000
    assert ns["framework_overhead"] == 400_000
    assert ns["cpu_preprocessing"] == 500_000
    assert ns["waiting"] == 200_000
    assert ns["gpu_compute"] == 0


def test_user_code_sample_yields_to_recorded_ops_and_api_calls():
    """A Python loop issuing torch ops on a GPU: the sampled frame is the user's, but inside a
    recorded op or CUDA API call the host is in the framework (measured on an H100: a 30k-launch
    x.add_() loop read 'user code' 83% before this rule)."""
    t = Synth()
    t.span(SpanKind.CPU_SAMPLE, "user_code", 0, 1000)          # one sampled run over the whole loop
    t.span(SpanKind.CPU_SAMPLE, "tokenization", 1000, 1400)    # tokenizer code calling an op keeps its class
    for i in range(10):                                        # ops 0-80 of every 100 us, launches inside
        t.span(SpanKind.CPU_OP, "aten::add_", i * 100, i * 100 + 80)
        t.launch(i * 100 + 50, i * 100 + 70, i * 100 + 90, i * 100 + 92, name="add_kernel")
    t.span(SpanKind.CPU_OP, "aten::embedding", 1100, 1200)
    ns, rows = bd_ns(t.done())
    parts = {p["name"]: p["ns"] for r in rows for p in r["parts"]}
    assert ns["gpu_compute"] == 10 * 2_000
    assert parts["user_code"] == 10 * (20_000 - 2_000)        # 80-100 of each 100 us, minus the kernel
    assert parts["launch_api"] == 10 * 20_000
    assert parts["framework_ops"] == 10 * 60_000                # op minus its launch call
    assert parts["tokenization"] == 400_000                    # op inside tokenization stays tokenization
    assert sum(ns.values()) == 1_400_000


def test_gpu_utilisation_union_over_streams():
    t = Synth()
    g2 = t.b.track(2, pid=100, tid=9, device=0)
    t.launch(0, 5, 10, 50)
    t.span(SpanKind.KERNEL, "k2", 40, 80, track=g2)  # overlaps 40-50 on another stream
    t.span(SpanKind.MEMSET, "Memset", 90, 100, track=g2)
    t.span(SpanKind.RUNTIME, "cudaDeviceSynchronize", 0, 200)
    tr = t.done()
    w = resolve_window(tr, None, run_phases(tr))
    g = gpu_utilisation(tr, w)
    assert g["busy_ns"] == (80 - 10 + 10) * 1000
    assert g["idle_pct"] == pytest.approx(100 * (200 - 80) / 200)
    assert g["active_span_ms"] == pytest.approx(0.09)
    assert g["idle_pct_active_span"] == pytest.approx(100 * (90 - 80) / 90)
    assert g["streams"] == 2


def test_idle_gap_classes():
    t = Synth()
    t.launch(0, 5, 10, 20)          # k1
    t.launch(6, 8, 20.5, 30)        # gap 0.5us <= 1us: kernel_wait
    t.launch(50, 55, 60, 70)        # launched after k2 ended (30): host_wait, gap 30us
    t.launch(56, 58, 90, 100)       # issued before k3 ended, starts late: other, gap 20 us
    tr = t.done()
    ig = idle_gaps(tr, resolve_window(tr, None, run_phases(tr)))
    assert ig["by_class_stream_ms"]["kernel_wait"] == pytest.approx(0.0005)
    assert ig["by_class_stream_ms"]["host_wait"] == pytest.approx(0.030)
    assert ig["by_class_stream_ms"]["other"] == pytest.approx(0.020)
    assert ig["largest"][0]["ms"] == pytest.approx(0.030)
    assert ig["largest"][0]["host"] == "cudaLaunchKernel"


def test_kernel_stats_and_launch_storm():
    t = Synth()
    rng = np.random.default_rng(0)
    durs = rng.integers(2, 8, 3000)   # us: tiny kernels
    tcur = 0.0
    for d in durs:
        t.launch(tcur, tcur + 4, tcur + 5, tcur + 5 + d, name="tiny")
        tcur += 5 + d + 0.5
    t.launch(tcur, tcur + 4, tcur + 5, tcur + 2005, name="big")
    tr = t.done()
    k = kernels(tr, resolve_window(tr, None, run_phases(tr)))
    top = {r["name"]: r for r in k["top"]}
    assert top["tiny"]["calls"] == 3000
    assert top["tiny"]["p50_us"] == pytest.approx(np.percentile(durs, 50))
    assert top["tiny"]["p90_us"] == pytest.approx(np.percentile(durs, 90))
    assert top["tiny"]["mean_us"] == pytest.approx(durs.mean())
    assert k["launch_storm"] is True and k["launches_per_s"] > 50_000
    assert k["launch_api_calls"] == 3001
    res = analyze(tr)
    assert "launch_storm" in {f["id"] for f in res["findings"]}


def test_syncs_issuing_op_and_tiny_d2h():
    t = Synth()
    t.span(SpanKind.CPU_OP, "aten::item", 0, 100)
    t.span(SpanKind.CPU_OP, "aten::_local_scalar_dense", 1, 99)
    t.copy(2, 5, 10, 12, ck=CopyKind.D2H, host=MemKind.PINNED, nbytes=4)
    t.span(SpanKind.RUNTIME, "cudaStreamSynchronize_v3020", 6, 98)
    t.span(SpanKind.RUNTIME, "cudaStreamWaitEvent", 150, 151)
    tr = t.done()
    sy = syncs(tr, resolve_window(tr, None, run_phases(tr)))
    assert sy["count"] == 1
    assert sy["top"][0]["api"] == "cudaStreamSynchronize"
    assert sy["top"][0]["issued_by"] == "aten::_local_scalar_dense"
    assert sy["blocked_ms"] == pytest.approx(0.092)
    assert sy["stream_wait_count"] == 1
    assert sy["tiny_d2h"]["count"] == 1
    assert sy["tiny_d2h"]["issued_by"][0]["op"] == "aten::_local_scalar_dense"


def test_phases_attribution_and_coverage():
    t = Synth()
    t.span(SpanKind.ANNOTATION, "prefill", 0, 100)
    t.launch(10, 12, 20, 60)          # 40 us in prefill
    t.span(SpanKind.ANNOTATION, "decode_step", 100, 200)
    t.launch(110, 112, 120, 130)      # 10 us in decode
    t.launch(210, 212, 220, 270)      # 50 us outside any range
    tr = t.done()
    ph = phases(tr, resolve_window(tr, None, run_phases(tr)))
    rows = {r["name"]: r for r in ph["ranges"]}
    assert rows["prefill"]["gpu_ms"] == pytest.approx(0.040)
    assert rows["decode_step"]["gpu_ms"] == pytest.approx(0.010)
    assert ph["gpu_attribution_coverage_pct"] == pytest.approx(50.0)
    phs = {p["phase"]: p for p in ph["phases"]}
    assert phs["prefill"]["gpu_ms"] == pytest.approx(0.040) and phs["decode"]["wall_ms"] == pytest.approx(0.1)
    assert phs["decode"]["mapped_from"] == [{"name": "decode_step", "rule": "conventional phase name (whole name)"}]
    assert ph["phase_map_source"] == "conventional names and <name>_Stage ranges"
    ph2 = phases(tr, resolve_window(tr, None, run_phases(tr)), {"first": ["prefill"], "second": ["decode"]})
    assert {p["phase"] for p in ph2["phases"]} == {"first", "second"}
    assert ph2["phases"][0]["mapped_from"][0]["rule"].startswith("--phase-map")
    # patterns are whole words: "pre" is not inside "prefill"
    ph3 = phases(tr, resolve_window(tr, None, run_phases(tr)), {"first": ["pre"], "second": ["decode"]})
    assert {p["phase"] for p in ph3["phases"]} == {"second"}


def test_window_resolution():
    t = Synth()
    t.span(SpanKind.STEP, "ProfilerStep#3", 0, 100)
    t.span(SpanKind.STEP, "ProfilerStep#4", 100, 300)
    t.span(SpanKind.ANNOTATION, "decode", 150, 160)
    t.span(SpanKind.ANNOTATION, "decode", 170, 190)
    t.launch(110, 111, 120, 140)
    tr = t.done()
    w = resolve_window(tr, "ProfilerStep#4")
    assert (w.start_ns, w.end_ns, w.kind) == (100_000, 300_000, "step")
    assert resolve_window(tr, "step:1").end_ns == 100_000
    assert resolve_window(tr, "decode:2").start_ns == 170_000
    assert resolve_window(tr, "gpu").dur_ns == 20_000
    assert resolve_window(tr, "0.05:0.15").dur_ns == 100_000
    for bad in ("nope", "step:9", "decode:3", "5:1"):
        with pytest.raises(ConfigError):
            resolve_window(tr, bad)
    res = analyze(tr, AnalyzeOptions(window="ProfilerStep#4"))
    assert res["e2e_ms"] == pytest.approx(0.2)
    assert sum(r["ms"] for r in res["breakdown"]) == pytest.approx(0.2)


def test_live_run_without_a_sample_spans_process_start_to_run_end(tmp_path):
    """A live run too short for one sample (seen in CI: a 60 ms program on a loaded host): the whole-run
    window is the process start to the end of collection, all of it 'other', and every renderer works."""
    from inferscope.report import RENDERERS, get_renderer
    t = Synth()
    tr = t.done()
    tr.meta["collection"] = {"mode": "live", "process_start_ns": 5_000_000, "run_end_ns": 405_000_000}
    w = resolve_window(tr, None, run_phases(tr))
    assert (w.start_ns, w.end_ns, w.kind) == (5_000_000, 405_000_000, "trace")
    assert "no sample taken" in w.label
    res = analyze(tr)
    assert res["e2e_ms"] == pytest.approx(400.0)
    assert [r["category"] for r in res["breakdown"] if r["ms"] > 0] == ["other"]
    for fmt in RENDERERS:
        out = tmp_path / f"out_{fmt}"
        from helpers import as_report
        get_renderer(fmt)(as_report(res, tr, [fmt]), tr, out)
        assert out.exists() and (out.is_dir() or out.stat().st_size > 0)
    tr.meta["collection"].pop("run_end_ns")    # an older .iscope: nothing to anchor the end, as before
    assert resolve_window(tr, None, run_phases(tr)).dur_ns == 0


def test_empty_and_cpu_only_pipeline():
    t = Synth()
    t.span(SpanKind.CPU_OP, "aten::mm", 0, 1000)
    res = analyze(t.done())
    assert res["gpu"] is None and res["idle_gaps"] is None
    assert res["verdict"]["id"] == "cpu_compute_bound"
    t2 = Synth()
    t2.span(SpanKind.MARK, "x", 5, 5)
    res2 = analyze(t2.done())
    assert res2["e2e_ms"] == 0 and res2["verdict"]["id"] == "empty"


def test_native_roundtrip(tmp_path):
    t = Synth()
    t.span(SpanKind.CPU_OP, "aten::mm ünïcödé <x>", 0, 10)
    t.launch(1, 2, 3, 9)
    tr = t.done()
    tr.meta["source_format"] = "inferscope"
    p = tmp_path / "t.iscope"
    native.save(tr, p)
    tr2 = native.load(p)
    for col in tr.spans.COLUMNS:
        assert np.array_equal(getattr(tr.spans, col), getattr(tr2.spans, col)), col
    assert tr2.strings.as_list() == tr.strings.as_list()
    assert np.array_equal(tr2.flows.src, tr.flows.src)
    assert analyze(tr2)["breakdown"] == analyze(tr)["breakdown"]


def test_waiting_names_the_thread_waited_for():
    """Issue 45 item 6: a thread-pool worker's work the main thread waits for: the breakdown counts only the critical
    thread (its waiting stays waiting), and threads.waited_for names the worker and what it did during the wait
    (planted: main waits 0-100 ms; the worker computes gemm 0-60 ms and prep 60-80 ms, then 100-150 ms while main
    runs - that last part overlaps no wait)."""
    from inferscope.trace import TrackKind
    t = Synth()
    t.span(SpanKind.CPU_SAMPLE, "waiting", 0, 100_000)
    t.span(SpanKind.CPU_SAMPLE, "user_code", 100_000, 150_000, detail=t.b.strings.intern("app.py:serve:3"))
    w = t.b.track(TrackKind.CPU_THREAD, pid=100, tid=101, name="pool-0")
    t.span(SpanKind.CPU_SAMPLE, "cpu_compute", 0, 60_000, track=w, detail=t.b.strings.intern("app.py:gemm:10"))
    t.span(SpanKind.CPU_SAMPLE, "user_code", 60_000, 80_000, track=w, detail=t.b.strings.intern("app.py:prep:20"))
    t.span(SpanKind.CPU_SAMPLE, "waiting", 80_000, 100_000, track=w)
    t.span(SpanKind.CPU_SAMPLE, "cpu_compute", 100_000, 150_000, track=w, detail=t.b.strings.intern("app.py:gemm:10"))
    res = analyze(t.done(), AnalyzeOptions(window="all"))
    bd = {r["category"]: r["ms"] for r in res["breakdown"]}
    assert bd["waiting"] == pytest.approx(100.0) and bd["cpu_compute"] == 0      # totals: the critical thread's only
    rows = res["threads"]["waited_for"]
    assert len(rows) == 1
    r = rows[0]
    assert r["thread"].startswith("pool-0") and r["ms"] == pytest.approx(80.0) and r["pct_of_waiting"] == pytest.approx(80.0)
    assert (r["class"], r["class_ms"]) == ("cpu_compute", pytest.approx(60.0))
    assert (r["function"], r["function_ms"]) == ("app.py:gemm", pytest.approx(60.0))
    assert res["tables"]["waited_for"]["rows"][0][:2] == [r["thread"], 100]
