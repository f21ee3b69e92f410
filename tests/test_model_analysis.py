"""Model analysis (issue 46 item 3): input shapes per op in ``top_ops``.

Each expectation is recounted straight from the raw Kineto JSON (``Input Dims`` of ``cpu_op`` events),
independently of InferScope's importer and span model."""
from __future__ import annotations

import collections
import gzip
import json
from pathlib import Path

import pytest

from conftest import shared_path

from inferscope.analyze.op_shapes import shape_label
from inferscope.analyze.options import AnalyzeOptions
from inferscope.analyze.pipeline import analyze
from inferscope.ingest import load_trace

DATA = Path(__file__).parent / "data" / "traces" / "kineto"
MINITOY = DATA / "hta_amd_mi250_minitoy.json.gz"


def _events(path):
    return json.load(gzip.open(path))["traceEvents"]


def _raw_label(dims) -> str:
    """The label of one call, written out from the raw dims without the module's helper."""
    parts = ["[" + ",".join(map(str, d)) + "]" for d in dims]
    while parts and parts[-1] == "[]":
        parts.pop()
    return "x".join(parts)


def _recount_shapes(path) -> dict[str, str]:
    per = collections.defaultdict(collections.Counter)
    for e in _events(path):
        if e.get("cat") == "cpu_op" and e.get("ph") == "X" and "Input Dims" in (e.get("args") or {}):
            lab = _raw_label(e["args"]["Input Dims"])
            if lab:
                per[e["name"]][lab] += 1
    out = {}
    for name, c in per.items():
        top = sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))[:3]
        out[name] = "; ".join(f"{lab} (x{n})" for lab, n in top)
    return out


def test_top_ops_shapes_equal_a_recount_from_the_raw_json():
    expect = _recount_shapes(MINITOY)
    assert len(expect) > 10
    res = analyze(load_trace(MINITOY), AnalyzeOptions(window="all"))
    t = res["tables"]["top_ops"]
    assert t["columns"][-1] == "shapes"
    got = {r[0]: r[-1] for r in t["rows"]}
    for name, want in expect.items():
        assert got[name] == want, name
    # ops never recorded with shapes have an empty cell; the typed top-N rows carry the same label
    assert all(v == "" for k, v in got.items() if k not in expect)
    for op in res["culprits"]["ops"]:
        assert op["shapes"] == got[op["name"]]
    assert got["aten::copy_"] == "[5,128]x[5,128] (x2)"   # read off the file by hand


def test_shape_label_rules():
    assert shape_label(json.dumps({"dims": [[512], [141, 512], [512, 512], [], []]})) == "[512]x[141,512]x[512,512]"
    assert shape_label(json.dumps({"dims": [[1, 141, 512], [], [512]]})) == "[1,141,512]x[]x[512]"
    assert shape_label(json.dumps({"dims": [[], []]})) is None
    assert shape_label("not json") is None and shape_label(json.dumps([1, 2])) is None


def test_shapes_are_escaped_on_every_page(tmp_path):
    from inferscope.report import get_renderer
    tr = load_trace(MINITOY)
    res = analyze(tr, AnalyzeOptions(window="all"))
    from helpers import as_report
    get_renderer("md")(as_report(res, tr, ["md"]), tr, tmp_path / "report.md")
    md = (tmp_path / "report.md").read_text()
    assert "\\[5,128\\]x\\[5,128\\] (x2)" in md        # Markdown: '[' escaped like any untrusted name


# ---------------------------------------------------------------------------------------------- GEMM shapes

GEMM = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear"}


def _raw_mnk(name, dims):
    """(batch, M, N, K) written out per op from the raw dims (2-D / 3-D operands only)."""
    if name in ("aten::addmm", "aten::baddbmm"):
        a, b = dims[1], dims[2]
    else:
        a, b = dims[0], dims[1]
    if name == "aten::linear":
        m = 1
        for x in a[:-1]:
            m *= x
        return 1, m, b[0], a[-1]
    if len(a) == 3:
        return a[0], a[1], b[2], a[2]
    return 1, a[0], b[1], a[1]


