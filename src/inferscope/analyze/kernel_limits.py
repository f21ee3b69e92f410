"""Kernel deep-dive: what limits each kernel Nsight Compute profiled, and the lever that follows.

Input: ``trace.meta["ncu"]`` (``ingest/ncu.py``: an ``analyze profile.ncu.csv`` capture, or one joined
to a timeline with ``--ncu``).  Per kernel (launches grouped by name; % metrics are duration-weighted
means over its launches):

* peaks from the capture: DRAM = 2 x memory clock x bus width (device attributes, raw page), FP32 =
  SMs x FP32 lanes per SM (``FP32_LANES`` by compute capability) x 2 x SM clock; else the datasheet
  row (``thresholds.DEVICE_PEAKS``), whose source is stated;
* roofline: measured FLOPs (``sm__sass_thread_inst_executed_op_*``: add + mul + 2 fma, per precision)
  over DRAM bytes (``dram__bytes``, or read + write; summed over the launches); without them the bytes are
  *estimated* as DRAM % of peak x peak bandwidth x duration (labelled ``dram_bytes_estimated``);
* limiter (``thresholds.KERNEL_BOUND_PCT``, ncu's own 60 % rule): compute-bound on Tensor Cores when the
  busiest tensor pipe is >= 60 % of peak and leads memory; memory-bound when DRAM or memory throughput
  leads at >= 60 %; compute-bound when SM throughput does: on Tensor Cores (``tensor_core``: tensor pipe
  >= ``KERNEL_TENSOR_UNUSED_PCT`` or tensor math ops / instructions counted), on the FP32 pipes (tensor pipe
  captured and idle: the only case told to use Tensor Cores), or with the tensor pipe not captured (told to
  capture it); else latency-bound (worded by waves and occupancy);
* roofline: SASS FLOPs plus tensor-pipe math ops (``sm__ops_path_tensor_*``) over DRAM bytes, against the
  tensor ridge when tensor ops were counted, else the FP32 one;
* warp stall reasons (WarpStateStats / SourceCounters metrics): the top states by share of the warp cycles
  between issued instructions (``kernel_stalls.py``);
* share of GPU time: the trace's kernel time in the window for kernels of the same name (names are
  normalised: ncu and CUPTI demangle differently), or of the profiled launches for a bare capture.
"""
from __future__ import annotations

import numpy as np

from .. import thresholds as T
from ..trace.kinds import SpanKind
from .device_peaks import device_peak
from .kernel_efficiency import measured_vs_estimated
from .kernel_stalls import kernel_stalls, stall_text
from .kernels import join_key, short_kernel_name  # noqa: F401 - join_key: re-exported
from .select import clipped_durations, in_window

FP32_LANES = {"7.0": 64, "7.2": 64, "7.5": 64, "8.0": 64, "8.6": 128, "8.7": 128, "8.9": 128, "9.0": 128,
              "10.0": 128, "10.3": 128, "12.0": 128}          # CUDA C++ Programming Guide, arithmetic instructions table
def _peaks(la: dict) -> dict:
    m = la["metrics"]
    out = {"name": la.get("device_name"), "sm_count": m.get("sm_count"), "sm_clock_ghz": None, "peak_dram_gbps": None,
           "peak_fp32_tflops": None, "peak_tensor_tflops": None, "peak_source": None}
    clk = m.get("sm_clock_attr_hz") or m.get("sm_hz")
    out["sm_clock_ghz"] = round(clk / 1e9, 4) if clk else None
    src = []
    if m.get("mem_clock_attr_hz") and m.get("bus_width_bits"):
        out["peak_dram_gbps"] = round(2 * m["mem_clock_attr_hz"] * m["bus_width_bits"] / 8 / 1e9, 1)
        src.append("DRAM: 2 x memory clock x bus width (capture's device attributes)")
    lanes = FP32_LANES.get(la.get("cc") or "")
    if lanes and clk and m.get("sm_count"):
        out["peak_fp32_tflops"] = round(m["sm_count"] * lanes * 2 * clk / 1e12, 2)
        src.append(f"FP32: SMs x {lanes} lanes x 2 x SM clock (capture)")
    row = device_peak(la.get("device_name"))
    if row is None and la.get("cc") == "9.0" and (m.get("sm_count") or 0) >= 132:
        row = device_peak("h100")                   # details page: no device name; CC 9.0 with 132 SMs
    if row is not None:
        out["peak_tensor_tflops"] = row["tflops"].get("bf16")
        if out["peak_dram_gbps"] is None:
            out["peak_dram_gbps"] = row["gbps"]
        if out["peak_fp32_tflops"] is None:
            out["peak_fp32_tflops"] = row["tflops"].get("fp32")
        src.append(f"datasheet ({row['label']}: {row['source']})")
    out["peak_source"] = "; ".join(src) or None
    return out


