"""Achieved FLOPs from recorded shapes, the device peak table, MFU/MBU (issue 11).

The GEMM FLOPs are recounted here straight from the Kineto JSON (Input Dims of the leaf ATen
matrix-multiply ops), independently of InferScope's span model and nesting rules."""
from __future__ import annotations

import gzip
import json
import subprocess
import sys

import pytest

from conftest import shared_path
from inferscope.analyze import efficiency as E
from inferscope.analyze.options import AnalyzeOptions
from inferscope.analyze.pipeline import analyze
from inferscope.ingest import load_trace

H100 = ["tracelens_h100_qwen1.5-0.5b-chat_textgen", "tracelens_h100_bert_small_fillmask",
        "tracelens_h100_falconsai_nsfw_imagecls"]


def _recount_gemm(path) -> tuple[float, int]:
    """2*M*N*K per product from Input Dims of aten::mm/addmm/bmm/baddbmm cpu_op events."""
    ev = json.load(gzip.open(path))["traceEvents"]
    total, n = 0.0, 0
    for e in ev:
        if e.get("cat") != "cpu_op" or e.get("ph") != "X":
            continue
        nm = e.get("name")
        dims = (e.get("args") or {}).get("Input Dims")
        if nm == "aten::mm":
            (m, k), (_, nn) = dims[0], dims[1]
            total += 2 * m * nn * k
        elif nm == "aten::addmm":
            (m, k), (_, nn) = dims[1], dims[2]
            total += 2 * m * nn * k
        elif nm == "aten::bmm":
            (b, m, k), (_, _, nn) = dims[0], dims[1]
            total += 2 * b * m * nn * k
        elif nm == "aten::baddbmm":
            (b, m, k), (_, _, nn) = dims[1], dims[2]
            total += 2 * b * m * nn * k
        else:
            continue
        n += 1
    return total, n


@pytest.mark.parametrize("name", H100)
def test_gemm_flops_equal_independent_recount(name):
    path = shared_path("kineto", name + ".json.gz")
    expect, n = _recount_gemm(path)
    assert n > 0 and expect > 0
    res = analyze(load_trace(path))
    e = res["efficiency"]
    assert e is not None
    assert abs(e["gemm_flops"] - expect) <= 0.01 * expect, (e["gemm_flops"], expect)
    # achieved TFLOP/s and MFU with the peak and its source
    assert e["device"] == "NVIDIA H100 80GB HBM3" and e["dtype"] == "bf16"
    assert e["peak_tflops"] == 989.4 and e["peak_gbps"] == 3350.0
    assert "H100" in e["peak_source"] and "datasheet" in e["peak_source"] and "dense" in e["peak_source"]
    win_s = (res["window"]["end_ns"] - res["window"]["start_ns"]) / 1e9
    assert e["achieved_tflops"] == pytest.approx(e["total_flops"] / win_s / 1e12, rel=1e-9)
    assert e["mfu_pct"] == pytest.approx(100 * e["achieved_tflops"] / 989.4, rel=1e-9)
    assert 0 < e["mfu_pct"] < 100 and 0 < e["mbu_pct"] < 100
    # GEMM kernels were joined to their ops through launch correlation
    assert e["gemm_kernel_ms"] > 0 and 0 < e["gemm_kernel_tflops"] < 989.4
    assert res["tables"]["efficiency_by_op"]["rows"]


def test_qwen_counts_each_product_once():
    path = shared_path("kineto", "tracelens_h100_qwen1.5-0.5b-chat_textgen.json.gz")
    e = analyze(load_trace(path))["efficiency"]
    by = {r["op"]: r for r in e["by_op"]}
    # linear -> addmm / matmul -> mm: only the leaves are counted (168 linear = 72 addmm + 96 mm)
    assert by["aten::mm"]["calls"] == 96 and by["aten::addmm"]["calls"] == 72 and by["aten::bmm"]["calls"] == 1
    assert "aten::linear" not in by and "aten::matmul" not in by
    # attention counted once at the outermost op (sdpa), not again at the flash kernels' ops
    assert by["aten::scaled_dot_product_attention"]["calls"] == 24
    assert not any("flash" in op for op in by)


def test_vit_patch_convolution_flops():
    path = shared_path("kineto", "tracelens_h100_falconsai_nsfw_imagecls.json.gz")
    e = analyze(load_trace(path))["efficiency"]
    # input [4,3,224,224], weight [768,3,16,16], stride 16: out 14x14
    assert e["conv_flops"] == 2 * 4 * 768 * 14 * 14 * 3 * 16 * 16


