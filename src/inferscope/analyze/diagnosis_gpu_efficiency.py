"""Finding rules on GPU efficiency (registered in diagnosis.RULES): low MFU (recorded shapes or the live
prefill stage), low decode MBU, and the Nsight Compute limiter of the top profiled kernel.
Evidence: analyze/evidence.py.
"""
from __future__ import annotations

from .. import thresholds as T
from .evidence import Evidence
from .kernel_stalls import stall_text
from .kernels import short_kernel_name


def low_mfu(res: dict, found: dict) -> dict | None:
    """MFU below thresholds.LOW_MFU_PCT: from recorded shapes (efficiency) or the prefill stage of a live run."""
    eff = res.get("efficiency") or {}
    stages = {s["stage"]: s for s in ((res.get("llm") or {}).get("stages") or [])}
    e = Evidence(res)
    if eff.get("mfu_pct") is not None:
        mfu = e.cite("mfu_pct", "efficiency.mfu_pct", 3)
        e.cite("achieved_tflops", "efficiency.achieved_tflops")
        peak = e.cite("peak_tflops", "efficiency.peak_tflops")
        e.cite("peak_source", "efficiency.peak_source", default=None)
        where = "over the window (FLOPs from recorded shapes)"
    elif stages.get("prefill", {}).get("mfu_pct") is not None:
        mfu = e.cite("mfu_pct", "llm.stages[prefill].mfu_pct", 3)
        e.cite("achieved_tflops", "llm.stages[prefill].achieved_tflops")
        peak = e.cite("peak_tflops", "llm.stages[prefill].peak_tflops")
        where = "in prefill (analytical FLOPs of the model)"
    else:
        return None
    if mfu >= T.LOW_MFU_PCT:
        return None
    txt = [f"MFU {mfu:.1f}% {where}: achieved {e.values['achieved_tflops']:.2f} of {peak:g} TFLOP/s dense peak."]
    reasons = []
    gpu = res.get("gpu")
    if gpu is not None and gpu["idle_pct"] >= T.GPU_IDLE_MEDIUM_PCT:
        idle = e.cite("gpu_idle_pct", "gpu.idle_pct", 2)
        reasons.append(("idle", f"the GPU is idle {idle:.1f}% of the window (gaps between kernels)"))
    if eff.get("gemm_kernel_tflops") is not None and peak:
        gk = e.cite("gemm_kernel_tflops", "efficiency.gemm_kernel_tflops")
        pk = e.derive("gemm_kernel_pct_of_peak", 100.0 * gk / peak, "100 * gemm_kernel_tflops / peak_tflops", 2)
        if pk < T.GEMM_KERNEL_LOW_PCT_OF_PEAK:
            reasons.append(("small_gemms", f"GEMM kernels run at only {pk:.0f}% of peak while running (small or skinny "
                                           "matrix products: too few rows per GEMM)"))
    k = res.get("kernels") or {}
    cl = {r["class"]: r["share_pct"] for r in (k.get("classes") or [])}
    if cl and cl.get("gemm", 0.0) + cl.get("attention", 0.0) < 50.0:
        for c in ("gemm", "attention"):
            if c in cl:
                e.cite(f"kernel_class_{c}_pct", f"kernels.classes[{c}].share_pct", 2)
        mm = e.derive("matmul_kernel_pct", cl.get("gemm", 0.0) + cl.get("attention", 0.0),
                      "kernel_class_gemm_pct + kernel_class_attention_pct", 2)
        reasons.append(("non_matmul", f"matrix-multiply and attention kernels are only {mm:.0f}% of kernel time; "
                                      "elementwise, copy and normalisation kernels take the rest at low FLOP rates"))
    if k.get("launch_storm") or k.get("tiny_pct", 0) >= 50:
        tiny = e.cite("tiny_kernel_pct", "kernels.tiny_pct", 2)
        reasons.append(("launch", f"{tiny:.0f}% of kernels are shorter than {k.get('tiny_threshold_us', 10):g} us "
                                  "(launch overhead per kernel)"))
    e.derive("reasons", [r[0] for r in reasons], "rules above, in order: GPU idle >= GPU_IDLE_MEDIUM_PCT, GEMM kernels "
             "< GEMM_KERNEL_LOW_PCT_OF_PEAK of peak, matmul+attention kernels < 50% of kernel time, launch storm or >= 50% tiny kernels")
    txt += [f"Why (from the trace): {r[1]}." for r in reasons] or ["The trace shows no single cause (GPU busy, GEMMs efficient)."]
    if (res.get("kernels") or {}).get("top"):       # where the GPU time goes: the kernel to look at first
        kn = e.cite("top_kernel", "kernels.top[0].name")
        kms = e.cite("top_kernel_sum_ms", "kernels.top[0].sum_ms", 3)
        kpct = e.cite("top_kernel_pct", "kernels.top[0].share_pct", 2)
        txt.append(f"Top kernel: {short_kernel_name(kn)}, {kms:.2f} ms ({kpct:.1f}% of kernel time).")
    sugg = {"idle": "Keep the GPU fed first (see gpu_idle): larger batches, CUDA graphs, overlap host work.",
            "small_gemms": "Raise the tokens per GEMM (bigger batches, continuous batching, longer prefill chunks) so matrix "
                           "products reach tensor-core efficiency.",
            "non_matmul": "Fuse the elementwise/copy kernels (torch.compile, fused RMSNorm/rotary/SiLU kernels) and avoid "
                          "dtype casts and .contiguous() copies.",
            "launch": "Cut per-kernel launch overhead: CUDA graphs or torch.compile to fuse small kernels."}
    return e.finding("low_mfu", "medium" if mfu < T.LOW_MFU_MEDIUM_PCT else "low", f"Model FLOPs utilisation {mfu:.1f}%",
                     txt, " ".join(sugg[r[0]] for r in reasons) or "Profile the top kernels with Nsight Compute.")


