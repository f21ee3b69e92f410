"""What-if predictions (analyze/whatif.py) on planted traces whose saving is known by construction, the
ranking, the combined estimate, and diff closing the loop (compare/whatif.py)."""
import pytest

from inferscope import thresholds as T
from inferscope.analyze import whatif as W
from inferscope.analyze.pipeline import analyze
from inferscope.compare import Side, diff_sides
from inferscope.trace import MemKind, SpanKind
from inferscope.result import from_dict

from helpers import Synth


def finding(res: dict, fid: str):
    return next((f for f in res["findings"] if f["id"] == fid), None)


def sync_trace(sync_ms: float = 50.0):
    """150 ms of host work with a kernel, then (sync_ms > 0) a cudaDeviceSynchronize of sync_ms with the GPU idle."""
    t = Synth()
    t.launch(0, 10, 10, 1_000)
    for i in range(150):                           # steady host work: 150 ops of 1 ms (no one-off call)
        t.span(SpanKind.CPU_OP, "aten::add", max(10, 1_000 * i), 1_000 * (i + 1))
    if sync_ms:
        t.span(SpanKind.RUNTIME, "cudaDeviceSynchronize", 150_000, 150_000 + sync_ms * 1e3)
    return t.done()


def test_planted_sync_remove_model():
    res = analyze(sync_trace(50.0))
    assert res["e2e_ms"] == pytest.approx(200.0)
    f = finding(res, "sync_stall")
    assert f["saving_model"] == "remove"
    assert f["expected_saving_ms"] == pytest.approx(50.0)
    assert f["saving_low_ms"] <= 50.0 + 1e-9 <= f["saving_high_ms"] + 2e-9
    assert f["expected_saving_pct"] == pytest.approx(25.0)
    assert f["saving_categories"] == ["sync_wait"]
    assert res["findings"][0]["id"] == "sync_stall"                # the largest predicted saving first
    assert res["what_if"]["findings"][0] == "sync_stall"


def test_not_actionable_findings_have_no_prediction():
    res = analyze(sync_trace(50.0))
    f = finding(res, "gpu_idle")
    assert f is not None and all(f[k] is None for k in W.FIELDS)


def copy_trace(pinned_us: float | None):
    """10 pageable H2D copies of 1 MiB: each call blocks the host 50 us, 10 us of it on the GPU; with
    ``pinned_us``, 10 pinned copies of 1 MiB taking pinned_us each on the GPU."""
    t = Synth()
    for i in range(10):
        a = 100 * i
        t.copy(a, a + 50, a + 40, a + 50, host=MemKind.PAGEABLE, nbytes=1 << 20, api="cudaMemcpy")
    if pinned_us:
        for i in range(10):
            a = 1_000 + 100 * i
            t.copy(a, a + 1, a + 1, a + 1 + pinned_us, host=MemKind.PINNED, nbytes=1 << 20)
    t.span(SpanKind.CPU_OP, "aten::add", 2_000, 2_100)
    return t.done()


def test_pageable_replace_model_measured_pinned_bandwidth():
    res = analyze(copy_trace(4.0))
    f = finding(res, "pageable_copy")
    cost_ms, pinned_ms, pageable_gpu_ms = 10 * 50e-3, 10 * 4e-3, 10 * 10e-3    # planted: 10 x (50 us call, 4 us pinned, 10 us GPU)
    assert f["saving_model"] == "replace"
    assert f["expected_saving_ms"] == pytest.approx(cost_ms - pinned_ms, rel=1e-6)
    assert f["saving_low_ms"] == pytest.approx(cost_ms - pageable_gpu_ms, rel=1e-6)
    assert f["saving_high_ms"] == pytest.approx(cost_ms, rel=1e-6)
    assert "measured" in f["saving_basis"]


def test_pageable_replace_model_documented_ratio():
    res = analyze(copy_trace(None))
    f = finding(res, "pageable_copy")
    want = 10 * 50e-3 - 10 * 10e-3 / T.WHATIF_PINNED_OVER_PAGEABLE_BW_RATIO
    assert f["expected_saving_ms"] == pytest.approx(want, rel=1e-6)
    assert "WHATIF_PINNED_OVER_PAGEABLE_BW_RATIO" in f["saving_basis"]