def test_peak_override_and_unknown_device():
    path = shared_path("kineto", "tracelens_h100_bert_small_fillmask.json.gz")
    tr = load_trace(path)
    e = analyze(tr, AnalyzeOptions(peak_tflops=500.0, peak_gbps=1000.0))["efficiency"]
    assert e["peak_tflops"] == 500.0 and e["mfu_pct"] == pytest.approx(100 * e["achieved_tflops"] / 500.0)
    assert "--peak-tflops" in e["peak_source"] and "--peak-gbps" in e["peak_source"]
    tr.meta["devices"] = [{"id": 0, "name": "Mystery Accelerator 9000"}]
    res = analyze(tr)
    e = res["efficiency"]
    assert e["achieved_tflops"] > 0 and e["peak_tflops"] is None and e["mfu_pct"] is None and e["mbu_pct"] is None
    assert any("not in the peak table" in w and "--peak-tflops" in w for w in res["warnings"])


def test_shapes_survive_the_native_format(tmp_path):
    from inferscope.trace import native
    path = shared_path("kineto", "tracelens_h100_bert_small_fillmask.json.gz")
    tr = load_trace(path)
    native.save(tr, tmp_path / "t.iscope")
    a = analyze(tr)["efficiency"]
    b = analyze(native.load(tmp_path / "t.iscope"))["efficiency"]
    assert a["gemm_flops"] == b["gemm_flops"] > 0


def test_traces_without_shapes_have_no_efficiency():
    path = shared_path("kineto", "hta_critical_path_alexnet_a100.json.gz")
    res = analyze(load_trace(path))
    assert res["efficiency"] is None


@pytest.mark.parametrize("dev, label, bf16", [
    ("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM", 989.4), ("NVIDIA H100 PCIe", "NVIDIA H100 PCIe", 756.0),
    ("NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB SXM", 312.0), ("NVIDIA A10", "NVIDIA A10", 125.0),
    ("NVIDIA L40S", "NVIDIA L40S", 362.05), ("NVIDIA L4", "NVIDIA L4", 121.0),
    ("Tesla V100-SXM2-32GB", "NVIDIA V100 SXM2", None), ("AMD Instinct MI300X", "AMD Instinct MI300X", 1307.4),
    ("NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 4090", 165.2)])
def test_device_peak_table(dev, label, bf16):
    row = E.device_peak(dev)
    assert row["label"] == label and row["tflops"].get("bf16") == bf16 and row["gbps"] > 0 and row["source"]


def test_device_peak_is_word_bounded():
    assert E.device_peak("NVIDIA L40") is None          # not the L4
    assert E.device_peak("") is None and E.device_peak(None) is None
    assert E.device_peak("NVIDIA A100-PG509-200")["label"] == "NVIDIA A100 40GB"


def test_op_cost_rules():
    j = json.dumps
    # linear as a leaf: input [2, 3, 8] x weight [16, 8]^T
    assert E.op_cost("aten::linear", j({"dims": [[2, 3, 8], [16, 8], []], "types": ["float", "float", ""]}))[1] == 2 * 6 * 16 * 8
    # matmul broadcast [4, 5, 6] @ [6, 7]
    assert E.op_cost("aten::matmul", j({"dims": [[4, 5, 6], [6, 7]], "types": ["c10::Half"] * 2}))[1:4:2] == (2 * 4 * 5 * 6 * 7, "fp16")
    # causal self-attention halves; decode (Sq != Sk) does not
    q = [1, 8, 128, 64]
    full = 4 * 8 * 128 * 128 * 64
    c = ["", "", "", "", "True", "False", ""]
    assert E.op_cost("aten::_scaled_dot_product_flash_attention", j({"dims": [q, q, q], "types": [], "concrete": c}))[1] == full // 2
    kv = [1, 8, 512, 64]
    assert E.op_cost("aten::_scaled_dot_product_flash_attention",
                     j({"dims": [[1, 8, 1, 64], kv, kv], "types": [], "concrete": c}))[1] == 4 * 8 * 1 * 512 * 64
    assert E.op_cost("aten::mm", j({"dims": [[2, 3], [4, 5]], "types": []})) is None    # K mismatch
    assert E.op_cost("aten::mm", "not json") is None


def test_bad_peak_flag_is_one_line_exit_2(tmp_path):
    path = shared_path("kineto", "hta_cuda_event_sync_a100.json.gz")
    r = subprocess.run([sys.executable, "-m", "inferscope", "analyze", str(path), "-o", str(tmp_path), "-q",
                        "--peak-tflops", "-3"], capture_output=True, text=True)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "--peak-tflops" in r.stderr
