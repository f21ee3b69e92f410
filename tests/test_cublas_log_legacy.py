"""The legacy cuBLAS API log (CUBLAS_LOGINFO_DBG=1) under ``--cublas-log``: parsed beside cuBLASLt lines, joined to a
planted gemm_shapes table.

tests/data/cublas/cublas_api.log is written in the block format real logs show (its README and
analyze/cublas_api_log.py cite where); the expectations are recounted here from the fixture's text with a separate
reader, and from the planted trace's shapes (known by construction), not from InferScope.
"""
from __future__ import annotations

import collections
import json
import re
import subprocess
import sys
from pathlib import Path

from inferscope.analyze import cublas_api_log
from inferscope.analyze.cublas_log import join, load
from inferscope.analyze.options import AnalyzeOptions
from inferscope.analyze.pipeline import analyze
from inferscope.ingest import load_trace

DATA = Path(__file__).parent / "data" / "cublas"
API = DATA / "cublas_api.log"
LT = DATA / "cublaslt_trace.log"
GEMM_FNS = ("cublasGemmEx", "cublasGemmStridedBatchedEx", "cublasSgemm_v2")


def _recount_api(text: str) -> dict:
    """(batch, m, n, k) -> (calls, fn) straight from the text: chunks between headers, the GEMM functions above."""
    out: dict = {}
    for chunk in text.split("I! cuBLAS (")[1:]:
        fn = re.search(r"cublasStatus_t (\w+)\(", chunk).group(1)
        if fn not in GEMM_FNS:
            continue
        v = {k: int(x) for k, x in re.findall(r"i!  (m|n|k|batchCount): type=int; val=(\d+)", chunk)}
        key = (v.get("batchCount", 1), v["m"], v["n"], v["k"])
        out[key] = (out.get(key, (0, fn))[0] + 1, fn)
    return out


def _recount_lt(text: str) -> collections.Counter:
    out = collections.Counter()
    for line in text.splitlines():
        if "[Trace][cublasLtMatmul]" in line:
            d = re.search(r"Ddesc=\[type=\S+ rows=(\d+) cols=(\d+)", line)
            a = re.search(r"Adesc=\[type=\S+ rows=(\d+) cols=(\d+)", line)
            out[(1, int(d.group(1)), int(d.group(2)), int(a.group(1) if "transa=OP_T" in line else a.group(2)))] += 1
    return out


def _x(name, ts, dur, cat="cpu_op", pid=1, tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def _planted_trace(path: Path) -> Path:
    """addmm [64 x 64] @ [64 x 128] (M=64 N=128 K=64, bf16), bmm [8 x 32 x 64] @ [8 x 64 x 16] (fp32) and
    mm [2 x 3] @ [3 x 5], each launching one kernel."""
    ev, corr = [], 100

    def op(name, ts, dims, types):
        nonlocal corr
        corr += 1
        ev.append(_x(name, ts, 40, **{"Input Dims": dims, "Input type": types}))
        ev.append(_x("cudaLaunchKernel", ts + 5, 2, cat="cuda_runtime", correlation=corr))
        ev.append(_x(f"gemm_kernel_{corr}", ts + 10, 20, cat="kernel", pid=0, tid=7, correlation=corr, device=0,
                     stream=7))

    op("aten::addmm", 1000, [[128], [64, 64], [64, 128], [], []], ["c10::BFloat16"] * 3 + ["Scalar", "Scalar"])
    op("aten::bmm", 1100, [[8, 32, 64], [8, 64, 16]], ["float", "float"])
    op("aten::mm", 1200, [[2, 3], [3, 5]], ["float", "float"])
    path.write_text(json.dumps({"traceEvents": ev, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}]}))
    return path