def small_copy_trace(n: int = 200, bulk: bool = True):
    """n pinned 1 KiB H2D copies every 30 us, each a 20 us blocking call whose copy waits 10 us for the stream (starts
    at +10) and runs 5 us: 10 us of each call is its own; with ``bulk``, then one pinned 64 MiB copy of 6,400 us on the
    GPU (the window's large-copy bandwidth)."""
    t = Synth()
    for i in range(n):
        a = 30 * i
        t.copy(a, a + 20, a + 10, a + 15, host=MemKind.PINNED, nbytes=1024, api="cudaMemcpy")
    if bulk:
        a = 30 * n
        t.copy(a, a + 1, a + 1, a + 6_401, host=MemKind.PINNED, nbytes=64 << 20)
    return t.done()


def test_small_copy_calls_own_time_excludes_only_a_wait_inside_the_call():
    # 150 async 1 KiB copies: 4 us calls whose copies run 40 us later (queued: no wait inside the call, all 4 us its
    # own), and 50 blocking ones whose copy begins 6 us into an 8 us call (6 us waited for earlier GPU work)
    t = Synth()
    for i in range(150):
        a = 100 * i
        t.copy(a, a + 4, a + 44, a + 46, host=MemKind.PINNED, nbytes=1024)
    for i in range(50):
        a = 20_000 + 100 * i
        t.copy(a, a + 8, a + 6, a + 7, host=MemKind.PINNED, nbytes=1024, api="cudaMemcpy")
    sm = analyze(t.done())["copies"]["small"]
    assert sm["calls"] == 200
    assert sm["call_ms"] == pytest.approx((150 * 4 + 50 * 2) / 1e3)
    assert sm["call_wait_ms"] == pytest.approx(50 * 6 / 1e3)
    assert sm["call_p50_us"] == pytest.approx(4.0)


@pytest.mark.parametrize("bulk", [True, False])
def test_small_copies_replace_model_one_coalesced_copy(bulk):
    n = 200
    res = analyze(small_copy_trace(n, bulk))
    sm = res["copies"]["small"]
    assert sm["call_ms"] == pytest.approx(n * 10e-3) and sm["call_wait_ms"] == pytest.approx(n * 10e-3)
    f = finding(res, "small_copies")
    assert f is not None and f["saving_model"] == "replace"
    host = n * 10e-3 - 10e-3                                       # every call's own 10 us but one's
    wire = n * 1024 / ((64 << 20) / 6_400e3) / 1e6 if bulk else 5e-3   # at the large copy's GB/s, else one copy's GPU time
    gpu = n * 5e-3 - wire
    want = max(host, gpu)
    assert want == host
    assert f["expected_saving_ms"] == pytest.approx(want, rel=1e-6)
    assert f["saving_low_ms"] == pytest.approx(want * (1 - T.WHATIF_LAUNCH_RESIDUAL_FRACTION), rel=1e-6)
    assert f["saving_high_ms"] == pytest.approx(n * 10e-3, rel=1e-6)


def test_every_finding_id_has_a_model_or_a_reason():
    """Every id a finding rule can emit (read from the rules' source) is predicted or says why not."""
    import re
    from pathlib import Path
    from inferscope.analyze import whatif_cpu
    src = Path(W.__file__).parent
    ids = {m.group(1) for f in src.glob("*.py") for m in re.finditer(r'\bfinding\(\s*"([a-z_0-9]+)"', f.read_text())}
    assert len(ids) >= 30, ids
    models = set(W.MODELS) | set(whatif_cpu.MODELS)
    assert not models & set(W.NOT_ACTIONABLE), models & set(W.NOT_ACTIONABLE)
    assert ids <= models | set(W.NOT_ACTIONABLE), ids - models - set(W.NOT_ACTIONABLE)
    assert set(W.NOT_ACTIONABLE) <= ids, set(W.NOT_ACTIONABLE) - ids       # no stale entry


def storm_trace(n: int = 200, api_us: float = 5.0):
    """n launches, each a api_us launch call then a 2 us kernel, every 10 us: a launch storm."""
    t = Synth()
    for i in range(n):
        a = 10 * i
        t.launch(a, a + api_us, a + api_us, a + api_us + 2)
    return t.done()


