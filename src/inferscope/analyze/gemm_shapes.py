"""GEMM shapes: the M/N/K (and batch) of every counted matrix-multiply call, grouped, with the kernels they
launched and the TFLOP/s those kernels achieved (table ``gemm_shapes``).

Which calls: efficiency.count_ops' GEMM rule (``mm``/``addmm``/``bmm``/``baddbmm``/``matmul``/``linear`` with
recorded shapes, the innermost op of the family, so ``linear`` -> ``addmm`` is one call, the ``addmm``).
M/N/K from op_flops.gemm_mnk (``linear``: the input's leading dims flattened to M).  Kernels: those whose
launching call has the op as its nearest counted ancestor (efficiency.link_kernels).  One row per
(op, dtype, batch, M, N, K): calls, GFLOPs, the kernels' GPU time, the names of the kernels with the most time
(launches each), achieved TFLOP/s = FLOPs of the calls that launched a kernel / their kernel time.
Rows by kernel time, then FLOPs; the ``top_n`` first.
"""
from __future__ import annotations

import json

import numpy as np

from ..trace.model import Trace
from .efficiency import count_ops, link_kernels
from .op_flops import gemm_mnk
from .window import Window

KERNELS_PER_SHAPE = 2      # kernel names shown per row (the most GPU time)
COLUMNS = ["op", "dtype", "batch", "m", "n", "k", "calls", "gflops", "kernel_ms", "achieved_tflops", "kernels"]


def _mnk_of(name: str, detail_json: str):
    try:
        r = gemm_mnk(name, json.loads(detail_json).get("dims") or [])
    except (ValueError, AttributeError, TypeError, IndexError, OverflowError):
        return None
    if r is None or not all(0 <= int(x) < 2 ** 62 for x in r):      # hostile dims: no row rather than an overflow
        return None
    return r


def gemm_shapes(trace: Trace, window: Window, top_n: int = 20) -> dict | None:
    """The ``gemm_shapes`` table, or None without a counted GEMM call in the window."""
    ops = count_ops(trace, window)
    g = np.flatnonzero(ops["fam"] == 1)
    if not len(g):
        return None
    s = trace.spans
    strs = trace.strings.as_list()
    idx = ops["idx"]
    # (name, detail) per counted GEMM call -> (batch, M, N, K), once per distinct pair
    nd = s.name[idx[g]].astype(np.int64) * (len(strs) + 1) + s.detail[idx[g]].astype(np.int64)
    und, ndinv = np.unique(nd, return_inverse=True)
    mnk_u = np.full((len(und), 4), -1, dtype=np.int64)
    for j, key in enumerate(und.tolist()):
        nid, did = divmod(key, len(strs) + 1)
        r = _mnk_of(strs[nid], strs[did])
        if r is not None:
            mnk_u[j] = r
    dts = sorted({d or "" for d in ops["dtype"]})
    dt_code = np.array([dts.index(ops["dtype"][i] or "") for i in g.tolist()], dtype=np.int64)
    # group key: (name, dtype, batch, M, N, K)
    keys = np.column_stack((s.name[idx[g]].astype(np.int64), dt_code, mnk_u[ndinv]))
    ukeys, ginv = np.unique(keys, axis=0, return_inverse=True)
    ginv = ginv.reshape(-1)
    ng = len(ukeys)
    grp_of_op = np.full(len(idx), -1, dtype=np.int64)
    grp_of_op[g] = ginv
    flops = ops["flops"]
    calls = np.bincount(ginv, minlength=ng)
    gflops = np.bincount(ginv, weights=flops[g], minlength=ng) / 1e9
    gw, pos, linked, kdur = link_kernels(trace, window, ops)
    kg = np.where(linked, grp_of_op[pos] if len(idx) else -1, -1)
    kin = kg >= 0
    k_ns = np.bincount(kg[kin], weights=kdur[kin], minlength=ng)
    # FLOPs of the calls that launched at least one kernel (the achieved rate's numerator)
    has_k = np.zeros(len(idx), dtype=bool)
    has_k[pos[linked]] = True
    lf = np.bincount(ginv, weights=np.where(has_k[g], flops[g], 0.0), minlength=ng)
    # kernel names per group: GPU time and launches per (group, kernel name)
    kn = s.name[gw[kin]].astype(np.int64)
    pair = kg[kin] * (len(strs) + 1) + kn
    up, pinv = np.unique(pair, return_inverse=True)
    p_ns = np.bincount(pinv, weights=kdur[kin], minlength=len(up))
    p_n = np.bincount(pinv, minlength=len(up))
    pg, pk = np.divmod(up, len(strs) + 1)
    o = np.lexsort((pk, -p_ns, pg))
    names: dict[int, list[str]] = {}
    for gi, ki, c in zip(pg[o].tolist(), pk[o].tolist(), p_n[o].tolist()):
        lst = names.setdefault(gi, [])
        if len(lst) < KERNELS_PER_SHAPE:
            lst.append(f"{strs[ki]} (x{c})")
    gpu = trace.has_gpu
    rows = []
    for j in range(ng):
        nid, dc, b, m, n, k = ukeys[j].tolist()
        kms = float(k_ns[j]) / 1e6
        rows.append([strs[nid], dts[dc] or None, b if b >= 0 else None, m if m >= 0 else None,
                     n if n >= 0 else None, k if k >= 0 else None, int(calls[j]), round(float(gflops[j]), 9),
                     round(kms, 6) if gpu else None,
                     round(float(lf[j]) / (kms / 1e3) / 1e12, 4) if kms > 0 else None,
                     "; ".join(names.get(j, []))])
    rows.sort(key=lambda r: (-(r[8] or 0.0), -r[7], r[0], r[2] or 0, r[3] or 0, r[4] or 0, r[5] or 0))
    return {"columns": list(COLUMNS), "rows": rows[:top_n]}
