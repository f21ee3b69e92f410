"""cuBLASLt log import (issue 46, seed 003 "GEMM shape visibility (cuBLAS logs)"): ``--cublas-log FILE`` joins the
algorithm/tile cuBLASLt chose per shape to the ``gemm_shapes`` table.

The fixture tests/data/cublas/cublaslt_trace.log is written in the documented line format of a real
``CUBLASLT_LOG_LEVEL`` >= 2 log (its README says where the format comes from) for the GEMM shapes of the shared BERT
trace; the expectations are recounted here from the fixture's lines and the raw trace, not from InferScope.
"""
from __future__ import annotations

import collections
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import shared_path

from inferscope.analyze.cublas_log import load, parse_line
from inferscope.analyze.options import AnalyzeOptions
from inferscope.analyze.pipeline import analyze
from inferscope.ingest import load_trace

LOG = Path(__file__).parent / "data" / "cublas" / "cublaslt_trace.log"

# a real line (CUBLASLT_LOG_LEVEL=4 output quoted in a public XLA report, 2023)
REAL = ("[2023-04-07 04:57:13][cublasLt][8291][Trace][cublasLtMatmul] A=0X7F8EB6002300 Adesc=[type=R_16F rows=32 "
        "cols=16 ld=32] B=0X7F8EB6001B00 Bdesc=[type=R_16F rows=16 cols=64 ld=16] C=0X7F8EB6003200 Cdesc=[type=R_16F "
        "rows=32 cols=64 ld=32] D=0X7F8EB6003200 Ddesc=[type=R_16F rows=32 cols=64 ld=32] computeDesc=[computeType="
        "COMPUTE_32F scaleType=R_32F] algo=[algoId=21 tile=MATMUL_TILE_32x32 stages=MATMUL_STAGES_64x1] workSpace=0X0 "
        "workSpaceSizeInBytes=0 beta=? outOfPlace=0 stream=0X7EB04D0")


def test_parse_a_real_line():
    c = parse_line(REAL)
    assert (c["m"], c["n"], c["k"], c["batch"]) == (32, 64, 16, 1)      # D 32x64, A 32x16 not transposed
    assert c["algo"] == "algoId=21 tile=32x32 stages=64x1" and c["a_type"] == "R_16F"
    t = REAL.replace("Adesc=[type=R_16F rows=32 cols=16", "Adesc=[type=R_16F rows=16 cols=32").replace(
        "scaleType=R_32F]", "scaleType=R_32F transa=OP_T]")
    assert parse_line(t)["k"] == 16                                      # op(A) = A^T: k = A's rows
    assert parse_line(REAL.replace("[Trace]", "[Api]")) is None          # API-level lines are not calls
    assert parse_line("[2023-04-07][cublasLt][1][Api][cublasLtMatmulDescCreate] computeType=COMPUTE_32F") is None


def _recount_log():
    """(m, n, k) -> Counter(algoId) straight from the fixture's text."""
    out = collections.defaultdict(collections.Counter)
    for line in LOG.read_text().splitlines():
        if "[Trace][cublasLtMatmul]" not in line:
            continue
        d = re.search(r"Ddesc=\[type=\S+ rows=(\d+) cols=(\d+)", line)
        a = re.search(r"Adesc=\[type=\S+ rows=(\d+) cols=(\d+)", line)
        k = int(a.group(1)) if "transa=OP_T" in line else int(a.group(2))
        out[(int(d.group(1)), int(d.group(2)), k)][re.search(r"algoId=(\d+)", line).group(1)] += 1
    return out


@pytest.mark.shared
def test_join_to_gemm_shapes_on_the_bert_trace():
    path = shared_path("kineto", "tracelens_h100_bert_small_fillmask.json.gz")
    res = analyze(load_trace(path), AnalyzeOptions(window="all", cublas_log=load(str(LOG))))
    g = res["tables"]["gemm_shapes"]
    cols = g["columns"]
    assert cols[-2:] == ["cublas_calls", "cublas_algo"]
    log = _recount_log()
    joined = 0
    for r in g["rows"]:
        row = dict(zip(cols, r))
        want = log.get((row["n"], row["m"], row["k"]))                  # row-major (M, N, K) = column-major (N, M, K)
        if want is None:
            assert row["cublas_calls"] is None and row["cublas_algo"] is None
            continue
        joined += 1
        assert row["cublas_calls"] == sum(want.values())
        ids = [re.search(r"algoId=(\d+)", x).group(1) for x in row["cublas_algo"].split("; ")]
        assert ids == [a for a, _ in sorted(want.items(), key=lambda kv: (-kv[1], kv[0]))]
    assert joined == 3                                                   # three of the four trace shapes are logged
    by = {(r[1], r[2], r[3]): r for r in res["tables"]["cublas_gemms"]["rows"]}
    assert {k: v[5] for k, v in by.items()} == {k: sum(c.values()) for k, c in log.items()}
    assert by[(32, 64, 16)][7] is None and by[(512, 141, 512)][7] == "aten::addmm"
    assert by[(512, 141, 512)][6].startswith("algoId=21 tile=32x32 stages=64x1 (x12); algoId=6 tile=64x64")


def _cli(tmp_path, *extra):
    path = Path(__file__).parent / "data" / "traces" / "kineto" / "hta_amd_mi250_minitoy.json.gz"
    return subprocess.run([sys.executable, "-m", "inferscope", "analyze", str(path), "-o", str(tmp_path / "out"), *extra],
                          capture_output=True, text=True, timeout=300)


def test_irrelevant_file_is_a_warning(tmp_path):
    junk = tmp_path / "junk.log"
    junk.write_text("hello\nnot a cublas log\n")
    r = _cli(tmp_path, "--cublas-log", str(junk))
    assert r.returncode == 0, r.stderr
    warns = json.loads((tmp_path / "out" / "report.json").read_text())["warnings"]
    assert sum("--cublas-log" in w and "no cublasLtMatmul trace line" in w for w in warns) == 1


@pytest.mark.parametrize("make, what", [(lambda p: None, "no such file"), (lambda p: p.mkdir(), "is a directory"),
                                        (lambda p: p.write_bytes(b"\x00\x01PK\x03" * 10), "binary file")])
def test_bad_file_is_one_line_and_exit_2(tmp_path, make, what):
    p = tmp_path / "x.log"
    make(p)
    r = _cli(tmp_path, "--cublas-log", str(p))
    assert r.returncode == 2 and what in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
