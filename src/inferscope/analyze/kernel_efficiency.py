"""Measured (Nsight Compute) next to shape-based efficiency for the kernels of a joined capture.

Called by ``kernel_limits.kernel_deep_dive`` with its kernel rows; adds to each row and returns the
section's ``measured_vs_estimated`` and ``launch_range`` blocks.

* measured MBU-like figure: ncu's DRAM throughput, % of peak (``gpu__dram_throughput``), duration-weighted
  over the kernel's profiled launches;
* measured MFU-like figure: the busiest math pipe ncu reports: tensor pipe % of peak, FP32 FMA pipe %,
  SASS FLOP counters / FP32 peak, or tensor-pipe math ops (``sm__ops_path_tensor_*``) / tensor peak when captured; ``n/a: capture lacks ...`` otherwise;
* shape-based estimate (``efficiency.py``'s rules): each counted op's FLOPs and bytes are split over the
  kernels it launched in proportion to their GPU time; a kernel's estimate = its share / its GPU time, over
  the peaks the efficiency section uses (dominant dtype's dense peak, datasheet bandwidth);
* which trace launches: the ones the capture's launches sit at when its name sequence fits the trace's
  kernel sequence at one offset (``--launch-skip`` inferred, counted from the trace's first kernel in the
  window), else the same launches in order when the name has as many launches in the trace as in the
  capture, else all of the name's launches in the window (stated per kernel in ``pairing``);
* GPU-time weighting: per-kernel figures weighted by the kernel's time in the trace (``trace_sum_ms``);
* disagreement: ``thresholds.KERNEL_MEASURED_VS_EST_RATIO`` / ``KERNEL_MEASURED_VS_EST_MIN_PCT``.
"""
from __future__ import annotations

import numpy as np

from .. import thresholds as T
from ..trace.kinds import SpanKind
from .device_peaks import resolve_peaks
from .efficiency import count_ops, dominant_dtype, link_kernels
from .kernels import join_key
from .launched import by_owner
from .links import launchers_for
from .select import in_window

# the offset search narrows candidate offsets launch by launch; when more than one offset still fits after this
# many launches (a capture of one repeated kernel) it stops and says "ambiguous": cost <= this x trace kernels
MAX_AMBIGUOUS_STEPS = 256
LACKS_MFU = ("n/a: capture lacks tensor-pipe and FLOP counters (sm__pipe_tensor_cycles_active, sm__ops_path_tensor_*, "
             "sm__pipe_fma_cycles_active, sm__sass_thread_inst_executed_op_*: --section ComputeWorkloadAnalysis "
             "/ SpeedOfLight_RooflineChart on the raw page)")
LACKS_MBU = "n/a: capture lacks DRAM throughput (gpu__dram_throughput: --section SpeedOfLight)"


def measured(k: dict, dev: dict) -> None:
    """Measured MFU-/MBU-like figures of one deep-dive kernel row (in place)."""
    k["measured_mbu_pct"] = k["dram_pct"]
    k["measured_mbu_basis"] = ("ncu DRAM throughput, % of peak sustained" if k["dram_pct"] is not None else LACKS_MBU)
    cands = []
    if k["tensor_pct"] is not None:
        cands.append((k["tensor_pct"], "tensor pipe busy, % of peak (ncu)"))
    if k["fma_pct"] is not None:
        cands.append((k["fma_pct"], "FP32 FMA pipe busy, % of peak (ncu)"))
    simt = {p: v for p, v in (k["achieved_tflops"] or {}).items() if p != "tensor"}
    if simt and dev.get("peak_fp32_tflops"):
        cands.append((100 * sum(simt.values()) / dev["peak_fp32_tflops"], "SASS FLOP counters / FP32 peak (ncu)"))
    tt = (k["achieved_tflops"] or {}).get("tensor")
    if tt is not None and dev.get("peak_tensor_tflops"):
        cands.append((100 * tt / dev["peak_tensor_tflops"], "tensor-pipe math ops (ncu) / dense bf16 tensor peak (datasheet)"))
    if cands:
        v, basis = max(cands, key=lambda c: c[0])
        k["measured_mfu_pct"], k["measured_mfu_basis"] = round(v, 4), basis
    else:
        k["measured_mfu_pct"], k["measured_mfu_basis"] = None, LACKS_MFU


