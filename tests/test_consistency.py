"""Cross-section consistency on every real trace (shared, or the vendored copies on a fresh clone):
one report never says two things about one quantity.

* the HTML strip draws the breakdown's classes, and its partition lane's per-class totals are
  the breakdown's, to the nanosecond;
* the sync table adds up to the sync calls, whose union is exactly the breakdown's sync_wait
  input; the per-process sync table counts the same calls;
* one kernel-time rule: kernels, per_pid and nvtx agree;
* every number in a finding equals the result value it cites; no finding contradicts another or
  the verdict; window-time evidence never exceeds the window;
* phases come only from explicit names.
"""
import gzip
import json
import math
import re

import numpy as np
import pytest

from conftest import kineto_params, nsys_params, shared_path
from inferscope import thresholds as T
from inferscope.analyze import breakdown as B
from inferscope.analyze.diagnosis import get_path
from inferscope.analyze.intervals import clip, total
from inferscope.analyze.phases import phase_matcher
from inferscope.analyze.pipeline import analyze
from inferscope.analyze.window import Window
from inferscope.ingest import load_trace
from inferscope.analyze import timeline_summary as tls
from inferscope.report.html_assets import CATEGORY_COLOURS, CLASSES

_CACHE: dict = {}


def loaded(path):
    if path not in _CACHE:
        tr = load_trace(path)
        _CACHE.clear()          # keep one trace in memory
        _CACHE[path] = (tr, analyze(tr))
    return _CACHE[path]


PARAMS = kineto_params() + nsys_params()


@pytest.mark.parametrize("path", PARAMS)
def test_strip_classes_are_the_breakdown(path):
    trace, res = loaded(path)
    assert [c[0] for c in CLASSES] == list(B.CATEGORIES)
    w = res["window"]
    summ = tls.summarise(trace, w["start_ns"], w["end_ns"], n_bins=500)
    want = {r["category"]: r["ns"] for r in res["breakdown"]}
    assert summ.partition.class_ns == want
    # per-track lanes draw only breakdown classes; a span's class is its breakdown source
    cats = B.span_categories(trace)
    assert set(np.unique(cats).tolist()) <= set(range(-1, len(B.CATEGORIES)))
    for ln in summ.lanes:
        assert set(ln.class_ms) <= set(B.CATEGORIES)


@pytest.mark.parametrize("path", PARAMS)
def test_sync_table_is_the_sync_wait_input(path):
    trace, res = loaded(path)
    sy = res["syncs"]
    w = Window(res["window"]["start_ns"], res["window"]["end_ns"])
    st, en = B.source_intervals(trace)["sync"]
    union_ns = total(*clip(st, en, w.start_ns, w.end_ns))
    assert sy["blocked_ms"] == pytest.approx(union_ns / 1e6, abs=1e-9)
    assert B.share(res["breakdown"], "sync_wait") <= sy["blocked_pct"] + 1e-9
    rows = (res["tables"].get("syncs") or {"rows": []})["rows"]
    assert sum(r[3] for r in rows) == pytest.approx(sy["calls_sum_ms"], abs=1e-6 * max(1, len(rows)))
    assert sum(r[2] for r in rows) == sy["count"]
    assert sum(r["count"] for r in sy["by_api"]) == sy["count"]
    if "per_pid" in res:
        assert res["per_pid"]["sync_calls_sum_ms"] == pytest.approx(sy["calls_sum_ms"], abs=1e-5)
    # the name view is clearly apart and never called blocked time
    assert "sync_apis" not in res["tables"]


@pytest.mark.parametrize("path", PARAMS)
def test_one_kernel_time_rule(path):
    trace, res = loaded(path)
    k = res["kernels"]
    ks = k.get("kernel_sum_ms", 0.0)
    if "per_pid" in res and res["per_pid"]["pids"]:
        assert sum(p["kernel_sum_ms"] for p in res["per_pid"]["pids"]) == pytest.approx(ks, abs=1e-5)
    att = (res.get("nvtx") or {}).get("attribution") or {}
    if "kernel_sum_ms" in att:
        assert att["kernel_sum_ms"] == pytest.approx(ks, abs=1e-5)
    if res["gpu"] is not None:
        g = res["gpu"]
        assert g["kernel_busy_ms"] <= ks + 1e-6 and g["kernel_busy_ms"] <= res["e2e_ms"] + 1e-6
        assert g["busy_ms"] <= res["e2e_ms"] + 1e-6
        # exposed communication (the breakdown) = communication busy minus its overlap with compute
        comm_cat = next(r for r in res["breakdown"] if r["category"] == "gpu_communication")["ms"]
        assert comm_cat == pytest.approx(g["comm_kernel_busy_ms"] - g["compute_comm_overlap_ms"], abs=1e-6)
        if k["classes"]:
            comm = sum(r["ms"] for r in k["classes"] if r["class"] == "communication")
            assert (comm > 0) == (g["comm_kernel_busy_ms"] > 0)


