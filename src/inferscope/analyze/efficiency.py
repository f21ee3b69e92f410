"""Achieved FLOPs from recorded shapes, device peaks, MFU and MBU (issue 11).

Shapes: CPU_OP spans carry ``{"dims", "types", "concrete"}`` (Kineto ``record_shapes``: ``Input Dims``,
``Input type``, ``Concrete Inputs``) as a string id in ``detail`` (ingest/kineto/build.py).

Counting rules (each op counted once, nested calls never twice):
  * GEMM family (``aten::mm``, ``addmm``, ``bmm``, ``baddbmm``, ``matmul``, ``linear``): only the innermost
    op of the family (``linear`` -> ``addmm``: the ``addmm``), 2*M*N*K per product, batched products per batch;
  * attention (``scaled_dot_product_attention`` and its flash/efficient/cudnn variants): the outermost op,
    4*B*H*Sq*Sk*D (QK^T and PV); halved when the op says ``is_causal`` and Sq == Sk;
  * convolution (``aten::convolution``): 2 * N * Cout * prod(out spatial) * Cin/groups * prod(kernel);
    attention/convolution ops that contain a GEMM op are left to the GEMM rule.
Bytes per op: every operand read once and the output written once (a lower bound on its DRAM traffic).
Kernel time per op: the kernels whose launching call has the op as its nearest counted ancestor.
FLOPs and bytes of one op call from its shapes: op_flops.py; device peaks: device_peaks.py.
"""
from __future__ import annotations

import math

import numpy as np

from ..trace.kinds import SpanKind
from ..trace.model import Trace
from .classify import gpu_work_mask
from .device_peaks import device_peak, resolve_peaks
from .launched import by_owner, launched_gpu
from .op_flops import ATTN_OPS, CONV_OPS, GEMM_OPS, dtype_of, op_cost
from .select import starts_inside
from .window import Window

# re-exported: op_flops and device_peaks were part of this module
__all__ = ["ATTN_OPS", "CONV_OPS", "GEMM_OPS", "count_ops", "device_peak", "dominant_dtype", "dtype_of", "efficiency",
           "efficiency_table", "link_kernels", "op_cost", "resolve_peaks"]


# ------------------------------------------------------------------------------- analysis

def _nearest_marked_ancestor(parent: np.ndarray, idx: np.ndarray, marked: np.ndarray, include_self: bool,
                             max_depth: int = 128) -> np.ndarray:
    cur = idx.astype(np.int64) if include_self else parent[idx].astype(np.int64)
    out = np.full(len(idx), -1, dtype=np.int64)
    todo = cur >= 0
    for _ in range(max_depth):
        if not todo.any():
            break
        ti = np.flatnonzero(todo)
        c = cur[ti]
        hit = marked[c]
        out[ti[hit]] = c[hit]
        nxt = parent[c].astype(np.int64)
        nxt[hit] = -1
        cur[ti] = nxt
        todo = cur >= 0
    return out


def count_ops(trace: Trace, window: Window) -> dict:
    """Per counted op call in the window: index, family, flops, bytes, dtype, name (vectorised over distinct shapes).
    Made once per trace and window (efficiency, gemm_shapes and module_hotspots share it; callers never modify it)."""
    cache = trace.__dict__.setdefault("_mask_cache", {})
    key = ("count_ops", int(window.start_ns), int(window.end_ns), len(trace.spans), len(trace.strings))
    if key not in cache:
        cache[key] = _count_ops(trace, window)
    return cache[key]