def _recount_gemm_shapes(events) -> dict:
    """(op, batch, M, N, K) -> [calls, kernel_us, flops of calls with a kernel]: leaf GEMM calls (no GEMM op
    nested in them on their thread), kernels joined by correlation to their runtime call and from there
    to the innermost GEMM op around it on the same thread."""
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op" and e.get("name") in GEMM
           and "Input Dims" in (e.get("args") or {})]

    def inside(o, e):
        return (o["pid"], o["tid"]) == (e["pid"], e["tid"]) and o["ts"] <= e["ts"] and e["ts"] + e.get("dur", 0) <= o["ts"] + o["dur"]

    leaf = [o for o in ops if not any(p is not o and inside(o, p) for p in ops)]
    out = {}
    key_of = {}
    for o in leaf:
        key = (o["name"],) + tuple(_raw_mnk(o["name"], o["args"]["Input Dims"]))
        key_of[id(o)] = key
        out.setdefault(key, [0, 0.0, 0.0])[0] += 1
    rt = {e["args"]["correlation"]: e for e in events if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver")
          and "correlation" in (e.get("args") or {})}
    launched = set()
    for k in events:
        if k.get("ph") != "X" or k.get("cat") != "kernel":
            continue
        r = rt.get(k["args"].get("correlation"))
        if r is None:
            continue
        around = [o for o in ops if inside(o, r)]
        if not around:
            continue
        o = min(around, key=lambda x: x["dur"])
        if id(o) not in key_of:
            continue
        out[key_of[id(o)]][1] += k["dur"]
        if id(o) not in launched:
            launched.add(id(o))
            b, m, n, kk = key_of[id(o)][1:]
            out[key_of[id(o)]][2] += 2 * b * m * n * kk
    return out


def _table_by_key(res):
    t = res["tables"]["gemm_shapes"]
    assert t["columns"] == ["op", "dtype", "batch", "m", "n", "k", "calls", "gflops", "kernel_ms", "achieved_tflops", "kernels"]
    return {(r[0], r[2], r[3], r[4], r[5]): r for r in t["rows"]}, t["rows"]


def _compare_with(res, expect):
    got, rows = _table_by_key(res)
    assert set(got) == set(expect)
    for key, (calls, k_us, lflops) in expect.items():
        r = got[key]
        b, m, n, k = key[1:]
        assert r[6] == calls, key
        assert r[7] == pytest.approx(2 * b * m * n * k * calls / 1e9, rel=1e-6), key
        assert r[8] == pytest.approx(k_us / 1e3, rel=1e-6, abs=1e-6), key
        if k_us:
            assert r[9] == pytest.approx(lflops / (k_us / 1e6) / 1e12, rel=1e-3), key
    kms = [r[8] for r in rows]
    assert kms == sorted(kms, reverse=True)                       # by kernel time


@pytest.mark.shared
def test_gemm_shapes_equal_a_recount_on_a_real_trace():
    path = shared_path("kineto", "tracelens_h100_bert_small_fillmask.json.gz")
    expect = _recount_gemm_shapes(_events(path))
    assert len(expect) >= 3 and all(v[1] > 0 for v in expect.values())
    res = analyze(load_trace(path), AnalyzeOptions(window="all", top_n=1000))
    _compare_with(res, expect)
    # the linear layers' products are rows of their addmm (M = tokens, K = hidden, N = out features)
    got, _ = _table_by_key(res)
    assert ("aten::addmm", 1, 141, 512, 512) in got and not any(k[0] == "aten::linear" for k in got)
    assert "gemm" in got[("aten::addmm", 1, 141, 512, 512)][10]


def _x(name, ts, dur, cat="cpu_op", pid=1, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _synthetic_gemm_trace(path):
    """Planted calls: linear -> addmm [4*16 x 64] @ [64 x 128] (two calls, kernels of 10 and 30 us),
    bmm [8 x 32 x 64] @ [8 x 64 x 16] (one call, kernel 5 us), and an mm with no kernel."""
    ev, corr = [], 100

    def launch(ts, kts, kdur, kname):
        nonlocal corr
        corr += 1
        ev.append(_x("cudaLaunchKernel", ts, 2, cat="cuda_runtime", correlation=corr))
        ev.append(_x(kname, kts, kdur, cat="kernel", pid=0, tid=7, correlation=corr, device=0, stream=7))

    for i, kdur in enumerate((10, 30)):
        t0 = 1000 + 200 * i
        ev.append(_x("aten::linear", t0, 50, **{"Input Dims": [[4, 16, 64], [128, 64], [128]],
                                                 "Input type": ["c10::BFloat16"] * 3}))
        ev.append(_x("aten::addmm", t0 + 5, 40, **{"Input Dims": [[128], [64, 64], [64, 128], [], []],
                                                    "Input type": ["c10::BFloat16"] * 3 + ["Scalar", "Scalar"]}))
        launch(t0 + 10, t0 + 20, kdur, "sm90_gemm_bf16_planted")
    ev.append(_x("aten::bmm", 1600, 30, **{"Input Dims": [[8, 32, 64], [8, 64, 16]], "Input type": ["float", "float"]}))
    launch(1605, 1610, 5, "bmm_kernel_planted")
    ev.append(_x("aten::mm", 1700, 20, **{"Input Dims": [[2, 3], [3, 5]], "Input type": ["float", "float"]}))
    ev.append(_x("cudaDeviceSynchronize", 1750, 10, cat="cuda_runtime"))
    path.write_text(json.dumps({"traceEvents": ev, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]}))
    return path