def test_launch_storm_replace_model():
    n, api_us = 200, 5.0
    res = analyze(storm_trace(n, api_us))
    f = finding(res, "launch_storm")
    assert f is not None and f["saving_model"] == "replace"
    assert f["expected_saving_ms"] == pytest.approx(n * api_us / 1e3, rel=1e-6)
    assert f["saving_low_ms"] == pytest.approx(n * api_us / 1e3 * (1 - T.WHATIF_LAUNCH_RESIDUAL_FRACTION), rel=1e-6)
    assert f["saving_low_ms"] <= f["expected_saving_ms"] <= f["saving_high_ms"] <= res["e2e_ms"]


def test_combined_counts_one_quantity_once():
    res = analyze(storm_trace())
    ids = {f["id"] for f in res["findings"] if f["expected_saving_ms"]}
    wi = res["what_if"]
    assert wi["combined_saving_ms"] <= wi["sum_saving_ms"] + 1e-12 and wi["combined_saving_ms"] <= res["e2e_ms"]
    if {"launch_storm", "host_launch_bound"} <= ids:                # the same launches: not counted twice
        assert wi["combined_saving_ms"] == pytest.approx(finding(res, "launch_storm")["expected_saving_ms"])


def test_ranking_by_saving_then_severity():
    t = Synth()                                   # a launch storm (1 ms of launches), then a 5 ms sync with the GPU idle
    for i in range(200):
        t.launch(10 * i, 10 * i + 5, 10 * i + 5, 10 * i + 7)
    t.span(SpanKind.RUNTIME, "cudaDeviceSynchronize", 2_000, 7_000)
    res = analyze(t.done())
    fs = res["findings"]
    pred = [f["expected_saving_ms"] for f in fs if f["expected_saving_ms"]]
    assert pred == sorted(pred, reverse=True) and len(pred) >= 2
    first_null = next(i for i, f in enumerate(fs) if not f["expected_saving_ms"])
    assert all(not f["expected_saving_ms"] for f in fs[first_null:])
    assert fs[0]["id"] == "sync_stall" and fs[0]["expected_saving_ms"] == pytest.approx(5.0)
    wi = res["what_if"]
    assert wi["combined_saving_ms"] <= min(wi["sum_saving_ms"], res["e2e_ms"]) + 1e-12
    # the sync and the launches lie in different categories: they add; host_launch_bound (the same launches) is not added again
    assert wi["combined_saving_ms"] == pytest.approx(5.0 + finding(res, "launch_storm")["expected_saving_ms"])
    assert finding(res, "launch_storm")["expected_saving_ms"] == pytest.approx(200 * 5e-3)


def _bd(**ms):
    return [{"category": c, "ms": v, "pct": v, "parts": []} for c, v in ms.items()]


def test_combined_removes_overlapping_intervals():
    # start-up calls at +10..+40 ms and GC pauses at +20..+40 ms: the pauses lie inside the calls
    res = {"e2e_ms": 100.0, "gpu": None, "breakdown": _bd(framework_overhead=60.0, other=40.0),
           "one_off_calls": {"union_ms": 30.0, "calls": [{"offset_ms": 10.0, "ms": 30.0}]},
           "gc_pauses": {"total_ms": 20.0, "longest": [{"offset_ms": 20.0, "ms": 20.0}]}}
    fs = W.annotate(res, [{"id": "python_gc", "severity": "medium"}, {"id": "warmup_in_window", "severity": "high"}])
    assert [f["id"] for f in fs] == ["warmup_in_window", "python_gc"]
    assert fs[0]["expected_saving_ms"] == 30.0 and fs[1]["expected_saving_ms"] == 20.0
    s = W.summary(res, fs)
    assert s["sum_saving_ms"] == 50.0 and s["combined_saving_ms"] == pytest.approx(30.0)   # the union of the intervals
    # disjoint intervals add up, capped at the categories they draw from
    res["gc_pauses"]["longest"] = [{"offset_ms": 60.0, "ms": 20.0}]
    assert W.summary(res, fs)["combined_saving_ms"] == pytest.approx(50.0)