def _count_ops(trace: Trace, window: Window) -> dict:
    s = trace.spans
    strs = trace.strings.as_list()
    fam_of_name = {}
    for i, nm in enumerate(strs):
        if nm in GEMM_OPS:
            fam_of_name[i] = 1
        elif nm in ATTN_OPS:
            fam_of_name[i] = 2
        elif nm in CONV_OPS:
            fam_of_name[i] = 3
    n = len(s)
    empty = {"idx": np.zeros(0, np.int64), "fam": np.zeros(0, np.int8), "flops": np.zeros(0, np.float64),
             "bytes": np.zeros(0, np.float64), "dtype": [], "name": np.zeros(0, np.int32), "shapes_recorded": 0,
             "candidates": 0, "uncountable": 0}
    if not fam_of_name or n == 0:
        return empty
    lut = np.zeros(len(strs) + 1, dtype=np.int8)
    for k, v in fam_of_name.items():
        lut[k] = v
    name = s.name
    fam = np.where(name >= 0, lut[np.clip(name, 0, len(strs))], 0).astype(np.int8)
    fam[s.kind != SpanKind.CPU_OP] = 0
    cand = np.flatnonzero(fam > 0)
    if not len(cand):
        return empty
    parent = s.parent
    # GEMM: innermost of the family; attention/conv: outermost, and only without a GEMM inside
    gemm_m = np.zeros(n, dtype=bool)
    gemm_m[cand[fam[cand] == 1]] = True
    gi = np.flatnonzero(gemm_m)
    anc = _nearest_marked_ancestor(parent, gi, gemm_m, include_self=False)
    has_gemm_child = np.zeros(n, dtype=bool)
    has_gemm_child[anc[anc >= 0]] = True
    # ancestors of any GEMM (all levels) for the attention/conv exclusion
    contains_gemm = np.zeros(n, dtype=bool)
    cur = parent[gi].astype(np.int64)
    for _ in range(128):
        cur = cur[cur >= 0]
        if not len(cur):
            break
        contains_gemm[cur] = True
        cur = parent[cur].astype(np.int64)
    other_m = np.zeros(n, dtype=bool)
    other_m[cand[fam[cand] >= 2]] = True
    oi = np.flatnonzero(other_m)
    oanc = _nearest_marked_ancestor(parent, oi, other_m, include_self=False)
    keep = np.zeros(n, dtype=bool)
    keep[gi[~has_gemm_child[gi]]] = True
    keep[oi[(oanc < 0) & ~contains_gemm[oi]]] = True
    inwin = starts_inside(s.start_ns, window)
    idx = np.flatnonzero(keep & inwin)
    det = s.detail[idx]
    shaped = det >= 0
    key = name[idx].astype(np.int64) * (len(strs) + 2) + det.astype(np.int64) + 1
    uk, inv = np.unique(key, return_inverse=True)
    f_u = np.zeros(len(uk)); b_u = np.zeros(len(uk)); ok_u = np.zeros(len(uk), dtype=bool)
    dt_u: list = [None] * len(uk)
    fam_u = np.zeros(len(uk), dtype=np.int8)
    for j, kk in enumerate(uk.tolist()):
        nid, did = divmod(kk, len(strs) + 2)
        did -= 1
        if did < 0:
            continue
        r = op_cost(strs[nid], strs[did])
        if r is None:
            continue
        ok_u[j] = True
        fam_u[j] = {"gemm": 1, "attention": 2, "conv": 3}[r[0]]
        f_u[j], b_u[j], dt_u[j] = r[1], r[2], r[3]
    ok = ok_u[inv]
    return {"idx": idx[ok], "fam": fam_u[inv][ok], "flops": f_u[inv][ok], "bytes": b_u[inv][ok],
            "dtype": [dt_u[j] for j in inv[ok].tolist()], "name": name[idx[ok]],
            "shapes_recorded": int(shaped.sum()), "candidates": int(len(idx)),
            "uncountable": int((shaped & ~ok).sum())}


def _roofline(ai: float | None, tf: float | None, gb: float | None) -> str | None:
    if ai is None or not tf or not gb:
        return None
    return "compute-bound" if ai >= tf * 1e12 / (gb * 1e9) else "memory-bound"


def dominant_dtype(ops: dict) -> str | None:
    """The dtype holding the most counted FLOPs (it picks the peak MFU is measured against)."""
    dts = np.array([d or "" for d in ops["dtype"]], dtype=object)
    by_dt = {d: float(ops["flops"][dts == d].sum()) for d in set(dts.tolist())}
    return (max(by_dt, key=by_dt.get) or None) if by_dt else None


def link_kernels(trace: Trace, window: Window, ops: dict):
    """Kernels starting in the window (gw), the position in ``ops`` of the counted op nearest above each
    one's launching call (pos), whether it has one (linked), and each kernel's duration in ns (kdur)."""
    s = trace.spans
    n_ops = len(ops["idx"])
    lg = launched_gpu(trace, window, mask=gpu_work_mask(trace) & (s.kind == SpanKind.KERNEL))
    gw, lau = lg.gpu, lg.launcher
    counted = np.zeros(len(s), dtype=bool)
    counted[ops["idx"]] = True
    kop = np.full(len(gw), -1, dtype=np.int64)
    okl = lau >= 0
    if okl.any():
        kop[okl] = _nearest_marked_ancestor(s.parent, lau[okl], counted, include_self=True)
    kdur = lg.whole_ns
    pos = np.clip(np.searchsorted(ops["idx"], kop), 0, max(n_ops - 1, 0))
    linked = (kop >= 0) & (ops["idx"][pos] == kop) if n_ops else np.zeros(len(kop), dtype=bool)
    return gw, pos, linked, kdur


