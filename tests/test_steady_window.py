"""Issue 45: the default (steady-state) window is never cut to something less informative than the whole
trace (analyze/steady.py's first-step evidence and guards, analyze/run_phases.py)."""
import numpy as np
import pytest

from conftest import kineto_params
from helpers import Synth
from inferscope import thresholds as T
from inferscope.analyze.options import AnalyzeOptions
from inferscope.analyze.pipeline import analyze
from inferscope.analyze.run_phases import run_phases
from inferscope.ingest import load_trace
from inferscope.report.markdown import render_markdown
from inferscope.trace import SpanKind
from inferscope.result import from_dict


def _other_pct(res):
    return next(r["pct"] for r in res["breakdown"] if r["category"] == "other")


@pytest.mark.shared
@pytest.mark.parametrize("path", kineto_params())
def test_default_window_no_less_informative_than_whole_trace(path):
    tr = load_trace(path)
    full = analyze(tr, AnalyzeOptions(window="all"))
    res = analyze(tr)
    rp = res["run_phases"]
    assert _other_pct(res) <= _other_pct(full) + T.STEADY_MAX_OTHER_RISE_PCT, (res["window"], _other_pct(res), _other_pct(full))
    if res["verdict"]["id"] != full["verdict"]["id"]:
        # only a cut justified by >= 3 complete steady steps may change the verdict, and the report says so
        s = tr.spans
        st = (s.kind == SpanKind.STEP) & (s.start_ns >= res["window"]["start_ns"]) & (s.end_ns <= res["window"]["end_ns"])
        assert rp["cut"] and rp["steady_steps"] == int(st.sum()) >= T.STEADY_MIN_STEPS, rp
        assert f"{rp['steady_steps']} complete steady steps remain" in rp["justification"]
        assert rp["justification"] in render_markdown(from_dict(res))
    if res["window"]["kind"] == "trace":
        assert (res["window"]["start_ns"], res["window"]["end_ns"]) == (full["window"]["start_ns"], full["window"]["end_ns"])


def _stepped(durations_us, first_extra=(), ops_per_step=4, gap_us=50):
    """Steps back to back (ProfilerStep#k), each holding `ops_per_step` aten::mm ops and launches that
    fill it (10 us host gaps), plus `first_extra` (name, dur_us) calls at the start of step 1."""
    t = Synth()
    at = 0
    for k, d in enumerate(durations_us):
        t.span(SpanKind.STEP, f"ProfilerStep#{k + 1}", at, at + d)
        cur = at + 5
        if k == 0:
            for name, dur in first_extra:
                t.span(SpanKind.CPU_OP, name, cur, cur + dur)
                cur += dur + 5
        rest = at + d - 5 - cur
        op = max(1, rest // ops_per_step - 10)
        for j in range(ops_per_step):
            t.span(SpanKind.CPU_OP, "aten::mm", cur, cur + op)
            t.launch(cur + 1, cur + 3, cur + 3, cur + op, name="gemm")
            cur += op + 10
        at += d + gap_us
    return t.done()


def test_one_slow_op_in_step_one_does_not_cut():
    # step 1 is 4x the others, all of it one slow aten::mm (an op every step runs): load, not start-up
    tr = _stepped([4000, 1000, 1000, 1000, 1000], ops_per_step=1)
    s = tr.spans
    d = (s.end_ns - s.start_ns)[s.kind == SpanKind.STEP]
    assert d[0] > T.STARTUP_STEP_OUTLIER_FACTOR * np.median(d[1:])        # the duration rule alone would cut
    rp = run_phases(tr)
    assert not rp["cut"] and rp["startup"] is None
    assert rp["not_cut"][0]["rule"] == "first_step" and "a slow step, not start-up" in rp["not_cut"][0]["reason"]
    res = analyze(tr)
    assert res["window"]["kind"] == "trace" and "not cut" in res["window"]["label"]


def test_warm_up_step_with_one_off_work_is_cut():
    # step 1: 3,000 us of work no later step runs (module load, autotuning) + the usual ops; 4 later steps
    tr = _stepped([4000, 1000, 1000, 1000, 1000], first_extra=[("cuModuleLoadData", 1800), ("cudnnFind", 1200)])
    rp = run_phases(tr)
    assert rp["cut"] and rp["startup"]["rule"].startswith("first_step")
    s = tr.spans
    steps = np.flatnonzero(s.kind == SpanKind.STEP)
    assert rp["steady_start_ns"] == int(s.end_ns[steps[0]])
    assert rp["steady_steps"] == 4 and "4 complete steady steps remain" in rp["justification"]
    assert "cuModuleLoadData" in rp["startup"]["rule"]
    res = analyze(tr)
    assert res["window"]["kind"] == "steady" and "4 steady steps remain" in res["window"]["label"]
    md = render_markdown(from_dict(res))
    assert "Why the cut is safe" in md and rp["justification"] in md


@pytest.mark.parametrize("later", [1, 2])
def test_too_few_steps_left_no_cut(later):
    tr = _stepped([4000] + [1000] * later, first_extra=[("cuModuleLoadData", 1800), ("cudnnFind", 1200)])
    rp = run_phases(tr)
    assert not rp["cut"] and rp["startup"] is None
    assert rp["not_cut"][0]["reason"].startswith(f"only {later} complete step")
    res = analyze(tr)
    lo, hi = tr.bounds_ns()
    assert (res["window"]["start_ns"], res["window"]["end_ns"]) == (lo, hi)
    assert "not cut: only" in res["window"]["label"]


def test_cut_leaving_mostly_gaps_is_refused():
    # a step-less trace: 100 ms of one-off start-up call, then sparse 1 us ops in 10 ms (99 % gaps)
    t = Synth()
    t.span(SpanKind.RUNTIME, "cudaFree", 0, 100_000)
    for k in range(10):
        t.launch(100_000 + k * 1000, 100_000 + k * 1000 + 1, 100_000 + k * 1000 + 1, 100_000 + k * 1000 + 2)
    rp = run_phases(t.done())
    assert not rp["cut"] and "unattributed ('other')" in rp["not_cut"][0]["reason"]


def test_scoped_requests_are_never_cut():
    """A slow first request stays in the scope window: its latency belongs in the percentiles."""
    from inferscope.analyze.run_phases import run_phases
    from inferscope.analyze.window import SCOPE_CAT, resolve_window
    for name, detail in (("request", None), ("serve", '{"request":true,"generated_tokens":4,"batch":1}'), ("step", None)):
        t = Synth()
        cat = t.b.strings.intern(SCOPE_CAT)
        det = t.b.strings.intern(detail) if detail else -1
        at = 0
        for k, d in enumerate([5000, 1000, 1000, 1000, 1000]):
            t.span(SpanKind.ANNOTATION, name, at, at + d, cat=cat, detail=det)
            t.span(SpanKind.CPU_OP, "aten::mm", at + 1, at + d - 1)
            at += d + 10
        tr = t.done()
        w = resolve_window(tr, None, run_phases(tr))
        if name == "step":       # not a request: the warm-up call is still left out
            assert "warm-up call" in w.label and w.start_ns == 5_010_000
        else:
            assert w.start_ns == 0 and "warm-up" not in w.label, w