def _ordered_kernels(trace, window):
    """Kernel spans in the window in launch order (launching call's start, else the kernel's)."""
    s = trace.spans
    idx = in_window(trace, s.kind == SpanKind.KERNEL, window)
    lau = launchers_for(trace, idx)
    t = np.where(lau >= 0, s.start_ns[np.maximum(lau, 0)], s.start_ns[idx])
    return idx[np.lexsort((s.start_ns[idx], t))]


def launch_range(cap: dict, seq_keys: list | None, ncu_keys: list) -> dict:
    """What the launch IDs say about --launch-count/--launch-skip; the offset into the trace when unique."""
    ids = [la["id"] for la in cap["launches"]]
    lo, hi, n = min(ids), max(ids), len(ids)
    contiguous = sorted(ids) == list(range(lo, hi + 1))
    txt = (f"ncu launch IDs {lo}-{hi}: {n} launch(es) in the file, of at least {hi + 1} profiled "
           f"(--launch-count >= {hi + 1}" + ("" if contiguous and lo == 0 else "; IDs not contiguous from 0: the file keeps a subset")
           + "); --launch-skip is not in the CSV")
    skip = None
    fits = 0
    if seq_keys:
        code: dict = {}
        seq = np.array([code.setdefault(k, len(code)) for k in seq_keys], dtype=np.int64)
        want = [code.get(k, -1) for k in ncu_keys]
        cand = np.arange(0, len(seq) - hi, dtype=np.int64)      # offsets o with o + last ID inside the trace
        for j, (i, c) in enumerate(zip(ids, want)):             # narrow launch by launch (bounded: see MAX_AMBIGUOUS_STEPS)
            cand = cand[seq[cand + i] == c]
            if not len(cand) or (len(cand) > 1 and j >= MAX_AMBIGUOUS_STEPS):
                break
        fits = int(len(cand))
        partial = fits > 1 and j < len(ids) - 1                 # stopped early: more offsets fit the launches checked
        if fits == 1:
            skip = int(cand[0])
            txt += (f"; the capture's kernel names fit the trace's kernel sequence at one offset only: launch ID i is the "
                    f"trace's kernel {skip} + i in launch order (--launch-skip {skip} counted from the trace's first kernel "
                    "in the window; ncu counts from process start)")
        else:
            txt += ("; the capture's name sequence fits the trace's kernel sequence at "
                    + (f"{fits} offsets (ambiguous{f', over its first {j + 1} launches' if partial else ''})" if fits
                       else "no offset") + ": --launch-skip not inferable")
    return {"first_id": lo, "last_id": hi, "ids_in_file": n, "contiguous": contiguous, "launch_count_min": hi + 1,
            "launch_skip_in_trace": skip, "offsets_fitting": fits, "text": txt}


def _disagree(what: str, m, e) -> str | None:
    if m is None or e is None or max(m, e) < T.KERNEL_MEASURED_VS_EST_MIN_PCT:
        return None
    ratio = max(m, e) / max(min(m, e), 1e-9)
    if ratio < T.KERNEL_MEASURED_VS_EST_RATIO:
        return None
    why = {("MBU", True): "more DRAM traffic than operands read once (re-reads, spills, ncu's cache flush) or another shape profiled",
           ("MBU", False): "fewer DRAM bytes than operands read once (operands resident in L2) or another shape profiled",
           ("MFU", True): "pipes busier than the shape FLOPs need (padded tiles, split-K, or a different shape profiled)",
           ("MFU", False): "the shape FLOPs over the trace's kernel time exceed the measured pipe use (clocks, or the "
                           "kernel does not do the op's FLOPs: check the op link)"}[(what, m > e)]
    return f"{what}: measured {m:.1f}% vs estimated {e:.1f}% of peak ({ratio:.1f}x): {why}"