def test_gemm_shapes_of_planted_calls(tmp_path):
    path = _synthetic_gemm_trace(tmp_path / "gemm.json")
    # known by construction
    expect = {("aten::addmm", 1, 64, 128, 64): [2, 40.0, 2 * 2 * 64 * 128 * 64],
              ("aten::bmm", 8, 32, 16, 64): [1, 5.0, 2 * 8 * 32 * 16 * 64],
              ("aten::mm", 1, 2, 5, 3): [1, 0.0, 0]}
    assert _recount_gemm_shapes(_events_plain(path)) == expect     # the recount agrees with the plan
    res = analyze(load_trace(path), AnalyzeOptions(window="all"))
    _compare_with(res, expect)
    got, rows = _table_by_key(res)
    assert rows[0][0] == "aten::addmm" and rows[0][1] == "bf16" and rows[0][10] == "sm90_gemm_bf16_planted (x2)"
    assert got[("aten::bmm", 8, 32, 16, 64)][1] == "fp32" and got[("aten::bmm", 8, 32, 16, 64)][10] == "bmm_kernel_planted (x1)"
    assert got[("aten::mm", 1, 2, 5, 3)][9] is None and got[("aten::mm", 1, 2, 5, 3)][10] == ""
    # 2*64*128*64*2 FLOPs in 40 us
    assert rows[0][9] == pytest.approx(2 * 2 * 64 * 128 * 64 / 40e-6 / 1e12, abs=5e-5)   # 4 decimals


def test_hostile_gemm_dims_give_no_row(tmp_path):
    path = _synthetic_gemm_trace(tmp_path / "gemm.json")
    doc = json.loads(path.read_text())
    huge = 2 ** 70
    doc["traceEvents"] += [_x("aten::mm", 1800, 5, **{"Input Dims": [[huge, 3], [3, huge]], "Input type": ["float", "float"]}),
                           _x("aten::mm", 1810, 5, **{"Input Dims": [[-2, 3], [3, 4]], "Input type": ["float", "float"]}),
                           _x("aten::bmm", 1820, 5, **{"Input Dims": [["a", 3], [3, 4]], "Input type": ["float", "float"]})]
    path.write_text(json.dumps(doc))
    res = analyze(load_trace(path), AnalyzeOptions(window="all"))
    got, _ = _table_by_key(res)
    assert all(k[2] is None or 0 <= k[2] < 2 ** 62 for k in got) and ("aten::mm", 1, -2, 4, 3) not in got
    assert ("aten::addmm", 1, 64, 128, 64) in got


def _events_plain(path):
    return json.loads(Path(path).read_text())["traceEvents"]


# ---------------------------------------------------------------------------------------------- module hotspots

ATTN = {"aten::scaled_dot_product_attention", "aten::_scaled_dot_product_flash_attention",
        "aten::_scaled_dot_product_efficient_attention", "aten::_scaled_dot_product_cudnn_attention"}