def test_combined_capped_at_category():
    res = {"e2e_ms": 100.0, "gpu": None, "breakdown": _bd(framework_overhead=10.0, other=5.0),
           "one_off_calls": {"union_ms": 12.0, "calls": []}, "gc_pauses": {"total_ms": 12.0, "longest": []}}
    fs = W.annotate(res, [{"id": "python_gc", "severity": "medium"}, {"id": "warmup_in_window", "severity": "high"}])
    assert W.summary(res, fs)["combined_saving_ms"] == pytest.approx(15.0)       # framework + other, not 24


def _side(trace, name):
    return Side(name, analyze(trace), trace)


def test_diff_saving_materialised():
    d = diff_sides(_side(sync_trace(50.0), "before"), _side(sync_trace(0.0), "after"))
    row = next(r for r in d["predictions"]["rows"] if r["id"] == "sync_stall")
    assert row["measured_ms"] == pytest.approx(50.0)
    assert row["category_measured_ms"] == pytest.approx(50.0)
    assert row["status"] == "materialised" and row["category_status"] == "materialised" and row["resolved"]


def test_diff_saving_not_materialised():
    d = diff_sides(_side(sync_trace(50.0), "before"), _side(sync_trace(50.0), "after"))
    row = next(r for r in d["predictions"]["rows"] if r["id"] == "sync_stall")
    assert row["measured_ms"] == pytest.approx(0.0, abs=1e-9) and row["status"] == "not_materialised"
    assert row["category_status"] == "not_materialised"
    assert not row["resolved"]


def test_diff_renders_predictions():
    from inferscope.report.diff import to_html, to_markdown
    d = diff_sides(_side(sync_trace(50.0), "before"), _side(sync_trace(0.0), "after"))
    assert "sync_stall: predicted ~50.000 ms" in to_markdown(d) and "materialised" in to_html(d)


def test_report_shows_fix_first():
    from inferscope.report.markdown import render_markdown
    res = analyze(sync_trace(50.0))
    md = render_markdown(from_dict(res))
    assert "Fix this first: Host blocked in CPU-GPU synchronisation (sync_stall) - saves ~50.0 ms (25.0 %) [remove, 50.0-50.0 ms]" in md


def step_trace(steps: int, sync_ms: float):
    """``steps`` profiler steps of 40 ms host work (40 ops of 1 ms, a kernel at the start), each ending in a
    sync_ms cudaDeviceSynchronize with the GPU idle."""
    t = Synth()
    a = 0.0
    for s in range(steps):
        step_us = 40_000 + sync_ms * 1e3
        t.span(SpanKind.STEP, f"ProfilerStep#{s}", a, a + step_us)
        t.launch(a, a + 10, a + 10, a + 500)
        for i in range(40):
            t.span(SpanKind.CPU_OP, "aten::add", a + max(10, 1_000 * i), a + 1_000 * (i + 1))
        if sync_ms:
            t.span(SpanKind.RUNTIME, "cudaDeviceSynchronize", a + 40_000, a + step_us)
        a += step_us
    return t.done()


def test_diff_normalised_by_steps():
    """before: 4 steps of 40 ms + a 10 ms sync; after: 8 steps of 40 ms without it.  The after window is twice
    as long, yet per step the sync's 10 ms went: measured = 10 ms x 4 steps = the prediction."""
    before, after = step_trace(4, 10.0), step_trace(8, 0.0)
    d = diff_sides(_side(before, "before"), _side(after, "after"))
    assert d["noise"]["before"]["n"] == 4 and d["noise"]["after"]["n"] == 8
    row = next(r for r in d["predictions"]["rows"] if r["id"] == "sync_stall")
    assert row["predicted_ms"] == pytest.approx(40.0)
    assert row["measured_ms"] == pytest.approx(40.0) and row["category_measured_ms"] == pytest.approx(40.0)
    assert row["status"] == "materialised"


