"""Per-stage MFU with ``--model-config FILE`` (issue 46, seed 003 "per-stage MFU (NVTX-segmented)") when no live
hook saw the model: FLOPs of a stage = 2 x params x its tokens, over the stage's step time (per step the longer of its
range and its GPU work's span), against the peak; and the decode stage's MBU beside it, over the same step time:
(params x dtype bytes - the untied input-embedding rows a step does not read + 2 x layers x kv_heads x head_dim x
dtype bytes x KV tokens) per step against the peak bandwidth.

Truth: a recount from the raw Kineto JSON of real SGLang and vLLM decode captures (the ``execute_..._generation_..``
range's duration, the span of the GPU work its runtime calls launched, its query tokens ``sq`` and KV tokens ``sk``),
and planted traces of ``Prefill_Stage`` / ``Decode_Stage`` ranges whose times are known by construction.  A bad file
is a one-line error and exit 2.
"""
from __future__ import annotations

import gzip
import json
import re
import subprocess
from decimal import Decimal
import sys

import pytest

from conftest import shared_path
from helpers import Synth

from inferscope.analyze.model_config import load
from inferscope.analyze.options import AnalyzeOptions
from inferscope.analyze.pipeline import analyze
from inferscope.ingest import load_trace
from inferscope.report.markdown import render_markdown
from inferscope.result import from_dict
from inferscope.trace import SpanKind

from pathlib import Path

QWEN3_8B = Path(__file__).parent / "data" / "model_configs" / "qwen3_8b_config.json"
MI300X_BF16_TFLOPS = 1307.4          # AMD Instinct MI300X data sheet, bf16 dense
MI300X_GBPS = 5300.0                 # AMD Instinct MI300X data sheet, HBM3 peak bandwidth


def _stage(res, kind):
    return next(s for s in res["llm"]["stages"] if s["stage"] == kind)


def test_hf_config_params_counted_from_its_dimensions():
    m = load(str(QWEN3_8B))
    h, L, V, I, kv = 4096, 36, 151936, 12288, 8 * 128
    want = 2 * V * h + L * (h * (2 * h + 2 * kv) + 3 * h * I)     # untied embedding + LM head, SwiGLU MLP
    assert m["params"] == want and m["dtype"] == "bf16" and m["param_bytes"] == 2 * want
    assert abs(want - 8.19e9) / 8.19e9 < 0.01                       # Qwen3-8B's published size


def _raw_decode_step(path):
    """(wall ms, GPU span ms, KV tokens, query tokens) of the one execute_ decode range, recounted from the raw Kineto
    JSON: the span runs from the first start to the last end of the GPU events whose correlation id is a runtime call
    made inside the range on its thread; the KV tokens are the name's sk counts, the query tokens (the rows of the
    embedding table the step reads) its sq counts (context + generation).  Timestamps are read as decimals: a double
    holds a 6.5e12 us timestamp to ~1 ns only."""
    raw = json.load(gzip.open(path), parse_float=Decimal)["traceEvents"]
    rx = re.compile(r"execute_\d+_context_\d+\(sq(\d+)sk(\d+)sqsq\d+sqsk\d+\)_generation_\d+\(sq(\d+)sk(\d+)")
    (st,) = [(e, m) for e in raw if e.get("ph") == "X" and (m := rx.search(str(e.get("name"))))]
    e, m = st
    a, b = e["ts"], e["ts"] + e["dur"]
    corr = {r["args"]["correlation"] for r in raw if r.get("ph") == "X" and r.get("cat") == "cuda_runtime"
            and (r["pid"], r["tid"]) == (e["pid"], e["tid"]) and a <= r["ts"] and r["ts"] + r["dur"] <= b}
    gpu = [g for g in raw if g.get("ph") == "X" and g.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
           and (g.get("args") or {}).get("correlation") in corr]
    span_ms = float(max(g["ts"] + g["dur"] for g in gpu) - min(g["ts"] for g in gpu)) / 1e3
    return float(e["dur"]) / 1e3, span_ms, int(m.group(2)) + int(m.group(4)), int(m.group(1)) + int(m.group(3))