def _wavg(rows: list, key: str) -> tuple:
    w = [(r[key], r["trace_sum_ms"]) for r in rows if r.get(key) is not None]
    tot = sum(t for _, t in w)
    return (round(sum(v * t for v, t in w) / tot, 4) if tot > 0 else None), tot


def measured_vs_estimated(trace, window, options, rows: list, groups: dict, dev: dict, cap: dict) -> tuple[dict | None, dict]:
    """Adds pairing/estimate/disagreement fields to each row; returns (measured_vs_estimated, launch_range)."""
    for k in rows:
        measured(k, dev)
        k.update(pairing=None, est_launches=0, est_gpu_ms=None, est_flops=None, est_bytes=None, est_tflops=None,
                 est_gbps=None, est_mfu_pct=None, est_mbu_pct=None, est_ops=[], est_basis="n/a: no timeline joined",
                 disagreement=[])
    ncu_sorted = sorted(cap["launches"], key=lambda la: la["id"])
    ncu_keys = [join_key(la["name"]) for la in ncu_sorted]
    joined = bool(cap.get("joined"))
    seq = _ordered_kernels(trace, window) if joined else np.zeros(0, np.int64)
    s = trace.spans
    strs = trace.strings
    key_of_name = {int(n): join_key(strs[int(n)]) for n in np.unique(s.name[seq]).tolist()} if len(seq) else {}
    seq_keys = [key_of_name[int(n)] for n in s.name[seq].tolist()]
    lr = launch_range(dict(cap, launches=ncu_sorted), seq_keys if joined else None, ncu_keys)
    if not joined or window is None:
        return None, lr
    ops = count_ops(trace, window)
    n_ops = len(ops["idx"])
    dtype = dominant_dtype(ops) if n_ops else None
    tf, gb, src, _, _ = resolve_peaks(trace, dtype, options.peak_tflops if options else None,
                                      options.peak_gbps if options else None)
    gw, pos, linked, kdur = link_kernels(trace, window, ops)
    op_kns = by_owner(np.where(linked, pos, -1), kdur, n_ops)       # whole kernel ns per counted op
    by_key: dict[str, list] = {}
    for i, kk in zip(seq.tolist(), seq_keys):
        by_key.setdefault(kk, []).append(i)
    opnames = trace.strings.as_list()
    for k in rows:
        key = join_key(k["name"])
        las = sorted(groups[key], key=lambda la: la["id"])
        mine = by_key.get(key, [])
        if lr["launch_skip_in_trace"] is not None:
            sel = [int(seq[lr["launch_skip_in_trace"] + la["id"]]) for la in las]
            k["pairing"] = "launch offset: the trace launches the capture's launch IDs sit at"
        elif mine and len(mine) == len(las):
            sel = mine
            k["pairing"] = f"launch order within the name ({len(las)} launch(es) in the capture and in the trace)"
        else:
            sel = mine
            k["pairing"] = (f"name only: all {len(mine)} launch(es) of the name in the window "
                            f"({len(las)} in the capture; not located in the trace)" if mine else "not in the trace")
        if not mine:
            k["est_basis"] = "n/a: the kernel is not in the trace's window"
            continue
        if not n_ops:
            k["est_basis"] = "n/a: the trace has no GEMM/attention/convolution op with recorded shapes"
            continue
        sel = np.asarray(sel, dtype=np.int64)
        rws = np.clip(np.searchsorted(gw, sel), 0, max(len(gw) - 1, 0))      # gw is sorted (flatnonzero)
        rws = rws[(gw[rws] == sel) & linked[rws]] if len(gw) else np.zeros(0, np.int64)
        if not len(rws):
            k["est_basis"] = "n/a: not launched by an op with recorded shapes (GEMM/attention/convolution)"
            continue
        p = pos[rws]
        frac = kdur[rws] / np.maximum(op_kns[p], 1)
        fl, by, ns = float((ops["flops"][p] * frac).sum()), float((ops["bytes"][p] * frac).sum()), float(kdur[rws].sum())
        k.update(est_launches=int(len(rws)), est_gpu_ms=round(ns / 1e6, 6), est_flops=fl, est_bytes=by,
                 est_ops=sorted({opnames[int(x)] for x in ops["name"][p].tolist()})[:4])
        if ns > 0:
            k["est_tflops"] = round(fl / ns / 1e3, 4)
            k["est_gbps"] = round(by / ns, 3)
            k["est_mfu_pct"] = round(100 * k["est_tflops"] / tf, 4) if tf else None
            k["est_mbu_pct"] = round(100 * k["est_gbps"] / gb, 4) if gb else None
        k["est_basis"] = ("shape-based (estimate): the launching ops' FLOPs and bytes (operands once) split over their "
                          f"kernels by GPU time, over {k['est_gpu_ms']:.3f} ms of this kernel in {len(rws)} launch(es)")
        k["disagreement"] = [d for d in (_disagree("MFU", k["measured_mfu_pct"], k["est_mfu_pct"]),
                                         _disagree("MBU", k["measured_mbu_pct"], k["est_mbu_pct"])) if d]
    matched = [r for r in rows if r["trace_calls"]]
    tot = sum(r["trace_sum_ms"] for r in matched)
    figs = {}
    for what, mk, ek in (("mfu", "measured_mfu_pct", "est_mfu_pct"), ("mbu", "measured_mbu_pct", "est_mbu_pct")):
        m, mt = _wavg(matched, mk)
        e, et = _wavg(matched, ek)
        both = [r for r in matched if r[mk] is not None and r[ek] is not None]
        bm, bt = _wavg(both, mk)
        be, _ = _wavg(both, ek)
        figs[what] = {"measured_pct": m, "measured_share_pct": round(100 * mt / tot, 4) if tot else 0.0,
                      "est_pct": e, "est_share_pct": round(100 * et / tot, 4) if tot else 0.0,
                      "both_measured_pct": bm, "both_est_pct": be, "both_kernels": len(both),
                      "both_share_pct": round(100 * bt / tot, 4) if tot else 0.0,
                      "disagreement": _disagree(what.upper(), bm, be)}
    eff_win = None
    if n_ops and window is not None:
        win_s = (window.end_ns - window.start_ns) / 1e9
        if win_s > 0:
            eff_win = {"mfu_pct": (100 * float(ops["flops"].sum()) / win_s / 1e12 / tf) if tf else None,
                       "mbu_pct": (100 * float(ops["bytes"].sum()) / win_s / 1e9 / gb) if gb else None}
    mve = {"matched_kernels": len(matched), "matched_gpu_ms": round(tot, 6),
           "matched_share_pct": round(sum(r["share_pct"] for r in matched), 4),
           "peak_tflops": tf, "peak_gbps": gb, "peak_source": src, "dtype": dtype,
           "mfu": figs["mfu"], "mbu": figs["mbu"],
           "window_mfu_pct": eff_win["mfu_pct"] if eff_win else None,
           "window_mbu_pct": eff_win["mbu_pct"] if eff_win else None,
           "disagreements": [f"{r['short_name']}: {d}" for r in matched for d in r["disagreement"]],
           "basis": ("measured: ncu's DRAM throughput % of peak (MBU-like) and busiest math pipe % of peak (MFU-like) of "
                     "the profiled launches; estimated: shape-based FLOPs and bytes of the ops that launched the same "
                     "kernels in the trace, over their GPU time, against the efficiency section's peaks; both weighted by "
                     "each kernel's GPU time in the trace (pct over the kernels that have the figure; 'both' = kernels with "
                     f"both); disagree = one >= {T.KERNEL_MEASURED_VS_EST_RATIO:g}x the other with either >= "
                     f"{T.KERNEL_MEASURED_VS_EST_MIN_PCT:g}% of peak")}
    return mve, lr