def test_preprocessing_scale_model():
    """100 requests of 0.8 ms tokenization + 0.2 ms model: Amdahl over the default worker count."""
    t = Synth()
    for i in range(100):
        t.span(SpanKind.ANNOTATION, "tokenize", 1_000 * i, 1_000 * i + 800)
        t.span(SpanKind.CPU_OP, "aten::add", 1_000 * i + 800, 1_000 * (i + 1))
    res = analyze(t.done())
    f = finding(res, "cpu_preprocessing")
    tok_ms, n = 100 * 0.8, T.WHATIF_SCALE_DEFAULT_WORKERS
    assert f["saving_model"] == "scale"
    assert f["expected_saving_ms"] == pytest.approx(tok_ms * (1 - 1 / n))
    n_low = 1 + (n - 1) * T.WHATIF_THREAD_SCALING_LOW_EFFICIENCY                # added workers at that efficiency
    assert f["saving_low_ms"] == pytest.approx(tok_ms * (1 - 1 / n_low)) and f["saving_high_ms"] == pytest.approx(tok_ms)
    # a live run's idle cores decide n: the core that runs it now plus the idle ones (2 of 4 idle: 3 workers)
    res["counters"] = {"process_cores": {"cores": 4, "mean_util_pct": 50.0}}
    assert W.predict(res, f)["expected_saving_ms"] == pytest.approx(tok_ms * (1 - 1 / 3))
    res["counters"] = {"process_cores": {"cores": 2, "mean_util_pct": 100.0}}     # no idle core: nothing to gain
    assert W.predict(res, f)["expected_saving_ms"] == pytest.approx(0.0)
    res["counters"] = {"process_cores": {"cores": 2, "mean_util_pct": 54.5}}      # 0.91 of a core idle on average
    assert W.predict(res, f)["expected_saving_ms"] == pytest.approx(tok_ms * (1 - 1 / 1.91))


def test_llm_terms_spread_the_saving_over_requests_and_tokens():
    # 4 requests of 250 ms mean in a 1000 ms window, 400 generated tokens: a 100 ms saving is 25 ms per request and
    # 400 tokens in 0.9 s
    res = {"e2e_ms": 1000.0, "llm": {"requests": 4, "request_ms": {"mean": 250.0}, "tokens": {"generated": 400}}}
    t = W.llm_terms(res, 100.0)
    assert t["expected_saving_request_ms"] == pytest.approx(25.0)
    assert t["expected_tokens_per_s"] == pytest.approx(400 / 0.9)
    # two requests in flight at once (each 1000 ms): each shortens by the whole saving
    res["llm"].update(requests=2, request_ms={"mean": 1000.0})
    assert W.llm_terms(res, 100.0)["expected_saving_request_ms"] == pytest.approx(100.0)
    # serving steps without request boundaries: tokens/s only; no llm section: nothing
    res["llm"].update(requests=0, request_ms={"mean": None})
    assert W.llm_terms(res, 100.0)["expected_saving_request_ms"] is None
    assert W.llm_terms({"e2e_ms": 1000.0, "llm": None}, 100.0) == {"expected_saving_request_ms": None,
                                                                   "expected_tokens_per_s": None}


def test_report_findings_carry_llm_terms_when_the_window_has_tokens():
    res = analyze(sync_trace(50.0))
    f = finding(res, "sync_stall")
    assert f["expected_saving_request_ms"] is None and f["expected_tokens_per_s"] is None     # no llm section


def test_combined_applies_a_scale_prediction_to_what_the_removals_leave():
    # 100 ms of preprocessing holding 60 ms of GC pauses: removing the pauses leaves 40 ms, which 2 workers halve -
    # together 80 ms, not the plain sum 60 + 50 (capped at 100)
    res = {"e2e_ms": 100.0, "gpu": None, "breakdown": _bd(cpu_preprocessing=100.0),
           "counters": {"process_cores": {"cores": 2, "mean_util_pct": 50.0}},
           "gc_pauses": {"total_ms": 60.0, "longest": []}}
    fs = W.annotate(res, [{"id": "python_gc", "severity": "medium"}, {"id": "cpu_preprocessing", "severity": "high"}])
    assert {f["id"]: f["expected_saving_ms"] for f in fs} == {"python_gc": 60.0, "cpu_preprocessing": pytest.approx(50.0)}
    s = W.summary(res, fs)
    assert s["sum_saving_ms"] == pytest.approx(110.0)
    assert s["combined_saving_ms"] == pytest.approx(60.0 + 40.0 * 0.5)