H, L, V, I, KVH, HD, BF16 = 4096, 36, 151936, 12288, 8, 128, 2        # tests/data/model_configs/qwen3_8b_config.json
QWEN3_8B_PARAMS = 2 * V * H + L * (H * (2 * H + 2 * KVH * HD) + 3 * H * I)   # untied embedding + LM head, SwiGLU MLP


def _qwen3_8b_bytes(kv_tokens: int, rows: int | None, tied: bool = False) -> float:
    """Bytes a decode step reads: the weights less the embedding rows it does not gather (untied: the table less the
    ``rows`` read; tied: nothing, the table is read whole as the LM head), plus the KV cache."""
    params = QWEN3_8B_PARAMS - (V * H if tied else 0)
    unread = 0 if tied else (V - rows) * H * BF16
    return params * BF16 - unread + 2 * L * KVH * HD * BF16 * kv_tokens


@pytest.mark.shared
def test_decode_mfu_equals_a_recount_on_a_real_sglang_trace(tmp_path):
    """MFU divides by the step time MBU does: the longer of the range and its GPU work's span (here the span)."""
    path = shared_path("kineto", "tracelens_mi300x_sglang_qwen3_8b_decode.json.gz")
    wall_ms, span_ms, _, tokens = _raw_decode_step(path)
    step_s = max(wall_ms, span_ms) / 1e3
    params = 8_190_735_360
    cfg = tmp_path / "qwen3.yaml"
    cfg.write_text(f"params: {params}\ndtype: bf16\n")
    res = analyze(load_trace(path), AnalyzeOptions(window="all", model_config=load(str(cfg))))
    st = _stage(res, "decode")
    flops = 2 * params * tokens
    assert st["tokens"] == tokens and st["flops"] == pytest.approx(flops)
    assert st["wall_ms"] == pytest.approx(wall_ms, abs=1e-6) and span_ms > wall_ms
    assert st["step_time_ms"] == pytest.approx(step_s * 1e3, rel=1e-9)
    assert st["peak_tflops"] == MI300X_BF16_TFLOPS                  # from the trace's device name
    assert st["achieved_tflops"] == pytest.approx(flops / step_s / 1e12, rel=1e-9)
    assert st["mfu_pct"] == pytest.approx(100 * flops / step_s / (MI300X_BF16_TFLOPS * 1e12), rel=1e-9)
    assert res["model"]["source"] == "config" and res["model"]["params"] == params
    assert not any("decode MFU is null" in w for w in res["warnings"])


@pytest.mark.shared
def test_decode_mbu_equals_a_recount_on_a_real_sglang_trace():
    path = shared_path("kineto", "tracelens_mi300x_sglang_qwen3_8b_decode.json.gz")
    wall_ms, span_ms, kv, rows = _raw_decode_step(path)
    need = _qwen3_8b_bytes(kv, rows)
    step_ms = max(wall_ms, span_ms)
    mbu = 100 * need / (step_ms / 1e3) / (MI300X_GBPS * 1e9)
    res = analyze(load_trace(path), AnalyzeOptions(window="all", model_config=load(str(QWEN3_8B))))
    st = _stage(res, "decode")
    assert st["kv_tokens_mean"] == kv and st["bytes_per_step"] == pytest.approx(need, rel=1e-12)
    assert st["peak_gbps"] == MI300X_GBPS and st["step_time_ms"] == pytest.approx(step_ms, rel=1e-9)
    assert st["mbu_pct"] == pytest.approx(mbu, rel=1e-9) and st["mbu_lower_bound"] is False
    assert st["mfu_pct"] == pytest.approx(100 * 2 * QWEN3_8B_PARAMS * rows / (step_ms / 1e3) / (MI300X_BF16_TFLOPS * 1e12),
                                          rel=1e-9)                 # the same step time in the same row
    assert f"{kv:,.1f} tokens" in st["mbu_basis"] and "lower bound" not in st["mbu_basis"]
    assert f"embedding rows not read {(V - rows) * H * BF16:,} B" in st["mbu_basis"]
    f = next(f for f in res["findings"] if f["id"] == "decode_low_mbu")            # 0.8 % of the peak: medium
    assert f["severity"] == "medium" and f["evidence"]["decode_mbu_pct"] == pytest.approx(round(mbu, 2))
    assert f["evidence"]["mean_step_ms"] == pytest.approx(round(step_ms, 3))
    row = next(ln for ln in render_markdown(from_dict(res)).splitlines() if ln.startswith("| decode | "))
    assert row.endswith(f"| {st['mfu_pct']:,.2f} | {mbu:,.2f} |")                  # MBU beside MFU


