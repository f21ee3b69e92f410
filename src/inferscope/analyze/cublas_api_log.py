"""The legacy cuBLAS API log (``CUBLAS_LOGINFO_DBG=1``, ``CUBLAS_LOGDEST_DBG=stdout|stderr|FILE``) read for
``--cublas-log``: each GEMM call's shape, transposes and types, in the rows ``cublas_log.join`` uses.  The log names
no algorithm or tile (cuBLAS picks them inside the call): those rows say "not logged".

The format, as real logs quoted in public sources show it (each field's source):
- one block per call, opened by ``I! cuBLAS (v13.4.1) function cublasStatus_t cublasSgemm_v2(cublasHandle_t,
  cublasOperation_t, ...) called:`` (surya-mp/go-peft docs/cuda-validation-2026-09-11.md, a CUBLAS_LOGINFO_DBG=1 log
  of cuBLAS 13.4.1; JuliaGPU/CUDA.jl issue 609, cuBLAS 11.1/11.2 logs); on Windows the signature reads
  ``cublasStatus_t __cdecl cublasGemmEx(`` (a public parser of such logs matches that prefix);
- one line per argument, named as in the API signature: ``i!  transa: type=cublasOperation_t; val=CUBLAS_OP_T(1)``,
  ``i!  m: type=int; val=2`` (n, k, lda, ... alike), ``i!  A: type=float; val=POINTER (IN HEX:0x...)`` (go-peft's
  log, cublasSgemm_v2: the typed functions give the element type only as the pointer's ``type=``);
- for the Ex functions, ``i!  Atype: type=cudaDataType_t; val=CUDA_R_16F(2)``, ``Btype``/``Ctype`` alike, and
  ``i!  computeType: type=cublasComputeType_t; val=CUBLAS_COMPUTE_32F(68)`` (JuliaGPU/juliagpu.org, the CUDA.jl 2.0
  post, cuBLAS 11.0 cublasGemmEx log);
- the batched functions' ``batchCount`` argument is read the same way (its line follows the ``name: type=..; val=``
  rule of every argument; no quoted log of a batched call was found, so that line's exact text is the rule's);
- then ``i! Time: ...``, ``i!Process=...; Thread=...; GPU=0; ...``, ``i! COMPILED WITH: ...`` lines, skipped.

Shapes are cuBLAS's own column-major (m, n, k) as passed: the join matches them like the cuBLASLt rows.  Type names
drop the ``CUDA_`` / ``CUBLAS_`` prefixes so they read as cuBLASLt's (``R_16F``, ``COMPUTE_32F``).
"""
from __future__ import annotations

import re

_HEAD = re.compile(r"^I! cuBLAS \(v[0-9.]{1,20}\) function cublasStatus_t (?:__\w{1,20} )?(cublas\w{1,60})\(")
_ARG = re.compile(r"^i!\s+(\w{1,40}): type=([^;]{0,80}); val=(\S{0,80})")
_GEMM = re.compile(r"cublas[A-Z]?[Gg]emm\w*")       # Sgemm_v2, Hgemm, GemmEx, SgemmEx, GemmStridedBatchedEx, ...
_OP = re.compile(r"CUBLAS_OP_([A-Z])\b")
_ENUM_CODE = re.compile(r"\(\d{1,6}\)$")


def _int(args: dict, name: str) -> int | None:
    v = args.get(name, (None, None))[1]
    return int(v) if v is not None and v.isdigit() and len(v) < 19 else None


def _enum(args: dict, name: str) -> str | None:
    """``CUDA_R_16F(2)`` -> ``R_16F``; ``CUBLAS_COMPUTE_32F(68)`` -> ``COMPUTE_32F``; absent -> None."""
    v = args.get(name, (None, None))[1]
    if not v:
        return None
    v = _ENUM_CODE.sub("", v)
    for pre in ("CUDA_", "CUBLAS_"):
        v = v.removeprefix(pre)
    return v or None


def _op(args: dict, name: str) -> str | None:
    m = _OP.match(args.get(name, (None, ""))[1] or "")
    return m.group(1) if m else None


def _call(fn: str, args: dict) -> dict | None:
    """One GEMM block -> {m, n, k, batch, a_type, d_type, compute, ops, algo, source, fn}; None without integer
    m, n, k or known transposes."""
    m, n, k = _int(args, "m"), _int(args, "n"), _int(args, "k")
    ta, tb = _op(args, "transa"), _op(args, "transb")
    if m is None or n is None or k is None or ta is None or tb is None:
        return None
    a_type = _enum(args, "Atype") or (args.get("A", (None,))[0] or None)
    d_type = _enum(args, "Ctype") or (args.get("C", (None,))[0] or None)
    return {"m": m, "n": n, "k": k, "batch": _int(args, "batchCount") or 1, "a_type": a_type, "d_type": d_type,
            "compute": _enum(args, "computeType"), "ops": ta + tb, "algo": f"not logged ({fn})", "source": "api",
            "fn": fn}


def parse(lines: list[str]) -> tuple[list[dict], int]:
    """(GEMM calls, GEMM blocks skipped for a missing or non-integer m/n/k or transpose).  A block is its header
    line and the ``i!`` lines right after it; any other line ends it (a cuBLASLt line, program output)."""
    calls: list[dict] = []
    skipped = 0
    fn, args = None, {}

    def close():
        nonlocal skipped
        if fn is not None and _GEMM.fullmatch(fn):
            c = _call(fn, args)
            if c is None:
                skipped += 1
            else:
                calls.append(c)

    for line in lines:
        if line.startswith("i!") and fn is not None:
            a = _ARG.match(line)
            if a:
                args.setdefault(a.group(1), (a.group(2).strip(), a.group(3)))
            continue
        close()
        fn, args = None, {}
        h = _HEAD.match(line) if line.startswith("I! cuBLAS") else None
        if h:
            fn = h.group(1)
    close()
    return calls, skipped