def _recount_modules(events) -> dict:
    """path -> [calls, cpu_us, gpu_us, flops]: module events nested by time on their thread, kernels joined by
    correlation to their runtime call and from there to every module around it; FLOPs of leaf GEMMs (2*M*N*K)
    and outermost attention ops (4*B*H*Sq*Sk*D, none causal in this trace) inside each module."""
    mods = sorted((e for e in events if e.get("ph") == "X" and str(e.get("name", "")).startswith("nn.Module: ")),
                  key=lambda e: (e["ts"], -e["dur"]))

    def inside(o, e):
        return (o["pid"], o["tid"]) == (e["pid"], e["tid"]) and o["ts"] <= e["ts"] and e["ts"] + e.get("dur", 0) <= o["ts"] + o["dur"]

    path = {}
    for m in mods:
        outer = [o for o in mods if o is not m and inside(o, m) and id(o) in path]
        par = max(outer, key=lambda o: len(path[id(o)])) if outer else None
        path[id(m)] = (path[id(par)] + "/" if par else "") + m["name"][len("nn.Module: "):]
    out = {}
    for m in mods:
        r = out.setdefault(path[id(m)], [0, 0.0, 0.0, 0.0])
        r[0] += 1
        r[1] += m["dur"]

    def around(e):
        return {path[id(m)] for m in mods if inside(m, e)}

    rt = {e["args"]["correlation"]: e for e in events if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver")
          and "correlation" in (e.get("args") or {})}
    for k in events:
        if k.get("ph") == "X" and k.get("cat") == "kernel" and k["args"].get("correlation") in rt:
            for p in around(rt[k["args"]["correlation"]]):
                out[p][2] += k["dur"]
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") == "cpu_op" and "Input Dims" in (e.get("args") or {})]
    gemms = [o for o in ops if o["name"] in GEMM]
    attn = [o for o in ops if o["name"] in ATTN]
    for o in gemms:
        if any(p is not o and inside(o, p) for p in gemms):
            continue
        b, m, n, k = _raw_mnk(o["name"], o["args"]["Input Dims"])
        for p in around(o):
            out[p][3] += 2 * b * m * n * k
    for o in attn:
        if any(p is not o and inside(p, o) for p in attn):
            continue
        (b, h, sq, d), sk = o["args"]["Input Dims"][0], o["args"]["Input Dims"][1][2]
        for p in around(o):
            out[p][3] += 4 * b * h * sq * sk * d
    return out


@pytest.mark.shared
def test_module_hotspots_equal_a_recount_on_a_real_trace():
    path = shared_path("kineto", "tracelens_h100_bert_small_fillmask.json.gz")
    events = _events(path)
    expect = _recount_modules(events)
    assert len(expect) > 50
    res = analyze(load_trace(path), AnalyzeOptions(window="all", top_n=1000))
    t = res["tables"]["module_hotspots"]
    assert t["columns"] == ["module", "depth", "calls", "cpu_ms", "gpu_ms", "self_gpu_ms", "pct_of_gpu", "gflops",
                            "input_activation_bytes"]
    got = {r[0]: r for r in t["rows"]}
    assert set(got) == set(expect)
    total_k = sum(k["dur"] for k in events if k.get("ph") == "X" and k.get("cat") == "kernel")
    for p, (calls, cpu_us, gpu_us, flops) in expect.items():
        r = got[p]
        assert r[1] == p.count("/") and r[2] == calls, p
        assert r[3] == pytest.approx(cpu_us / 1e3, abs=2e-6), p
        assert r[4] == pytest.approx(gpu_us / 1e3, abs=2e-6), p
        assert r[6] == pytest.approx(100 * gpu_us / total_k, abs=1e-3), p
        assert r[7] == pytest.approx(flops / 1e9, rel=1e-6, abs=1e-9), p
    # self GPU time: the kernels whose innermost module is the row's (children's inclusive time taken off)
    for p, r in got.items():
        kids = [q for q in got if q.startswith(p + "/") and q.count("/") == p.count("/") + 1]
        assert r[5] == pytest.approx(r[4] - sum(got[q][4] for q in kids), abs=1e-5), p
    gms = [r[4] for r in t["rows"]]
    assert gms == sorted(gms, reverse=True)
    assert got["BertLMHeadModel_0/BertOnlyMLMHead_0/BertLMPredictionHead_0/Linear_25"][7] == pytest.approx(
        2 * 141 * 30522 * 512 / 1e9)                                 # the vocabulary projection, by hand
    # input activations (fp16, 141 tokens, hidden 512, intermediate 2048), by hand: every layer and its attention read
    # [1, 141, 512], the FFN output projection [1, 141, 2048]
    for p, r in got.items():
        leaf = p.rsplit("/", 1)[-1]
        if leaf.startswith(("BertLayer_", "BertAttention_")):
            assert r[8] == 141 * 512 * 2, p
        elif leaf.startswith("BertOutput_"):
            assert r[8] == 141 * 2048 * 2, p
