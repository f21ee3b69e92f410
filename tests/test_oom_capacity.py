"""OOM without an exception (issue 46, seed 002 "Unexpected OOM: overcommitted GPU memory"): finding ``oom`` when
device memory reaches thresholds.OOM_CAPACITY_PCT of the device total.

Planted Kineto traces: one GPU of a known total (``deviceProperties.totalGlobalMem``), a few kernels, and the
profiler's ``[memory]`` instants whose ``Total Reserved`` climbs to a chosen share of that total.  No range fails.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from inferscope import thresholds as T
from inferscope.analyze.options import AnalyzeOptions
from inferscope.analyze.pipeline import analyze
from inferscope.ingest import load_trace

TOTAL = 80 * 2 ** 30


def _trace(tmp_path, peak_frac: float, name="t.json"):
    ev = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 10.0 + 100 * i, "dur": 50.0,
           "args": {"External id": i + 1}} for i in range(10)]
    ev += [{"ph": "X", "cat": "kernel", "name": "gemm_kernel", "pid": 0, "tid": 7, "ts": 20.0 + 100 * i, "dur": 80.0,
            "args": {"device": 0, "stream": 7, "correlation": 100 + i, "External id": i + 1}} for i in range(10)]
    reserved = [int(TOTAL * peak_frac * (i + 1) / 10) for i in range(10)]
    ev += [{"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 1, "tid": 1, "ts": 15.0 + 100 * i,
            "args": {"Total Reserved": r, "Total Allocated": r // 2, "Bytes": 1024, "Device Id": 0, "Device Type": 1}}
           for i, r in enumerate(reserved)]
    d = {"traceEvents": ev, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3", "totalGlobalMem": TOTAL}]}
    p = tmp_path / name
    p.write_text(json.dumps(d))
    return p, max(reserved)


def _oom(res):
    return next((f for f in res["findings"] if f["id"] == "oom"), None)


def test_reserved_memory_near_capacity_is_an_oom_finding(tmp_path):
    p, peak = _trace(tmp_path, 0.97)
    res = analyze(load_trace(p), AnalyzeOptions(window="all"))
    g = res["counters"]["gpu_memory"]
    assert len(g) == 1 and g[0]["metric"] == "gpu.mem_reserved_bytes"
    assert g[0]["peak_bytes"] == peak and g[0]["total_bytes"] == TOTAL
    assert g[0]["peak_pct"] == pytest.approx(100.0 * peak / TOTAL)
    f = _oom(res)
    assert f is not None and f["severity"] == "high"
    assert f["evidence"]["gpu_mem_peak_pct"] == pytest.approx(round(100.0 * peak / TOTAL, 2))
    assert f["evidence"]["gpu_mem_peak_bytes"] == peak and f["evidence"]["gpu_mem_total_bytes"] == TOTAL
    assert "reserved" in f["evidence_text"][0] and "offload" in f["suggestion"] and "quantize" in f["suggestion"]
    assert "batch size" in f["suggestion"]


def _ids(res):
    return [f["id"] for f in res["findings"]]


def test_capacity_is_one_finding_not_two(tmp_path):
    """At capacity oom and gpu_memory_pressure would state the same peak: only oom, with the headroom."""
    p, peak = _trace(tmp_path, 0.97)
    res = analyze(load_trace(p), AnalyzeOptions(window="all"))
    ids = _ids(res)
    assert ids.count("oom") == 1 and "gpu_memory_pressure" not in ids
    assert _oom(res)["evidence"]["gpu_mem_headroom_bytes"] == TOTAL - peak


@pytest.mark.parametrize("frac", [0.90, (T.OOM_CAPACITY_PCT - 0.5) / 100])
def test_below_capacity_above_warn_is_memory_pressure(tmp_path, frac):
    p, peak = _trace(tmp_path, frac)
    assert T.GPU_MEMORY_WARN_PCT <= 100.0 * peak / TOTAL < T.OOM_CAPACITY_PCT
    res = analyze(load_trace(p), AnalyzeOptions(window="all"))
    f = next(f for f in res["findings"] if f["id"] == "gpu_memory_pressure")
    assert _oom(res) is None and f["severity"] == "medium"
    assert f["evidence"]["peak_bytes"] == peak and f["evidence"]["headroom_bytes"] == TOTAL - peak
    assert f["evidence"]["peak_pct"] == pytest.approx(round(100.0 * peak / TOTAL, 2))


def test_half_full_memory_is_no_oom_finding(tmp_path):
    p, peak = _trace(tmp_path, 0.5)
    res = analyze(load_trace(p), AnalyzeOptions(window="all"))
    assert res["counters"]["gpu_memory"][0]["peak_pct"] == pytest.approx(50.0)
    assert _oom(res) is None
    assert "gpu_memory_pressure" not in {f["id"] for f in res["findings"]}


def test_just_below_the_threshold_is_no_oom_finding(tmp_path):
    p, _ = _trace(tmp_path, (T.OOM_CAPACITY_PCT - 0.5) / 100)
    assert _oom(analyze(load_trace(p), AnalyzeOptions(window="all"))) is None


def test_cli_report_names_the_finding(tmp_path):
    p, _ = _trace(tmp_path, 0.99)
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, "-m", "inferscope", "analyze", str(p), "--window", "all", "-o", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    rep = json.loads((out / "report.json").read_text())
    assert _oom(rep) is not None
