"""cuBLASLt and cuBLAS log import (``--cublas-log FILE``, seed 003 "GEMM shape visibility (cuBLAS logs)"): the
algorithm and tile cuBLASLt chose per GEMM shape (and the shapes the legacy cuBLAS API logged), joined to the
``gemm_shapes`` table.

Input: the log cuBLASLt writes with ``CUBLASLT_LOG_LEVEL`` >= 2 (trace level; ``CUBLASLT_LOG_FILE=path`` sends it to
a file, else stdout), one line per kernel-launching call:
``[2023-04-07 04:57:13][cublasLt][8291][Trace][cublasLtMatmul] A=0X... Adesc=[type=R_16F rows=32 cols=16 ld=32]
B=... Bdesc=[...] C=... Cdesc=[...] D=... Ddesc=[type=R_16F rows=32 cols=64 ld=32]
computeDesc=[computeType=COMPUTE_32F scaleType=R_32F transa=OP_T ...] algo=[algoId=21 tile=MATMUL_TILE_32x32
stages=MATMUL_STAGES_64x1] workSpace=...``.  Other lines (API trace, hints, info) are skipped.

Shapes: cuBLAS is column-major, D = op(A) op(B) with D m x n: m = Ddesc.rows (Cdesc without Ddesc), n = its cols,
k = Adesc.cols, or Adesc.rows when ``transa=OP_T``; batch = ``batchCount`` of Ddesc (1 without).  PyTorch computes a
row-major C[M,N] = A[M,K] B[K,N] as the column-major C^T = B^T A^T, so a gemm_shapes row (batch, M, N, K) is the log's
(m, n, k) = (N, M, K); a row that matches only as (M, N, K) is joined too.  Per shape: calls, the algorithms
(``algoId tile stages``) with their call counts, most first.

The legacy cuBLAS API log (``CUBLAS_LOGINFO_DBG=1``, ``CUBLAS_LOGDEST_DBG``; cublasGemmEx, cublasSgemm_v2, ... call
blocks) is read too, line by line beside the cuBLASLt lines (one file may hold both): cublas_api_log.py, whose
docstring cites the format.  Its rows carry the shape, transposes and types but no algorithm ("not logged (fn)").
When one run logs both, a shape can appear in both (both logs can describe the same calls): ``lt_calls`` and
``api_calls`` are kept apart, and ``calls`` is the cuBLASLt count where there is one, else the API count - never
their sum.
"""
from __future__ import annotations

import re
from collections import Counter

from ..errors import ConfigError
from . import cublas_api_log
from .option_file import read_bounded

MAX_BYTES = 256 << 20           # a larger file is refused (exit 2): logs of one profiled run are far smaller
ALGOS_PER_SHAPE = 3
_LINE = re.compile(r"\[Trace\]\[(cublasLt\w{0,40}Matmul)\]")   # trace level: once per call (API-level lines repeat it)
_DESC = re.compile(r"\b([ABCD])desc=\[([^\]]*)\]")
_COMPUTE = re.compile(r"\bcomputeDesc=\[([^\]]*)\]")
_ALGO = re.compile(r"\balgo=\[([^\]]*)\]")
_KV = re.compile(r"(\w+)=(\S+)")


def _kv(text: str) -> dict:
    return dict(_KV.findall(text))


def _int(d: dict, k: str) -> int | None:
    v = d.get(k)
    return int(v) if v is not None and v.isdigit() and len(v) < 19 else None


def algo_label(a: dict) -> str:
    """``algoId=21 tile=32x32 stages=64x1`` (the MATMUL_TILE_/MATMUL_STAGES_ prefixes dropped)."""
    parts = []
    for k in ("algoId", "tile", "stages", "customOption", "splitK", "clusterShape"):
        if k in a:
            v = a[k]
            for pre in ("MATMUL_TILE_", "MATMUL_STAGES_", "CLUSTER_SHAPE_"):
                v = v.removeprefix(pre)
            parts.append(f"{k}={v}")
    return " ".join(parts)


def parse_line(line: str) -> dict | None:
    """One cublasLtMatmul trace line -> {m, n, k, batch, a_type, d_type, compute, ops, algo, source, fn}, or None."""
    if not (lm := _LINE.search(line)):
        return None
    desc = {m.group(1): _kv(m.group(2)) for m in _DESC.finditer(line)}
    a, d = desc.get("A"), desc.get("D") or desc.get("C")
    algo = _ALGO.search(line)
    if a is None or d is None or algo is None:
        return None
    comp = _kv(m.group(1)) if (m := _COMPUTE.search(line)) else {}
    m_, n_ = _int(d, "rows"), _int(d, "cols")
    k_ = _int(a, "rows") if comp.get("transa") == "OP_T" else _int(a, "cols")
    if m_ is None or n_ is None or k_ is None:
        return None
    ops = "".join("T" if comp.get(t) == "OP_T" else "C" if comp.get(t) == "OP_C" else "N" for t in ("transa", "transb"))
    return {"m": m_, "n": n_, "k": k_, "batch": _int(d, "batchCount") or 1, "a_type": a.get("type"),
            "d_type": d.get("type"), "compute": comp.get("computeType"), "ops": ops,
            "algo": algo_label(_kv(algo.group(1))), "source": "lt", "fn": lm.group(1)}