def _close(a, b):
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(float(a), float(b), rel_tol=1e-6, abs_tol=0.006)
    return a == b


PER_FINDING_KEYS = {"culprit", "culprit_ms", "culprit_pct", "culprit_class", "culprit_thread"}


@pytest.mark.parametrize("path", PARAMS)
def test_findings_cite_their_tables_and_agree(path):
    trace, res = loaded(path)
    meaning: dict[str, str] = {}
    for f in res["findings"]:
        src, der = f["evidence_source"], f["evidence_derived"]
        for key, val in f["evidence"].items():
            assert key in src or key in der, (f["id"], key)
            if key in src:
                cited = get_path(res, src[key])
                assert cited is not None or val in (None, 0, 0.0), (f["id"], key, src[key])
                if cited is not None:
                    assert _close(val, cited), (f["id"], key, val, src[key], cited)
                # one meaning per name, across findings (a finding's own culprit, `culprit`/`culprit_ms`..., is
                # by definition per finding: each names what carries it)
                if key not in PER_FINDING_KEYS:
                    assert meaning.setdefault(key, src[key]) == src[key], (key, meaning[key], src[key])
            # window-time evidence never exceeds the window (stream-time and sums say so in the name)
            if key.endswith("_ms") and "stream" not in key and "sum" not in key and isinstance(val, (int, float)):
                assert val <= res["e2e_ms"] + 0.01, (f["id"], key, val)
        for t in f["evidence_text"]:    # per-stream sums are labelled as such, never as window time
            if "per-stream" in t.lower() or "summed over" in t:
                assert "stream-time" in t or "summed over streams" in t, t


SUPPORT = {"sync_bound": {"sync_stall"}, "cpu_bound": {"cpu_preprocessing"}, "gpu_bound": {"gpu_compute_bound"},
           "launch_bound": {"launch_storm", "host_launch_bound"}, "waiting_bound": {"host_waiting"},
           "cpu_compute_bound": {"cpu_compute"}, "framework_bound": {"framework_overhead"},
           "communication_bound": {"gpu_communication"}, "init_bound": {"warmup_in_window"}}


@pytest.mark.parametrize("path", PARAMS)
def test_no_finding_contradicts_another(path):
    trace, res = loaded(path)
    f = {x["id"]: x for x in res["findings"]}
    v = res["verdict"]["id"]
    if v in SUPPORT:
        assert SUPPORT[v] & set(f), (v, sorted(f))
        assert any(f[i]["severity"] in ("high", "medium") for i in SUPPORT[v] & set(f)), (v, sorted(f))
    sy = res["syncs"]
    e2e = res["e2e_ms"]
    # pageable copies that block the host are rated as the sync they are
    pg_pct = 100.0 * sy.get("pageable_copy_calls_sum_ms", 0.0) / e2e if e2e else 0.0
    if pg_pct >= T.PAGEABLE_COPY_MIN_PCT:
        assert f["pageable_copy"]["severity"] in ("medium", "high")
    if pg_pct >= T.SYNC_STALL_HIGH_PCT:
        assert f["pageable_copy"]["severity"] == "high"
    if "sync_stall" in f and "pageable_copy" in f:
        assert f["sync_stall"]["evidence"]["pageable_copy_calls_sum_ms"] == \
            f["pageable_copy"]["evidence"]["pageable_copy_calls_sum_ms"]
    # gpu_idle and a GPU-bound verdict cannot both be strong
    if v == "gpu_bound" and "gpu_idle" in f:
        assert f["gpu_idle"]["severity"] != "high"
    if "framework_overhead" in f:
        assert "host_launch_bound" not in f


@pytest.mark.parametrize("path", PARAMS)
def test_phases_only_from_explicit_names(path):
    trace, res = loaded(path)
    match = phase_matcher(None)
    for p in res["phases"]["phases"]:
        for m in p["mapped_from"]:
            assert match(m["name"]) == (p["phase"], m["rule"])
            assert re.match(p["phase"], m["name"].strip(), re.I)