@pytest.mark.shared
def test_tied_embeddings_subtract_nothing(tmp_path):
    """Tied embeddings are one table, read whole as the LM head: the bytes are the (smaller) weights in full."""
    path = shared_path("kineto", "tracelens_mi300x_sglang_qwen3_8b_decode.json.gz")
    _, _, kv, rows = _raw_decode_step(path)
    cfg = tmp_path / "tied.json"
    cfg.write_text(json.dumps(json.loads(QWEN3_8B.read_text()) | {"tie_word_embeddings": True}))
    res = analyze(load_trace(path), AnalyzeOptions(window="all", model_config=load(str(cfg))))
    st = _stage(res, "decode")
    assert res["model"]["params"] == QWEN3_8B_PARAMS - V * H
    assert st["bytes_per_step"] == pytest.approx(_qwen3_8b_bytes(kv, rows, tied=True), rel=1e-12)
    assert "tied to the LM head" in st["mbu_basis"] and st["mbu_lower_bound"] is False


@pytest.mark.shared
def test_graph_replay_step_time_is_its_gpu_span(tmp_path):
    """vLLM's full-graph decode: the host range ends long before the replayed graph; over the range's wall time the
    bytes would read faster than the device's peak, so MBU - and MFU, in the same row - divide by the GPU work's span."""
    path = shared_path("kineto", "tracelens_mi300x_vllm_decode_graph_execution.json.gz")
    wall_ms, span_ms, kv, rows = _raw_decode_step(path)
    need = _qwen3_8b_bytes(kv, rows)
    assert span_ms > wall_ms and 100 * need / (wall_ms / 1e3) / (MI300X_GBPS * 1e9) > 100
    res = analyze(load_trace(path), AnalyzeOptions(window="all", model_config=load(str(QWEN3_8B)), peak_gbps=MI300X_GBPS,
                                                   peak_tflops=MI300X_BF16_TFLOPS))
    st = _stage(res, "decode")
    assert st["step_time_ms"] == pytest.approx(span_ms, rel=1e-9) and st["tokens"] == rows
    assert st["mbu_pct"] == pytest.approx(100 * need / (span_ms / 1e3) / (MI300X_GBPS * 1e9), rel=1e-9)
    assert st["mbu_pct"] < 100
    assert st["mfu_pct"] == pytest.approx(100 * 2 * QWEN3_8B_PARAMS * rows / (span_ms / 1e3) / (MI300X_BF16_TFLOPS * 1e12),
                                          rel=1e-9)
    md = render_markdown(from_dict(res))
    assert f"MFU and MBU divide by a mean step of {span_ms:,.3f} ms, not the ranges' {wall_ms:,.3f} ms" in md
    # the trace names no device: without --peak-gbps the bytes are there, MBU is null and says why
    res = analyze(load_trace(path), AnalyzeOptions(window="all", model_config=load(str(QWEN3_8B))))
    st = _stage(res, "decode")
    assert st["mbu_pct"] is None and st["bytes_per_step"] == pytest.approx(need, rel=1e-12)
    assert any("decode MBU is null" in w and "--peak-gbps" in w for w in res["warnings"])