def load(path: str) -> dict:
    """{file, lines, calls: [{m, n, k, batch, a_type, d_type, compute, ops, algo, source, fn}], api_skipped};
    ConfigError (exit 2) for a file that cannot be read.  cuBLASLt lines and cuBLAS API blocks are both read; a file
    with neither loads with no calls (the analysis warns)."""
    raw = read_bounded("--cublas-log", path, MAX_BYTES)
    if b"\0" in raw[:4096]:
        raise ConfigError(f"--cublas-log {path}: a binary file, not a cuBLASLt or cuBLAS log (CUBLASLT_LOG_LEVEL=2+ or "
                          "CUBLAS_LOGINFO_DBG=1 text)")
    text = raw.decode("utf-8", errors="replace")
    lines = text.splitlines()
    calls = [c for c in map(parse_line, lines) if c is not None]
    api_calls, api_skipped = cublas_api_log.parse(lines)
    name = "".join("\ufffd" if 0xD800 <= ord(ch) <= 0xDFFF else ch for ch in str(path))   # a report can write it
    return {"file": name, "lines": len(lines), "calls": calls + api_calls, "api_skipped": api_skipped}


def by_shape(calls: list[dict]) -> dict[tuple, dict]:
    """(batch, m, n, k) in cuBLAS's column-major terms -> {calls, lt_calls, api_calls, algo_text, type_text,
    ops_text}.  ``calls``: the cuBLASLt count where the shape has cuBLASLt lines, else the API count (not summed)."""
    out: dict[tuple, dict] = {}
    for c in calls:
        key = (c["batch"], c["m"], c["n"], c["k"])
        g = out.setdefault(key, {"lt_calls": 0, "api_calls": 0, "algos": Counter(), "types": Counter(),
                                 "ops": Counter()})
        g["lt_calls" if c["source"] == "lt" else "api_calls"] += 1
        g["algos"][c["algo"]] += 1
        g["types"][f"{c['a_type'] or '?'}->{c['d_type'] or '?'}" + (f" {c['compute']}" if c["compute"] else "")] += 1
        g["ops"][c["ops"]] += 1
    for g in out.values():
        g["calls"] = g["lt_calls"] or g["api_calls"]
        g["algo_text"] = "; ".join(f"{a} (x{n})" for a, n in sorted(g["algos"].items(), key=lambda kv: (-kv[1], kv[0]))
                                   [:ALGOS_PER_SHAPE])
        g["type_text"] = max(sorted(g["types"]), key=g["types"].get)
        g["ops_text"] = " ".join(sorted(g["ops"]))
    return out


def join(gemm_table: dict | None, log: dict) -> tuple[dict | None, dict, list[str]]:
    """(gemm_shapes with cublas_calls / cublas_algo columns, the cublas_gemms table, warnings)."""
    warnings: list[str] = []
    if log.get("api_skipped"):
        warnings.append(f"--cublas-log {log['file']}: {log['api_skipped']} cuBLAS API GEMM call block(s) without an "
                        "integer m/n/k or a transa/transb skipped")
    shapes = by_shape(log["calls"])
    if not shapes:
        warnings.append(f"--cublas-log {log['file']}: no cublasLtMatmul trace line and no cuBLAS API GEMM call among "
                        f"its {log['lines']} lines (log with CUBLASLT_LOG_LEVEL=2 or higher, or CUBLAS_LOGINFO_DBG=1); "
                        "nothing joined")
        return gemm_table, {}, warnings
    both = sum(1 for g in shapes.values() if g["lt_calls"] and g["api_calls"])
    if both:
        warnings.append(f"--cublas-log {log['file']}: {both} GEMM shape(s) appear in both its cuBLASLt lines and its "
                        "cuBLAS API calls; their calls count the cuBLASLt lines only (the two logs can describe the "
                        "same calls: lt_calls and api_calls in cublas_gemms)")
    matched: dict[tuple, str] = {}
    if gemm_table:
        cols = gemm_table["columns"]
        ib, im, in_, ik = (cols.index(c) for c in ("batch", "m", "n", "k"))
        rows = []
        for r in gemm_table["rows"]:
            b, m, n, k = (r[ib] or 1), r[im], r[in_], r[ik]
            hit = None
            if None not in (m, n, k):
                for key in ((b, n, m, k), (b, m, n, k)):          # torch row-major as column-major, then as is
                    if key in shapes:
                        hit = key
                        break
            if hit is not None:
                matched.setdefault(hit, r[0])
            rows.append(list(r) + [shapes[hit]["calls"] if hit else None, shapes[hit]["algo_text"] if hit else None])
        gemm_table = {"columns": list(cols) + ["cublas_calls", "cublas_algo"], "rows": rows}
        if not matched:
            warnings.append(f"--cublas-log {log['file']}: none of its {len(shapes)} GEMM shape(s) matches a row of "
                            "gemm_shapes (a log of another run, or ops in another window)")
    order = sorted(shapes, key=lambda s: (-shapes[s]["calls"], s))
    cols = ["batch", "m", "n", "k", "types", "calls", "algos", "gemm_op", "ops", "lt_calls", "api_calls"]
    table = {"columns": cols,
             "rows": [[*key, g["type_text"], g["calls"], g["algo_text"], matched.get(key), g["ops_text"], g["lt_calls"],
                       g["api_calls"]] for key in order for g in (shapes[key],)]}
    return gemm_table, table, warnings
