"""Tokenization split into the native encode and the Python around it (analyze/tokenizer_split.py) and the batching
what-if it feeds (analyze/whatif.py): planted traces whose sampled classes and native-tokenizer counter are known by
construction, so every figure follows from the documented rules."""
import pytest

from inferscope import thresholds as T
from inferscope.analyze.options import AnalyzeOptions
from inferscope.analyze.pipeline import analyze
from inferscope.trace import SpanKind
from inferscope.vocab import NATIVE_TOKENIZER_METRIC

from helpers import Synth, add_counter


def finding(res: dict, fid: str):
    return next((f for f in res["findings"] if f["id"] == fid), None)


def tokenizer_trace(native_s: list[float], counter_ts_ms: list[float], tok_ms: float = 800.0, total_ms: float = 1000.0):
    """``tok_ms`` of sampled tokenization, then model compute to ``total_ms``; the native-tokenizer counter (cumulative
    seconds) at the given times."""
    t = Synth()
    t.span(SpanKind.CPU_SAMPLE, "tokenization", 0, tok_ms * 1e3)
    t.span(SpanKind.CPU_SAMPLE, "cpu_compute", tok_ms * 1e3, total_ms * 1e3)
    add_counter(t, NATIVE_TOKENIZER_METRIC, [x * 1e3 for x in counter_ts_ms], native_s)
    return t.done()


def test_split_is_the_counters_window_delta():
    # 0.5 s of native tokenizer code laid by t = 800 ms (the counter starts at 0 and grows only while it runs)
    res = analyze(tokenizer_trace([0.1, 0.3, 0.5], [200.0, 500.0, 800.0]))
    tk = res["tokenizer"]
    assert tk["tokenization_ms"] == pytest.approx(800.0)
    assert tk["native_ms"] == pytest.approx(500.0)
    assert tk["python_ms"] == pytest.approx(300.0)
    assert tk["python_pct"] == pytest.approx(37.5)


def test_split_interpolates_at_the_window_edges():
    # window 250..750 ms: the counter read at 250 (0.1 + 0.2 x 50/300) and at 750 (0.3 + 0.2 x 250/300)
    trace = tokenizer_trace([0.1, 0.3, 0.5], [200.0, 500.0, 800.0])
    res = analyze(trace, AnalyzeOptions(window="250:750"))
    lo, hi = 0.1 + 0.2 * 50 / 300, 0.3 + 0.2 * 250 / 300
    assert res["tokenizer"]["tokenization_ms"] == pytest.approx(500.0)
    assert res["tokenizer"]["native_ms"] == pytest.approx((hi - lo) * 1e3)          # 333.3 ms


def test_native_capped_at_the_tokenization_part():
    # a second thread's native encode counts in the counter, but the split is of the critical path's tokenization
    res = analyze(tokenizer_trace([0.9], [800.0]))
    assert res["tokenizer"]["native_ms"] == pytest.approx(800.0)
    assert res["tokenizer"]["python_ms"] == pytest.approx(0.0)


def test_no_counter_no_section():
    t = Synth()
    t.span(SpanKind.CPU_SAMPLE, "tokenization", 0, 800_000)
    t.span(SpanKind.CPU_SAMPLE, "cpu_compute", 800_000, 1_000_000)
    res = analyze(t.done())
    assert res["tokenizer"] is None
    assert finding(res, "cpu_preprocessing")["saving_model"] == "scale"


def test_per_call_python_predicts_batching():
    # 300 of 800 ms tokenization is Python around the encode (37.5 % >= the per-call threshold): batch the calls
    res = analyze(tokenizer_trace([0.1, 0.3, 0.5], [200.0, 500.0, 800.0]))
    f = finding(res, "cpu_preprocessing")
    assert f["saving_model"] == "replace"
    assert f["expected_saving_ms"] == pytest.approx(300.0)
    assert f["saving_high_ms"] == pytest.approx(300.0)
    assert f["saving_low_ms"] == pytest.approx(300.0 * (1 - T.WHATIF_WAIT_RESIDUAL_FRACTION))
    assert f["suggestion"].startswith("Batch the tokenizer calls")
    assert f["evidence"]["tokenizer_python_ms"] == pytest.approx(300.0)
    assert any("native tokenizer's encode" in x for x in f["evidence_text"])


def test_already_batched_keeps_the_worker_pool_model():
    # 760 of 800 ms native (5 % Python: an encode_batch call) - batching is done; the worker-pool scale model
    res = analyze(tokenizer_trace([0.76], [800.0]))
    assert res["tokenizer"]["python_pct"] == pytest.approx(5.0)
    assert res["tokenizer"]["python_pct"] < T.TOKENIZER_PER_CALL_PYTHON_PCT
    f = finding(res, "cpu_preprocessing")
    assert f["saving_model"] == "scale"
    assert not f["suggestion"].startswith("Batch")


def test_markdown_shows_the_split_under_the_tokenization_part():
    from inferscope.analyze.pipeline import analyze_report
    from inferscope.report.markdown import headline, render_markdown
    rep = analyze_report(tokenizer_trace([0.1, 0.3, 0.5], [200.0, 500.0, 800.0]))
    line = "(native tokenizer encode 500.0 ms, the Python around it 300.0 ms = 38%: perf samples)"
    assert line in headline(rep)
    assert f"Tokenization {line}." in render_markdown(rep)
    from inferscope.report.html import build_html
    assert "native tokenizer encode 500.0 ms" in build_html(rep)
    t = Synth()                                            # no native-tokenizer counter: no split line
    t.span(SpanKind.CPU_SAMPLE, "tokenization", 0, 800_000)
    t.span(SpanKind.CPU_SAMPLE, "cpu_compute", 800_000, 1_000_000)
    assert "native tokenizer encode" not in render_markdown(analyze_report(t.done()))