@pytest.mark.shared
def test_params_only_config_gives_a_lower_bound(tmp_path):
    """No KV dimensions in the config: the KV-cache read is left out, the MBU is labelled a lower bound (and a low
    lower bound is no decode_low_mbu finding: the true MBU may be above the level)."""
    path = shared_path("kineto", "tracelens_mi300x_sglang_qwen3_8b_decode.json.gz")
    wall_ms, span_ms, _, _ = _raw_decode_step(path)
    params = 8_190_735_360
    cfg = tmp_path / "qwen3.yaml"
    cfg.write_text(f"params: {params}\ndtype: bf16\n")
    res = analyze(load_trace(path), AnalyzeOptions(window="all", model_config=load(str(cfg))))
    st = _stage(res, "decode")
    assert st["bytes_per_step"] == 2 * params and st["mbu_lower_bound"] is True
    assert st["mbu_pct"] == pytest.approx(100 * 2 * params / (max(wall_ms, span_ms) / 1e3) / (MI300X_GBPS * 1e9), rel=1e-9)
    assert "lower bound" in st["mbu_basis"] and "KV dimensions" in st["mbu_basis"]
    assert any("decode MBU is a lower bound" in w for w in res["warnings"])
    assert "decode_low_mbu" not in {f["id"] for f in res["findings"]}
    row = next(ln for ln in render_markdown(from_dict(res)).splitlines() if ln.startswith("| decode | "))
    assert row.endswith(f"| ≥ {st['mbu_pct']:,.2f} |")          # labelled a lower bound


# (range, start_us, end_us)
PLAN = [("Prefill_Stage", 0, 400), ("Decode_Stage", 400, 1000), ("Prefill_Stage", 1000, 1250),
        ("Decode_Stage", 1250, 1600), ("Tokenizer_Stage", 1600, 1700)]


def test_stage_ranges_get_mfu_from_the_config(tmp_path):
    t = Synth()
    for name, a, b in PLAN:
        t.span(SpanKind.ANNOTATION, name, a, b)
        t.launch(a + 2, a + 4, a + 10, b - 10)
    p, peak = 1_000_000, 50.0
    tok = {"prefill": 512, "decode": 8}
    cfg = tmp_path / "m.json"
    cfg.write_text(json.dumps({"params": p, "dtype": "fp16", "peak_tflops": peak, "stage_tokens": tok}))
    gbps = 100.0
    res = analyze(t.done(), AnalyzeOptions(window="all", model_config=load(str(cfg)), peak_gbps=gbps))
    for kind in ("prefill", "decode"):
        rs = [(a, b) for n, a, b in PLAN if n.lower().startswith(kind)]
        wall_s = sum(b - a for a, b in rs) / 1e6
        flops = 2 * p * tok[kind] * len(rs)
        st = _stage(res, kind)
        assert st["steps"] == len(rs) and st["tokens"] == tok[kind] * len(rs)
        assert st["mfu_pct"] == pytest.approx(100 * flops / wall_s / (peak * 1e12), rel=1e-9)
        assert "--model-config" in st["peak_source"]
        if kind == "prefill":
            assert st["mbu_pct"] is None and st["bytes_per_step"] is None
        else:   # fp16 weights once per range (a lower bound: a range may hold several forwards), no KV dimensions
            mean_s = wall_s / len(rs)          # the GPU work sits inside each range: the step time is the range's
            assert st["bytes_per_step"] == 2 * p and st["mbu_lower_bound"] is True
            assert st["mbu_pct"] == pytest.approx(100 * 2 * p / mean_s / (gbps * 1e9), rel=1e-9)
            assert "one weight read" in st["mbu_basis"]
    assert {s["stage"] for s in res["llm"]["stages"]} == {"prefill", "decode"}
    # without the config the stage ranges are phases only, as before
    assert analyze(t.done(), AnalyzeOptions(window="all"))["llm"] is None