def test_fixture_calls_equal_a_recount_of_its_text():
    log = load(str(API))
    want = _recount_api(API.read_text())
    assert set(want) == {(1, 128, 64, 64), (8, 16, 32, 64), (1, 7, 9, 11)}       # the plan in the README
    got = collections.Counter((c["batch"], c["m"], c["n"], c["k"]) for c in log["calls"])
    assert got == {k: n for k, (n, _) in want.items()} and log["api_skipped"] == 0
    by = {(c["batch"], c["m"], c["n"], c["k"]): c for c in log["calls"]}
    assert by[(1, 128, 64, 64)]["ops"] == "TN" and by[(8, 16, 32, 64)]["ops"] == "NN"
    assert (by[(1, 128, 64, 64)]["a_type"], by[(1, 128, 64, 64)]["compute"]) == ("R_16BF", "COMPUTE_32F")
    assert by[(1, 7, 9, 11)]["a_type"] == "float" and by[(1, 7, 9, 11)]["compute"] is None    # typed Sgemm: no enum
    assert all(c["source"] == "api" and c["algo"] == f"not logged ({c['fn']})" for c in log["calls"])


def test_join_to_a_planted_trace(tmp_path):
    res = analyze(load_trace(_planted_trace(tmp_path / "t.json")), AnalyzeOptions(window="all",
                                                                                  cublas_log=load(str(API))))
    g = res["tables"]["gemm_shapes"]
    rows = {(r[0], r[2], r[3], r[4], r[5]): dict(zip(g["columns"], r)) for r in g["rows"]}
    want = _recount_api(API.read_text())
    # row-major (batch, M, N, K) of the plan -> column-major (batch, N, M, K) of the log
    for op, b, m, n, k in (("aten::addmm", 1, 64, 128, 64), ("aten::bmm", 8, 32, 16, 64)):
        calls, fn = want[(b, n, m, k)]
        assert rows[(op, b, m, n, k)]["cublas_calls"] == calls
        assert rows[(op, b, m, n, k)]["cublas_algo"] == f"not logged ({fn}) (x{calls})"
    assert rows[("aten::mm", 1, 2, 5, 3)]["cublas_calls"] is None                     # not in the log
    t = res["tables"]["cublas_gemms"]
    tr = {tuple(r[:4]): dict(zip(t["columns"], r)) for r in t["rows"]}
    assert {k: v["calls"] for k, v in tr.items()} == {k: n for k, (n, _) in want.items()}
    assert tr[(1, 128, 64, 64)]["gemm_op"] == "aten::addmm" and tr[(8, 16, 32, 64)]["gemm_op"] == "aten::bmm"
    assert tr[(1, 7, 9, 11)]["gemm_op"] is None
    assert all(v["lt_calls"] == 0 and v["api_calls"] == v["calls"] for v in tr.values())
    assert not [w for w in res["warnings"] if "--cublas-log" in w]


HEAD = "I! cuBLAS (v12.4.5) function cublasStatus_t {fn}(cublasHandle_t, ...) called:"


def _block(fn="cublasGemmEx", **vals):
    args = {"transa": "CUBLAS_OP_N(0)", "transb": "CUBLAS_OP_T(1)", "m": "4", "n": "5", "k": "6"}
    args.update(vals)
    return [HEAD.format(fn=fn)] + [f"i!  {k}: type=int; val={v}" for k, v in args.items() if v is not None]


def test_header_variants_and_malformed_blocks():
    lines = (_block() + ["I! cuBLAS (v11.0) function cublasStatus_t cublasGemmEx(...) called:",
                         "i!  transa: type=cublasOperation_t; val=CUBLAS_OP_T(1)",
                         "i!  transb: type=cublasOperation_t; val=CUBLAS_OP_N(0)",
                         "i!  m: type=int; val=8", "i!  n: type=int; val=9", "i!  k: type=int; val=10"]
             + [ln.replace("cublasStatus_t ", "cublasStatus_t __cdecl ") for ln in _block(m="11")]   # Windows
             + _block(m="POINTER") + _block(m="-1") + _block(n="9" * 40) + _block(k=None) + _block(transa=None)
             + _block(batchCount="-3", m="12")                 # a batch that is no count reads as 1 (like cuBLASLt)
             + _block(fn="cublasSgemv_v2") + _block(fn="cublasSgeam")          # not GEMMs: no row, not skipped
             + _block(m="13")[:3] + ["some program output"] + _block(m="13")[3:]   # the block ends at other text
             + _block(m="14")[:-1])                                           # cut before k: the file's end
    calls, skipped = cublas_api_log.parse(lines)
    assert [(c["m"], c["n"], c["k"], c["ops"], c["batch"]) for c in calls] == [
        (4, 5, 6, "NT", 1), (8, 9, 10, "TN", 1), (11, 5, 6, "NT", 1), (12, 5, 6, "NT", 1)]
    assert skipped == 7                  # POINTER, -1, 40 digits, no k, no transa, the interrupted one, the cut one


