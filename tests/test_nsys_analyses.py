"""NVTX attribution, per-PID tables and nsys-stats extras against the reference export's ground truth."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import REPO, nsys_params
from inferscope.analyze.nsys_extras import analyze_nsys_extras
from inferscope.analyze.nvtx_attribution import analyze_nvtx, nvtx_by_pid
from inferscope.analyze.options import AnalyzeOptions
from inferscope.analyze.per_pid import analyze_pids
from inferscope.analyze.pipeline import analyze
from inferscope.analyze.window import Window
from inferscope.ingest import nsys
from nsys_factory import PID_A, PID_B, TRUTH, reference_export

PHASES = {"prefill": ["prefill", "attention"], "decode": ["decode"]}


@pytest.fixture(scope="module", params=["3.1", "3.24"])
def trace(request, tmp_path_factory):
    p = reference_export(request.param).write(tmp_path_factory.mktemp("nsys") / "ref.sqlite")
    return nsys.load(p)


def rows_by(table, key):
    cols = table["columns"]
    return {tuple(r[cols.index(k)] for k in key) if isinstance(key, tuple) else r[cols.index(key)]: dict(zip(cols, r))
            for r in table["rows"]}


def test_nvtx_ranges_summary(trace):
    r = analyze_nvtx(trace, None, AnalyzeOptions())
    assert r["available"] and r["ranges"] == TRUTH["nvtx_ranges"]
    t = rows_by(r["tables"]["nvtx_ranges"], "range_name")
    for name, (count, ns) in TRUTH["ranges"].items():
        assert t[name]["count"] == count
        assert t[name]["total_time_ms"] == pytest.approx(ns / 1e6)
    assert t["decode"]["avg_duration_us"] == pytest.approx(5900 / 2 / 1e3)


def test_nvtx_kernel_attribution_and_coverage(trace):
    r = analyze_nvtx(trace, None, AnalyzeOptions())
    a = r["attribution"]
    assert a["coverage_pct"] == pytest.approx(100 * TRUTH["coverage"], abs=1e-3)
    assert a["kernel_sum_ms"] == pytest.approx(TRUTH["kernel_ns"] / 1e6)
    kt = rows_by(r["tables"]["nvtx_kernel_time"], "range_name")
    assert {k: round(v["attributed_kernel_time_ms"] * 1e6) for k, v in kt.items()} == TRUTH["attributed"]
    assert r["warnings"] == []                        # 73% >= default 70%
    r2 = analyze_nvtx(trace, None, AnalyzeOptions(nvtx_coverage_warn_threshold=0.8))
    assert len(r2["warnings"]) == 1 and "73.3%" in r2["warnings"][0] and "80.0%" in r2["warnings"][0]


def test_no_nvtx_kernel_map(trace):
    r = analyze_nvtx(trace, None, AnalyzeOptions(nvtx_kernel_map=False, phase_map=PHASES))
    assert r["attribution"]["enabled"] is False and r["attribution"]["coverage_pct"] is None
    assert "nvtx_kernel_time" not in r["tables"] and r["warnings"] == []
    assert r["phases"]["decode"]["kernel_sum_ms"] is None
    p = nvtx_by_pid(trace, None, AnalyzeOptions(nvtx_kernel_map=False))
    assert p["warnings"] == []


def test_phase_map(trace):
    r = analyze_nvtx(trace, None, AnalyzeOptions(phase_map=PHASES))
    ph = r["phases"]
    assert ph["prefill"]["kernel_sum_ms"] * 1e6 == pytest.approx(250)
    assert ph["decode"]["kernel_sum_ms"] * 1e6 == pytest.approx(1290)
    assert ph["prefill"]["wall_ms"] * 1e6 == pytest.approx(900)            # union: attention inside prefill
    assert ph["decode"]["wall_ms"] * 1e6 == pytest.approx(5000)            # union of [1100,2000] and [0,5000]
    un = rows_by(r["tables"]["nvtx_phases"], "phase")["(unmapped)"]
    assert un["kernel_time_ms"] * 1e6 == pytest.approx(560)


def test_window_clips(trace):
    r = analyze_nvtx(trace, Window(0, 1000, "first us", "time"), AnalyzeOptions())
    t = rows_by(r["tables"]["nvtx_ranges"], "range_name")
    assert t["decode"]["total_time_ms"] * 1e6 == pytest.approx(1000)      # B's decode clipped to the window
    assert "tail" not in t


def test_per_pid(trace):
    r = analyze_pids(trace, None, AnalyzeOptions())
    pids = {p["pid"]: p for p in r["pids"]}
    assert {p: round(v["kernel_sum_ms"] * 1e6) for p, v in pids.items()} == TRUTH["kernel_ns_by_pid"]
    assert pids[PID_B]["name"] == "vllm-worker"
    kb = rows_by(r["tables"]["kernels_by_pid"], ("pid", "kernel_name"))
    assert kb[(PID_A, "gemm_kernel(float*, int)")]["call_count"] == 2
    assert kb[(PID_B, "gemm_kernel(float*, int)")]["total_time_ms"] * 1e6 == pytest.approx(1000)
    assert kb[(PID_B, "graph_k")]["call_count"] == 2
    sb = rows_by(r["tables"]["sync_by_pid"], ("pid", "api_name"))
    assert sb[(PID_A, "cudaDeviceSynchronize_v3020")]["total_time_ms"] * 1e6 == pytest.approx(300)
    assert sb[(PID_B, "cudaStreamSynchronize_v3020")]["total_time_ms"] * 1e6 == pytest.approx(500)
    nb = rows_by(r["tables"]["nvtx_by_pid"], ("pid", "range_name"))
    assert nb[(PID_B, "decode")]["attributed_kernel_time_ms"] * 1e6 == pytest.approx(1190)
    assert nb[(PID_B, "decode")]["pid_attribution_coverage_pct"] == pytest.approx(100.0)
    assert nb[(PID_A, "prefill")]["pid_attribution_coverage_pct"] == pytest.approx(100 * 350 / 910, abs=1e-3)
    assert any("worst PID 1000" in w for w in r["warnings"])


def test_launch_latency_and_memory_ops(trace):
    r = analyze_nsys_extras(trace, None, AnalyzeOptions())
    ll = rows_by(r["tables"]["launch_latency"], "api_name")
    cl = ll["cudaLaunchKernel_v7000"]
    assert cl["launches"] == 5 and cl["queued_launches"] == 5
    assert cl["queue_avg_us"] == pytest.approx((90 + 140 + 90 + 10 + 990) / 5 / 1e3)
    assert cl["api_total_ms"] * 1e6 == pytest.approx(50)
    g = ll["cudaGraphLaunch_v10000"]
    assert g["queue_max_us"] == pytest.approx(1.080) and g["kernel_total_ms"] * 1e6 == pytest.approx(90)
    assert ll["cuLaunchKernelEx"]["queue_avg_us"] == pytest.approx(0.09)
    m = r["memory_ops"]
    assert m["pageable_async_copies"] == 1 and m["pageable_async_bytes"] == 1 << 20
    assert m["sync_copies"] == 1 and m["sync_copy_bytes"] == 4096 and m["sync_copy_api_ms"] * 1e6 == pytest.approx(300)
    assert m["sync_memsets"] == 1 and m["sync_memset_api_ms"] * 1e6 == pytest.approx(100)
    assert any("pageable" in w for w in r["warnings"])
    sa = rows_by(r["tables"]["sync_like_api_names"], "api_name")
    assert sa["cudaStreamSynchronize_v3020"]["call_count"] == 2
    assert sa["cudaStreamSynchronize_v3020"]["max_duration_us"] == pytest.approx(0.5)


def test_pipeline_includes_nsys_steps(trace):
    res = analyze(trace, AnalyzeOptions(phase_map=PHASES))
    for t in ("nvtx_ranges", "nvtx_kernel_time", "kernels_by_pid", "sync_by_pid", "nvtx_by_pid", "launch_latency"):
        assert t in res["tables"], t
    assert not [w for w in res["warnings"] if "failed" in w]
    json.dumps(res)


@pytest.mark.parametrize("path", nsys_params())
def test_real_exports_full_cli(path, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "inferscope", "analyze", str(path), "-o", str(out), "-q"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    res = json.loads((out / "report.json").read_text())
    assert (out / "tables" / "kernels_by_pid.csv").exists() and (out / "tables" / "launch_latency.csv").exists()
    if "memfusion" in path.name:
        assert res["nvtx"]["attribution"]["coverage_pct"] == pytest.approx(100.0)
        assert (out / "tables" / "nvtx_ranges.csv").exists()
    if "p4arth" in path.name:
        assert res["nsys_extras"]["memory_ops"]["sync_copies"] == 3
        assert any(row[0] == "cudaDeviceSynchronize_v3020" for row in res["tables"]["sync_like_api_names"]["rows"])