def test_planted_replay_and_embedding_rows(tmp_path):
    """Planted Decode_Stage ranges whose GPU work outlasts the range (a graph replay): MFU and MBU both divide by the
    GPU span; the untied embedding table less the step's rows (stage_tokens) is left out of the bytes, and without
    stage_tokens the whole table is left out and the MBU is labelled a lower bound."""
    plan = [(0, 100, 10, 700), (1000, 1100, 1010, 1400)]            # range 100 us, GPU work 690 and 390 us
    t = Synth()
    for a, b, g0, g1 in plan:
        t.span(SpanKind.ANNOTATION, "Decode_Stage", a, b)
        t.launch(a + 2, a + 4, g0, g1)
    dims = {"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 128,
            "vocab_size": 1000, "torch_dtype": "float16", "hidden_act": "silu"}
    h, V, rows = 64, 1000, 8
    params = 2 * V * h + 2 * (h * (2 * h + 2 * h) + 3 * h * 128)
    step_s = sum(g1 - g0 for *_, g0, g1 in plan) / len(plan) / 1e6
    tf, gb = 10.0, 100.0
    for tok in (rows, None):
        cfg = tmp_path / "m.json"
        cfg.write_text(json.dumps(dims | ({"stage_tokens": {"decode": tok}} if tok else {})))
        res = analyze(t.done(), AnalyzeOptions(window="all", model_config=load(str(cfg)), peak_tflops=tf, peak_gbps=gb))
        st = _stage(res, "decode")
        assert res["model"]["params"] == params and st["wall_ms"] == pytest.approx(0.2)
        assert st["step_time_ms"] == pytest.approx(step_s * 1e3, rel=1e-12)
        need = 2 * params - (V - (tok or 0)) * h * 2                 # fp16; no KV part (stage ranges name no context)
        assert st["bytes_per_step"] == pytest.approx(need, rel=1e-12) and st["mbu_lower_bound"] is True
        assert st["mbu_pct"] == pytest.approx(100 * need / step_s / (gb * 1e9), rel=1e-12)
        if tok:
            assert st["mfu_pct"] == pytest.approx(100 * 2 * params * tok / step_s / (tf * 1e12), rel=1e-12)
            assert "embedding rows a step reads" not in st["mbu_basis"]
        else:
            assert st["mfu_pct"] is None and "embedding rows a step reads are unknown" in st["mbu_basis"]


def test_config_without_stages_is_a_warning(tmp_path):
    t = Synth()
    t.span(SpanKind.ANNOTATION, "warmup", 0, 100)
    cfg = tmp_path / "m.yaml"
    cfg.write_text("params: 1000\n")
    res = analyze(t.done(), AnalyzeOptions(window="all", model_config=load(str(cfg))))
    assert res["llm"] is None
    assert sum("--model-config" in w and "no prefill/decode step" in w for w in res["warnings"]) == 1


def test_lone_surrogate_name_is_written(tmp_path):
    cfg = tmp_path / "m.json"
    cfg.write_text('{"params": 1000, "name": "x\\ud800y", "model_type": "\\udfff"}')
    m = load(str(cfg))
    assert m["name"] == "x\ufffdy" and m["model_type"] == "\ufffd"
    m["name"].encode("utf-8")


@pytest.mark.parametrize("text, what", [
    ("{not json: [", "neither JSON nor YAML"),
    ('{"hidden_size": 64}', "give params, or layers, hidden and vocab"),
    ('{"params": -5}', "params must be a positive integer"),
    ('{"params": 10, "dtype": "float13"}', "unknown dtype"),
    ('{"params": 10, "stage_tokens": {"sampling": 3}}', "stage_tokens must map"),
    ("[1, 2]", "expected a mapping"),
])
def test_bad_model_config_is_one_line_and_exit_2(tmp_path, text, what):
    cfg = tmp_path / "bad.json"
    cfg.write_text(text)
    r = subprocess.run([sys.executable, "-m", "inferscope", "analyze", str(QWEN3_8B), "--model-config", str(cfg)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and what in lines[0] and "Traceback" not in r.stderr


def test_missing_model_config_is_exit_2(tmp_path):
    r = subprocess.run([sys.executable, "-m", "inferscope", "analyze", str(QWEN3_8B), "--model-config",
                        str(tmp_path / "nope.json")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "no such file" in r.stderr