def test_mixed_lt_and_api_file(tmp_path):
    lt, api = LT.read_text().splitlines(), API.read_text().splitlines()
    # one API call of a shape the cuBLASLt lines have too (512 x 141 x 512), then the two logs interleaved by block
    both = _block(m="512", n="141", k="512")
    cut = [i for i, ln in enumerate(api) if ln.startswith("I! ")][3]         # a block boundary
    mixed = lt[:5] + api[:cut] + lt[5:] + both + api[cut:]
    p = tmp_path / "mixed.log"
    p.write_text("\n".join(mixed) + "\n")
    log = load(str(p))
    _, table, warns = join(None, log)
    t = {tuple(r[:4]): dict(zip(table["columns"], r)) for r in table["rows"]}
    lt_want, api_want = _recount_lt(LT.read_text()), _recount_api(API.read_text())
    api_want = {k: n for k, (n, _) in api_want.items()}
    api_want[(1, 512, 141, 512)] = 1
    assert {k: v["lt_calls"] for k, v in t.items() if v["lt_calls"]} == dict(lt_want)
    assert {k: v["api_calls"] for k, v in t.items() if v["api_calls"]} == api_want
    for k, v in t.items():                                   # calls: the cuBLASLt count where there is one
        assert v["calls"] == (lt_want[k] or api_want[k])
    assert "not logged (cublasGemmEx) (x1)" in t[(1, 512, 141, 512)]["algos"]
    assert sum("appear in both" in w for w in warns) == 1 and "1 GEMM shape(s)" in [w for w in warns
                                                                                  if "appear in both" in w][0]


def test_cli_reads_an_api_log_and_warns_of_skipped_blocks(tmp_path):
    p = tmp_path / "api.log"
    p.write_text(API.read_text() + "\n".join(_block(m="POINTER")) + "\n")
    trace = Path(__file__).parent / "data" / "traces" / "kineto" / "hta_amd_mi250_minitoy.json.gz"
    r = subprocess.run([sys.executable, "-m", "inferscope", "analyze", str(trace), "-o", str(tmp_path / "o"),
                        "--cublas-log", str(p)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    rep = json.loads((tmp_path / "o" / "report.json").read_text())
    assert sum("1 cuBLAS API GEMM call block(s)" in w for w in rep["warnings"]) == 1
    rows = rep["tables"]["cublas_gemms"]["rows"]
    assert sorted(r[5] for r in rows) == sorted(n for n, _ in _recount_api(API.read_text()).values())


def test_cublaslt_rows_carry_transposes_too():
    from inferscope.analyze.cublas_log import parse_line
    line = next(ln for ln in LT.read_text().splitlines() if "[Trace][cublasLtMatmul]" in ln)
    want_a = "T" if "transa=OP_T" in line else "N"
    want_b = "T" if "transb=OP_T" in line else "N"
    c = parse_line(line)
    assert c["ops"] == want_a + want_b and c["source"] == "lt" and c["fn"] == "cublasLtMatmul"
    flipped = line.replace("transa=OP_T", "") if want_a == "T" else line.replace("scaleType=", "transa=OP_T scaleType=")
    assert parse_line(flipped.replace("scaleType=", "transb=OP_T scaleType="))["ops"] == \
        ("N" if want_a == "T" else "T") + "T"