def test_nccl_trace_has_a_communication_category():
    """HTA's A100 rank with NCCL send/recv: communication is its own category, recounted from the JSON."""
    path = shared_path("kineto", "hta_negative_queue_a100_80gb_rank0.json.gz")
    trace, res = loaded(path)
    with gzip.open(path, "rt") as fh:
        doc = json.load(fh)
    iv = sorted((round(e["ts"] * 1000), round((e["ts"] + e["dur"]) * 1000)) for e in doc["traceEvents"]
                if e.get("ph") == "X" and e.get("cat") == "kernel" and "nccl" in e.get("name", "").lower())
    busy, cur = 0, None
    for s, t in iv:
        if cur is None or s > cur[1]:
            busy += (cur[1] - cur[0]) if cur else 0
            cur = [s, t]
        else:
            cur[1] = max(cur[1], t)
    busy += (cur[1] - cur[0]) if cur else 0
    g = res["gpu"]
    assert g["comm_kernel_busy_ms"] == pytest.approx(busy / 1e6, abs=0.01)
    cats = {r["category"]: r for r in res["breakdown"]}
    assert cats["gpu_communication"]["pct"] > 5
    comm = {r["class"]: r for r in res["kernels"]["classes"]}["communication"]
    assert 40 < comm["share_pct"] < 55           # NCCL send/recv: ~47 % of kernel time
    assert 0 <= g["compute_comm_overlap_pct"] <= 100
    assert "gpu_communication" in {x["id"] for x in res["findings"]}


def test_html_strip_draws_the_partition_lane(tmp_path):
    from inferscope.report import get_renderer
    path = shared_path("kineto", "hta_cuda_event_sync_a100.json.gz")
    trace, res = loaded(path)
    out = tmp_path / "r.html"
    from helpers import as_report
    get_renderer("html")(as_report(res, trace, ["html"]), trace, out)
    html = out.read_text(encoding="utf-8")
    assert "all (breakdown)" in html
    # the strip's legend uses the breakdown's labels and colours
    for r in res["breakdown"]:
        if r["ns"]:
            assert B.CATEGORY_LABELS[r["category"]] in html and CATEGORY_COLOURS[r["category"]] in html


# a finding names what carries it: (evidence key of the name, evidence key of its time)
CULPRIT_KEYS = (("culprit", "culprit_ms"), ("top_kernel", "top_kernel_sum_ms"), ("launch_api", "launch_api_ms"),
                ("copy_api", "copy_api_ms"), ("comm_kernel", "comm_kernel_ms"), ("largest_recorded", "largest_recorded_ms"),
                ("top_sync_api", "top_sync_api_ms"), ("top_pageable_copy_api", "top_pageable_copy_api_ms"),
                ("longest_call", "longest_call_ms"))


@pytest.mark.parametrize("path", PARAMS)
def test_every_finding_names_a_culprit_with_its_time(path):
    _, res = loaded(path)
    for f in res["findings"]:
        named = [(k, t) for k, t in CULPRIT_KEYS if f["evidence"].get(k) and t in f["evidence"]]
        assert named, (f["id"], sorted(f["evidence"]))
        k, t = named[0]
        assert f["evidence"][t] > 0, (f["id"], k)
        # the name is cited from a culprit/kernel/sync/copy/one-off table of the result
        assert get_path(res, f["evidence_source"][k]) == f["evidence"][k]


@pytest.mark.parametrize("path", PARAMS)
def test_no_verdict_or_finding_contradicts_the_window(path):
    """One start-up rule (issue 24): a window that already leaves start-up out (steady state, cut) is
    never called start-up work (warmup_in_window) nor init_bound; the one-off calls in any window are
    the same rule's calls (analyze/run_phases.startup_calls), so a steady window holds none."""
    trace, res = loaded(path)
    ids = {f["id"] for f in res["findings"]}
    rp = res["run_phases"]
    if res["window"]["kind"] == "steady" and rp["startup"] is not None:
        assert res["one_off_calls"]["count"] == 0, res["one_off_calls"]["calls"]
        assert "warmup_in_window" not in ids and res["verdict"]["id"] != "init_bound", (res["verdict"]["id"], sorted(ids))
    if res["window"]["kind"] == "trace" and not rp["cut"] and not rp["not_cut"]:
        # nothing was found to cut: the same rule finds no start-up calls in the whole trace either
        # (a start-up found but kept, run_phases' not_cut, may decide the verdict: issue 45)
        assert res["verdict"]["id"] != "init_bound", res["one_off_calls"]