def decode_low_mbu(res: dict, found: dict) -> dict | None:
    stages = {s["stage"]: s for s in ((res.get("llm") or {}).get("stages") or [])}
    d = stages.get("decode")
    # a lower bound (the KV-cache read left out: model_config.decode_mbu) below the level says nothing: the true MBU
    # may be above it
    if not d or d.get("mbu_pct") is None or d["mbu_pct"] >= T.DECODE_LOW_MBU_PCT or d.get("mbu_lower_bound"):
        return None
    e = Evidence(res)
    mbu = e.cite("decode_mbu_pct", "llm.stages[decode].mbu_pct", 2)
    e.cite("bytes_per_step", "llm.stages[decode].bytes_per_step")
    e.cite("mean_step_ms", "llm.stages[decode].step_time_ms")
    gb = e.cite("peak_gbps", "llm.stages[decode].peak_gbps")
    return e.finding("decode_low_mbu", "medium" if mbu < T.DECODE_LOW_MBU_MEDIUM_PCT else "low",
                     f"Decode reads memory at {mbu:.0f}% of the peak bandwidth",
                     [f"Each decode step must read the weights and the KV cache ({e.values['bytes_per_step'] / 1e9:.3f} GB); "
                      f"at a mean step of {e.values['mean_step_ms']:.3f} ms that is {mbu:.1f}% of {gb:g} GB/s."],
                     "Decode is memory-bound by nature: raise the batch (more tokens per weight read), use CUDA graphs to "
                     "remove per-step host gaps, and quantize weights / KV cache to read fewer bytes.")


def kernel_limiter(res: dict, found: dict) -> dict | None:
    """Nsight Compute deep-dive: the profiled kernel with the largest share of GPU time, its limiter and lever."""
    ks = (res.get("kernel_deep_dive") or {}).get("kernels") or []
    if not ks:
        return None
    k = ks[0]
    if k["limiter"] == "unknown" or k["share_pct"] < T.KERNEL_LIMITER_MIN_SHARE_PCT:
        return None
    if k["limiter"] == "compute" and (k.get("tensor_core") or (k.get("tensor_pct") or 0.0) >= T.KERNEL_TENSOR_UNUSED_PCT):
        return None                                  # already on the tensor roof: nothing cheap to change
    e = Evidence(res)
    base = "kernel_deep_dive.kernels[0]"
    e.cite("kernel", f"{base}.name")
    share = e.cite("kernel_share_pct", f"{base}.share_pct", 2)
    e.cite("duration_us", f"{base}.duration_us")
    e.cite("limiter", f"{base}.limiter")
    for key in ("sm_pct", "mem_pct", "dram_pct", "tensor_pct", "occupancy_pct", "waves"):
        if k.get(key) is not None:
            e.cite(key, f"{base}.{key}", 2)
    short = short_kernel_name(k["name"].replace("<unnamed>::", ""), 80)
    txt = [f"{short} ({share:.1f}% of {'kernel time in the trace' if (res.get('kernel_deep_dive') or {}).get('joined') else 'the profiled launches'}, "
           f"{k['duration_us']:.2f} us per launch): {k['limiter_text']} (Nsight Compute, {k['launches']} launch(es))."]
    st = k.get("stall_reasons") or []
    if st:
        e.cite("top_stall_reason", f"{base}.stall_reasons[0].reason")
        e.cite("top_stall_share_pct", f"{base}.stall_reasons[0].share_pct", 2)
        txt.append(f"Warps stalled mostly on {stall_text(st)} of the cycles between issued instructions "
                   f"({k.get('stall_basis') or 'ncu stall metrics'}).")
    txt += [f"ncu: {r}" for r in k.get("ncu_rules", [])[:1]]
    return e.finding("kernel_limiter", "medium" if share >= 2 * T.KERNEL_LIMITER_MIN_SHARE_PCT else "low",
                     f"Top profiled kernel is {k['limiter_text'].split(':')[0]}", txt, k["lever"])