def _wmean(vals: list, w: np.ndarray):
    ok = np.array([v is not None for v in vals])
    if not ok.any():
        return None
    v = np.array([x for x in vals if x is not None], dtype=np.float64)
    ww = w[ok]
    return float((v * ww).sum() / ww.sum()) if ww.sum() > 0 else float(v.mean())


def tensor_core(k: dict) -> bool | None:
    """Does the kernel run on Tensor Cores?  True: tensor pipe busy >= KERNEL_TENSOR_UNUSED_PCT of peak, or
    tensor math ops / instructions counted; False: the tensor pipe was captured and idle; None: not captured."""
    t = k.get("tensor_pct")
    if t is not None and t >= T.KERNEL_TENSOR_UNUSED_PCT:
        return True
    if (k.get("achieved_tflops") or {}).get("tensor", 0.0) > 0 or (k.get("tensor_inst") or 0.0) > 0:
        return True
    if t is not None or "tensor" in (k.get("achieved_tflops") or {}) or k.get("tensor_inst") is not None:
        return False
    return None


def _limiter(k: dict) -> tuple[str, str, str]:
    """(limiter, in words, lever)."""
    sm, mem, dram, t = k["sm_pct"], k["mem_pct"], k["dram_pct"], k["tensor_pct"]
    if sm is None and mem is None and dram is None and t is None:
        return "unknown", "unknown: no throughput metrics in the capture", "Capture the SpeedOfLight section."
    memx = max(mem or 0.0, dram or 0.0)
    on_tc = "Already near the tensor roof: fewer FLOPs (lower precision such as fp8, sparsity) or larger tiles."
    if t is not None and t >= T.KERNEL_BOUND_PCT and t >= memx:       # the tensor pipe itself is the busiest unit
        return ("compute", f"compute-bound on Tensor Cores: tensor pipe {t:.0f}% of peak"
                + (f", SM {sm:.0f}%" if sm is not None else ""), on_tc)
    if memx >= T.KERNEL_BOUND_PCT and memx >= (sm or 0.0):
        if (dram or 0.0) >= T.KERNEL_BOUND_PCT:
            return ("memory", f"memory-bound: DRAM {dram:.0f}% of peak",
                    "Move fewer bytes: fuse it with its neighbours, read lower-precision weights/KV cache (bf16/fp8/int4); "
                    "in decode, batch more requests per weight read.")
        return ("memory", f"memory-bound in the caches: memory throughput {mem:.0f}% of peak, DRAM {dram or 0:.0f}%",
                "Improve locality: coalesced accesses, fewer L1/L2 transactions per request, tile reuse in shared memory.")
    if (sm or 0.0) >= T.KERNEL_BOUND_PCT:
        tc = tensor_core(k)
        if tc:
            pipe = f"tensor pipe {t:.0f}% of peak" if t is not None else "tensor math ops counted (pipe % not captured)"
            return "compute", f"compute-bound on Tensor Cores: SM {sm:.0f}%, {pipe}", on_tc
        if tc is False:
            return ("compute", f"compute-bound on FP32 pipes: SM {sm:.0f}% of peak, Tensor Cores unused",
                    "Run it on Tensor Cores: bf16/fp16 operands, or TF32 for fp32 matmuls "
                    "(torch.backends.cuda.matmul.allow_tf32 = True).")
        return ("compute", f"compute-bound: SM {sm:.0f}% of peak (tensor pipe not captured)",
                "Capture the tensor pipe (--section ComputeWorkloadAnalysis, or --metrics "
                "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed) to tell Tensor Core from FP32 work; "
                "only FP32-pipe work gains from bf16/fp16 or TF32 operands.")
    why = [f"SM {sm or 0:.0f}%, memory {memx:.0f}% of peak"]
    lever = "Expose more parallelism and hide latency: more independent work per launch."
    if k["waves"] is not None and k["waves"] < T.KERNEL_MIN_WAVES:
        blocks = f"grid of {k['grid_blocks']:.0f} blocks" if k["grid_blocks"] is not None else "the grid"
        sms = f"{k['device_sm_count']:.0f}" if k["device_sm_count"] else "?"
        why.insert(0, f"{blocks} = {k['waves']:.2f} waves on {sms} SMs")
        lever = ("The grid is too small to fill the GPU: batch more requests/tokens per launch, fuse it with its "
                 "neighbours, and capture the step in a CUDA graph so tiny launches cost less.")
    if k["occupancy_pct"] is not None and k["occupancy_pct"] < T.KERNEL_LOW_OCCUPANCY_PCT:
        why.insert(0, f"{k['occupancy_pct']:.0f}% achieved occupancy")
        th = k["theoretical_occupancy_pct"]
        if th is not None and th < 2 * T.KERNEL_LOW_OCCUPANCY_PCT and k["registers"]:
            lever += f" Theoretical occupancy is only {th:.0f}% ({k['registers']:.0f} registers/thread, shared memory): " \
                     "smaller tiles or __launch_bounds__ raise it."
    return "latency", "latency-bound: " + ", ".join(why), lever