def efficiency(trace: Trace, window: Window, peak_tflops: float | None = None, peak_gbps: float | None = None,
               top_n: int = 20) -> dict | None:
    """The ``efficiency`` section, or None when the trace has no countable op (no shapes recorded)."""
    s = trace.spans
    ops = count_ops(trace, window)
    cpu_ops = bool((s.kind == SpanKind.CPU_OP).any())
    if not cpu_ops:
        return None
    warnings: list[str] = []
    n_ops = len(ops["idx"])
    if n_ops == 0:
        if ops["candidates"]:
            warnings.append(f"FLOPs unknown: {ops['candidates']} matrix-multiply/attention/convolution op(s) in the window "
                            "but no recorded input shapes (record_shapes=True in torch.profiler gives them); "
                            "efficiency is null")
            return {"_warnings_only": warnings}
        return None
    fam = ops["fam"]
    flops = ops["flops"]
    byts = ops["bytes"]
    dtype = dominant_dtype(ops)
    tf, gb, src, dev, w = resolve_peaks(trace, dtype, peak_tflops, peak_gbps)
    warnings += w
    gw, pos, linked, kdur = link_kernels(trace, window, ops)
    op_kns = by_owner(np.where(linked, pos, -1), kdur, n_ops)       # whole kernel ns per counted op
    op_has_kernel = np.bincount(pos[linked], minlength=n_ops) > 0 if n_ops else np.zeros(0, bool)
    win_s = (window.end_ns - window.start_ns) / 1e9
    gpu = trace.has_gpu
    tot = {f: float(flops[fam == c].sum()) for f, c in (("gemm", 1), ("attention", 2), ("conv", 3))}
    total_flops = float(flops.sum())
    total_bytes = float(byts.sum())
    kernel_ms = float(op_kns.sum()) / 1e6
    g = fam == 1
    gemm_kms = float(op_kns[g].sum()) / 1e6
    gemm_linked = float(flops[g & op_has_kernel].sum())
    achieved = total_flops / win_s / 1e12 if win_s > 0 else None
    mfu = 100.0 * achieved / tf if (achieved is not None and tf) else None
    gbps = total_bytes / win_s / 1e9 if win_s > 0 else None
    mbu = 100.0 * gbps / gb if (gbps is not None and gb) else None
    if gpu and not len(gw):
        warnings.append("no kernels in the window: per-kernel achieved TFLOP/s is null")
    if ops["uncountable"]:
        warnings.append(f"{ops['uncountable']} op call(s) with recorded shapes could not be counted (unsupported layout); "
                        "their FLOPs are not in the totals")
    # per op name
    rows = []
    strs = trace.strings.as_list()
    nm = ops["name"]
    for u in np.unique(nm).tolist():
        m = nm == u
        fl = float(flops[m].sum()); by = float(byts[m].sum()); kns = float(op_kns[m].sum())
        ai = fl / by if by else None
        rows.append({"op": strs[u], "calls": int(m.sum()), "gflops": fl / 1e9, "mbytes": by / 1e6,
                     "kernel_ms": kns / 1e6 if gpu else None,
                     "achieved_tflops": (fl / (kns / 1e9) / 1e12) if kns > 0 else None,
                     "achieved_gbps": (by / (kns / 1e9) / 1e9) if kns > 0 else None,
                     "intensity_flop_per_byte": ai, "roofline": _roofline(ai, tf, gb),
                     "pct_of_flops": 100.0 * fl / total_flops if total_flops else 0.0})
    rows.sort(key=lambda r: -r["gflops"])
    return {
        "device": dev, "dtype": dtype,
        "gemm_flops": tot["gemm"], "attention_flops": tot["attention"], "conv_flops": tot["conv"],
        "total_flops": total_flops, "bytes_moved_est": total_bytes,
        "counted_ops": n_ops, "ops_without_shapes": int(ops["candidates"] - ops["shapes_recorded"]),
        "window_s": win_s,
        "kernel_ms": kernel_ms if gpu else None,
        "gemm_kernel_ms": gemm_kms if gpu else None,
        "gemm_kernel_tflops": (gemm_linked / (gemm_kms / 1e3) / 1e12) if gemm_kms > 0 else None,
        "achieved_tflops": achieved, "achieved_gbps": gbps,
        "peak_tflops": tf, "peak_gbps": gb, "peak_source": src,
        "mfu_pct": mfu, "mbu_pct": mbu,
        "ridge_flop_per_byte": (tf * 1e12 / (gb * 1e9)) if (tf and gb) else None,
        "by_op": rows[:top_n],
        "basis": ("FLOPs from recorded input shapes (GEMM 2*M*N*K per product, batched per batch; attention 4*B*H*Sq*Sk*D, "
                  "halved when causal with Sq == Sk; convolution 2*N*Cout*out*Cin/groups*kernel), each op once; "
                  "achieved = FLOPs / window wall time; MFU = achieved / dense peak for the dominant dtype; "
                  "bytes = operands read once + output written once (a lower bound, an estimate); "
                  "MBU = those bytes / window / peak bandwidth; kernel TFLOP/s = FLOPs / GPU time of the kernels "
                  "those ops launched"),
        "_warnings": warnings,
    }


def efficiency_table(e: dict) -> dict:
    return {"columns": ["op", "calls", "gflops", "mbytes", "kernel_ms", "achieved_tflops", "achieved_gbps",
                        "intensity_flop_per_byte", "roofline", "pct_of_flops"],
            "rows": [[r["op"], r["calls"], round(r["gflops"], 6), round(r["mbytes"], 6),
                      None if r["kernel_ms"] is None else round(r["kernel_ms"], 6),
                      None if r["achieved_tflops"] is None else round(r["achieved_tflops"], 4),
                      None if r["achieved_gbps"] is None else round(r["achieved_gbps"], 3),
                      None if r["intensity_flop_per_byte"] is None else round(r["intensity_flop_per_byte"], 3),
                      r["roofline"], round(r["pct_of_flops"], 4)] for r in e["by_op"]]}
