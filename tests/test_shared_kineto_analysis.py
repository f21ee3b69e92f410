"""Issue 2 acceptance on every real Kineto capture in ../shared/traces/kineto.

Ground truth is computed here straight from the JSON with the standard library,
independently of the importer and the analyses.
"""
import gzip
import json
from decimal import Decimal

import pytest

from conftest import kineto_params, shared_path
from inferscope.analyze.options import AnalyzeOptions
from inferscope.analyze.pipeline import analyze
from inferscope.ingest import load_trace

GPU_CATS = {"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset"}


def independent_gpu_busy(path):
    with gzip.open(path, "rt") as f:
        doc = json.load(f, parse_float=Decimal)
    ev = doc["traceEvents"] if isinstance(doc, dict) else doc
    lo = hi = None
    iv = []
    for e in ev:
        if e.get("ph") != "X" or e.get("cat") == "Trace":
            continue
        ts = Decimal(e["ts"]) * 1000
        dur = Decimal(e.get("dur", 0)) * 1000
        if dur <= 0:
            continue
        s, t = int(ts.to_integral_value()), int((ts + dur).to_integral_value())
        lo = s if lo is None else min(lo, s)
        hi = t if hi is None else max(hi, t)
        if e.get("cat") in GPU_CATS:
            iv.append((s, t))
    iv.sort()
    busy = 0
    cur_s = cur_e = None
    for s, t in iv:
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                busy += cur_e - cur_s
            cur_s, cur_e = s, t
        else:
            cur_e = max(cur_e, t)
    if cur_e is not None:
        busy += cur_e - cur_s
    return lo, hi, busy


@pytest.mark.parametrize("path", kineto_params())
def test_breakdown_adds_up_and_gpu_busy_matches_json(path):
    trace = load_trace(path)
    res = analyze(trace, AnalyzeOptions(window="all"))   # recounted over the whole trace
    e2e = res["e2e_ms"]
    assert e2e > 0
    total = sum(r["ms"] for r in res["breakdown"])
    assert abs(total - e2e) <= 0.001 * e2e
    assert abs(sum(r["pct"] for r in res["breakdown"]) - 100.0) < 0.1
    lo, hi, busy = independent_gpu_busy(path)
    assert abs(res["e2e_ms"] - (hi - lo) / 1e6) <= 0.001 * e2e
    if busy == 0:
        assert res["gpu"] is None
        return
    idle_pct = 100.0 * (hi - lo - busy) / (hi - lo)
    assert res["gpu"]["idle_pct"] == pytest.approx(idle_pct, abs=0.1)
    assert res["gpu"]["busy_ms"] == pytest.approx(busy / 1e6, rel=1e-3, abs=1e-3)
    json.dumps(res, allow_nan=False)  # the result is valid JSON
    ids = {f["id"] for f in res["findings"]}
    assert all(f["suggestion"] and f["evidence"] for f in res["findings"]), ids


def test_h100_qwen_names_dominant_cause_with_checkable_evidence():
    path = shared_path("kineto", "tracelens_h100_qwen1.5-0.5b-chat_textgen.json.gz")
    res = analyze(load_trace(path))
    assert res["verdict"]["id"] == "gpu_bound"
    f = {x["id"]: x for x in res["findings"]}["gpu_compute_bound"]
    # evidence a reader can check: the top kernel and its share agree with the kernel table
    top = res["kernels"]["top"][0]
    assert f["evidence"]["top_kernel"] == top["name"][:200]
    assert "gemm" in top["name"]
    assert f["evidence"]["gpu_compute_pct"] > 80
    # independent: kernel time share of the top kernel from the JSON
    with gzip.open(path, "rt") as fh:
        ev = json.load(fh)["traceEvents"]
    kt = [e for e in ev if e.get("cat") == "kernel"]
    tot = sum(e["dur"] for e in kt)
    mine = sum(e["dur"] for e in kt if e["name"] == top["name"])
    assert top["share_pct"] == pytest.approx(100 * mine / tot, abs=0.01)


def test_a100_pageable_copies_and_syncs_found():
    res = analyze(load_trace(shared_path("kineto", "hta_negative_queue_a100_80gb_rank0.json.gz")))
    ids = {f["id"]: f for f in res["findings"]}
    assert "pageable_copy" in ids and ids["pageable_copy"]["evidence"]["pageable_copies"] > 0
    assert "sync_stall" in ids
    assert res["verdict"]["id"] == "sync_bound"
    apis = {r["api"] for r in res["syncs"]["top"]}
    assert "cudaMemcpyAsync (pageable copy)" in apis and "cudaStreamSynchronize" in apis

    tr2 = load_trace(shared_path("kineto", "hta_critical_path_alexnet_a100.json.gz"))
    res2 = analyze(tr2, AnalyzeOptions(window="all"))
    ids2 = {f["id"]: f for f in res2["findings"]}
    assert ids2["pageable_copy"]["evidence"]["pageable_copies"] == 16
    # the start-up rules find 43.3 s of start-up (cudaDeviceGetStreamPriorityRange 29.9 s, cudnn autotuning,
    # cudaFree, ... issue 24), but the 94 ms left was 60 % 'other' against 0.2 % over the whole trace (issue 45;
    # this test used to assert that cut): the default window is the whole trace, and says why
    steady = analyze(tr2)
    rp = steady["run_phases"]
    assert steady["window"]["kind"] == "trace" and not rp["cut"] and rp["not_cut"][0]["ms"] > 41_000
    assert "unattributed ('other')" in rp["not_cut"][0]["reason"]
    assert steady["verdict"]["id"] == res2["verdict"]["id"] == "init_bound"
    assert res2["syncs"]["by_api"][0]["count"] >= 16
    res3 = analyze(load_trace(shared_path("kineto", "hta_trace_diff_control_a100_rank3.json.gz")))
    assert {r["api"] for r in res3["syncs"]["top"]} >= {"cudaStreamSynchronize"}
    assert "pageable_copy" in {f["id"] for f in res3["findings"]}


def test_window_on_a_real_step_and_phase_map(tmp_path):
    from inferscope.analyze.options import AnalyzeOptions
    tr = load_trace(shared_path("kineto", "hta_negative_queue_a100_80gb_rank0.json.gz"))
    full = analyze(tr)
    step = full["phases"]["steps"][1]
    res = analyze(tr, AnalyzeOptions(window=step["name"]))
    assert res["window"]["kind"] == "step"
    assert res["e2e_ms"] == pytest.approx(step["wall_ms"], abs=1e-6)
    assert sum(r["ms"] for r in res["breakdown"]) == pytest.approx(res["e2e_ms"], rel=1e-9)
    assert res["verdict"]["id"] == "sync_bound"   # the pageable copy blocks the host every step
    tr2 = load_trace(shared_path("kineto", "hta_gpu_user_annotation_gp100.json.gz"))
    res2 = analyze(tr2, AnalyzeOptions(phase_map={"optimizer": ["Optimizer."], "zero": ["zero_grad"]}))
    phases = {p["phase"]: p for p in res2["phases"]["phases"]}
    ranges = {r["name"]: r for r in res2["phases"]["ranges"]}
    assert phases["optimizer"]["ranges"] == ranges["Optimizer.step#SGD.step"]["count"] + ranges["Optimizer.zero_grad#SGD.zero_grad"]["count"]
    assert 0 < res2["phases"]["gpu_attribution_coverage_pct"] <= 100