def _trace_kernels(trace, window) -> tuple[dict, float]:
    """{join key: (sum_ms, calls)} over kernels in the window, and the total kernel ms."""
    s = trace.spans
    idx = in_window(trace, s.kind == SpanKind.KERNEL, window)
    if not len(idx):
        return {}, 0.0
    d = clipped_durations(trace, idx, window).astype(np.float64)
    names, inv = np.unique(s.name[idx], return_inverse=True)
    sums = np.bincount(inv, weights=d, minlength=len(names))
    cnt = np.bincount(inv, minlength=len(names))
    out: dict = {}
    for nid, sm, c in zip(names.tolist(), sums.tolist(), cnt.tolist()):
        key = join_key(trace.strings[int(nid)])
        a, b = out.get(key, (0.0, 0))
        out[key] = (a + sm / 1e6, b + c)
    return out, float(d.sum()) / 1e6


def kernel_deep_dive(trace, window=None, options=None) -> dict | None:
    cap = trace.meta.get("ncu")
    if not cap or not cap.get("launches"):
        return None
    groups: dict[str, list] = {}
    for la in cap["launches"]:
        groups.setdefault(join_key(la["name"]), []).append(la)
    by_key, total_ms = _trace_kernels(trace, window)
    dev = _peaks(cap["launches"][0])
    rows, unmatched = [], []
    for key, las in groups.items():
        w = np.array([la["metrics"].get("duration_ns") or 0.0 for la in las], dtype=np.float64)
        g = lambda m: _wmean([la["metrics"].get(m) for la in las], w)
        k = {"name": las[0]["name"], "short_name": short_kernel_name(las[0]["name"].replace("<unnamed>::", "")), "launches": len(las),
             "ncu_ids": [la["id"] for la in las][:16], "grid": las[0]["grid"], "block": las[0]["block"],
             "duration_us": round(float(w.mean()) / 1e3, 4)}
        for m in ("sm_pct", "mem_pct", "dram_pct", "tensor_pct", "fma_pct", "l1_hit_pct", "l2_hit_pct", "occupancy_pct",
                  "theoretical_occupancy_pct", "registers", "waves", "grid_blocks", "tensor_inst"):
            v = g(m)
            k[m] = round(v, 4) if v is not None else None
        k["device_sm_count"] = dev["sm_count"]
        dur_s = float(w.sum()) / 1e9
        # measured bytes: the sum over the launches (scaled up by duration when some launches lack them)
        hasb = np.array(["dram_bytes" in la["metrics"] for la in las])
        hb = np.array([la["metrics"]["dram_bytes"] for la in las if "dram_bytes" in la["metrics"]], dtype=np.float64)
        wb = float(w[hasb].sum())
        dbytes = float(hb.sum()) * (float(w.sum()) / wb if not hasb.all() and wb > 0 else 1.0) if len(hb) else None
        est = False
        if dbytes is None and k["dram_pct"] is not None and dev["peak_dram_gbps"]:
            dbytes, est = k["dram_pct"] / 100 * dev["peak_dram_gbps"] * 1e9 * dur_s, True
        k["dram_bytes"] = round(dbytes) if dbytes is not None else None
        k["dram_bytes_estimated"] = est
        k["dram_gbps"] = round(dbytes / dur_s / 1e9, 3) if dbytes is not None and dur_s > 0 else None
        flops = {p: sum(la["metrics"][f"{p}_flops"] for la in las if f"{p}_flops" in la["metrics"])
                 for p in ("fp32", "fp16", "fp64", "tensor") if any(f"{p}_flops" in la["metrics"] for la in las)}
        k["achieved_tflops"] = {p: round(v / dur_s / 1e12, 6) for p, v in flops.items()} if dur_s > 0 else {}
        tot = sum(flops.values()) if flops else None
        k["intensity_flop_per_byte"] = round(tot / dbytes, 4) if tot is not None and dbytes else None
        roof = "tensor" if flops.get("tensor") and dev["peak_tensor_tflops"] else "FP32"
        peak_tf = dev["peak_tensor_tflops"] if roof == "tensor" else dev["peak_fp32_tflops"]
        ridge = peak_tf * 1e12 / (dev["peak_dram_gbps"] * 1e9) if peak_tf and dev["peak_dram_gbps"] else None
        k["roofline"] = (None if k["intensity_flop_per_byte"] is None or ridge is None else
                         f"{'memory' if k['intensity_flop_per_byte'] < ridge else 'compute'} side of the {roof} ridge")
        k["limiter"], k["limiter_text"], k["lever"] = _limiter(k)
        k["tensor_core"] = tensor_core(k)
        k["stall_reasons"], k["stall_basis"] = kernel_stalls(las, w)
        k.pop("tensor_inst")
        rules = [r for la in las[:1] for r in la["rules"] if r["type"] in ("OPT", "WRN", "ERR", "")]
        k["ncu_rules"] = [f"{r['rule']}: {r['text']}" + (f" (ncu's estimated speedup {r['speedup_pct']:g}%)"
                                                          if r["speedup_pct"] is not None else "") for r in rules[:6]]
        t_ms, calls = by_key.get(key, (0.0, 0))
        k["trace_sum_ms"] = round(t_ms, 6)
        k["trace_calls"] = int(calls)
        k["share_pct"] = round(100 * t_ms / total_ms, 4) if total_ms > 0 else 0.0
        if not calls:
            unmatched.append(k["short_name"])
        rows.append(k)
    rows.sort(key=lambda r: (-r["share_pct"], -r["duration_us"]))
    mve, launch_range = measured_vs_estimated(trace, window, options, rows, groups, dev, cap)
    joined = bool(cap.get("joined"))
    warnings = []
    if joined and unmatched:
        warnings.append(f"ncu: {len(unmatched)} profiled kernel(s) not found in the trace by name: "
                        + ", ".join(unmatched[:5]) + ("…" if len(unmatched) > 5 else ""))
    if any(r["dram_bytes_estimated"] for r in rows):
        warnings.append("ncu: DRAM bytes are estimates (DRAM throughput % x peak bandwidth x duration): "
                        "the capture has no dram__bytes; capture --section MemoryWorkloadAnalysis to measure them")
    table = {"columns": ["kernel", "share_pct", "duration_us", "limiter", "sm_pct", "mem_pct", "dram_pct", "tensor_pct",
                         "occupancy_pct", "waves", "registers", "l2_hit_pct", "dram_gbps", "stalls", "lever"],
             "rows": [[r["name"], r["share_pct"], r["duration_us"], r["limiter_text"], r["sm_pct"], r["mem_pct"], r["dram_pct"],
                       r["tensor_pct"], r["occupancy_pct"], r["waves"], r["registers"], r["l2_hit_pct"], r["dram_gbps"],
                       stall_text(r["stall_reasons"]), r["lever"]] for r in rows]}
    eff_table = {"columns": ["kernel", "share_pct", "measured_mfu_pct", "measured_mfu_basis", "est_mfu_pct", "measured_mbu_pct",
                             "est_mbu_pct", "est_ops", "pairing", "disagreement"],
                 "rows": [[r["name"], r["share_pct"], r["measured_mfu_pct"], r["measured_mfu_basis"], r["est_mfu_pct"],
                           r["measured_mbu_pct"], r["est_mbu_pct"], ", ".join(r["est_ops"]), r["pairing"],
                           "; ".join(r["disagreement"])] for r in rows]}
    basis = ("share_pct: the kernel's time in the trace's window over all kernel time there (names matched after "
             "normalising both demanglers)" if joined else
             "share_pct: of the profiled launches' durations (ncu serialises kernels; no timeline was joined)")
    return {"file": cap.get("file"), "layout": cap.get("layout"), "joined": joined, "launches": len(cap["launches"]),
            "missing": list(cap.get("missing", [])), "device": dev, "kernels": rows, "unmatched": unmatched,
            "basis": basis, "measured_vs_estimated": mve, "launch_range": launch_range, "warnings": warnings,
            "tables": {"kernel_deep_dive": table, "kernel_measured_vs_estimated": eff_table}}
