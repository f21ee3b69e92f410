"""Finding rules on GPU activity (registered in diagnosis.RULES): idle GPU, syncs, copies, launch storms,
dominant / compute-bound / communication kernels.  GPU counters (NVML throttling, temperature, memory
pressure, utilisation): diagnosis_gpu_counters.py; MFU/MBU and the Nsight Compute limiter:
diagnosis_gpu_efficiency.py.  Evidence: analyze/evidence.py.
"""
from __future__ import annotations

from .. import thresholds as T  # noqa: F401
from . import advice
from .evidence import (CULPRIT_SOURCES, HOST_CATEGORIES, Evidence, _children_explain_waiting, _culprit,  # noqa: F401
                       _gil_explains_waiting, _ms, _off_cpu_ms, _pct, _row, _run_queue_pct, _sev,
                       _user_code_pct, _with_culprit, get_path)
from .kernels import short_kernel_name
from ..classes import COMM_KERNEL_RE, LAUNCH_API_RE


# --------------------------------------------------------------------------------------------
# rules, one per finding id
# --------------------------------------------------------------------------------------------
def gpu_idle(res: dict, found: dict) -> dict | None:
    gpu = res.get("gpu")
    if gpu is None or gpu["idle_pct"] < T.GPU_IDLE_MEDIUM_PCT:
        return None
    e = Evidence(res)
    idle_pct = e.cite("gpu_idle_pct", "gpu.idle_pct", 2)
    idle_ms = e.cite("gpu_idle_ms", "gpu.idle_ms")
    e2e = e.cite("window_ms", "e2e_ms")
    e.cite("gpu_busy_ms", "gpu.busy_ms")
    top_host = max(HOST_CATEGORIES, key=lambda c: _ms(res, c))
    e.derive("largest_host_category_while_idle", top_host, "largest of breakdown " + ", ".join(HOST_CATEGORIES))
    e.cite("largest_host_category_ms", f"breakdown[{top_host}].ms")
    txt = [f"GPU idle {idle_pct:.1f}% of the window ({idle_ms:.2f} ms of {e2e:.2f} ms); "
           f"busy = union of kernel, memcpy and memset intervals on all streams."]
    if gpu.get("idle_pct_active_span") is not None:
        txt.append(f"Idle {gpu['idle_pct_active_span']:.1f}% of the GPU-active span ({gpu['active_span_ms']:.2f} ms, "
                   "first to last GPU activity).")
    gaps = res.get("idle_gaps") or {}
    bc = gaps.get("by_class_stream_ms") or {}
    if bc and any(bc.values()):
        n = e.cite("streams", "idle_gaps.streams")
        for k in bc:
            e.cite(f"gap_{k}_stream_ms", f"idle_gaps.by_class_stream_ms.{k}")
        txt.append(f"Per-stream gaps by cause, summed over {n} stream(s) (stream-time, not window time): "
                   + ", ".join(f"{k} {v:.2f} ms" for k, v in bc.items()) + ".")
    if gaps.get("largest"):
        g0 = gaps["largest"][0]
        e.cite("largest_gap_ms", "idle_gaps.largest[0].ms")
        e.cite("largest_gap_host_activity", "idle_gaps.largest[0].host", default=None)
        txt.append(f"Largest idle gap (no activity on any stream) {g0['ms']:.2f} ms at +{g0['offset_ms']:.2f} ms; "
                   f"host meanwhile: {g0.get('host')}.")
    txt.append(f"While the GPU was idle the largest host category was {top_host} ({_ms(res, top_host):.2f} ms).")
    _with_culprit(e, res, top_host, txt)
    sugg = {
        "sync_wait": "Remove host-device synchronisation from the hot path (see sync_stall); keep the GPU queue non-empty.",
        "cpu_preprocessing": advice.text("gpu_idle.cpu_preprocessing", res),
        "framework_overhead": advice.text("gpu_idle.framework_overhead", res),
        "waiting": "The host is off-CPU (sleep, I/O, locks) while the GPU waits: move I/O off the inference thread and check lock contention.",
        "other": "Host activity in the gaps is not covered by the trace: profile with CPU sampling (inferscope run) or add NVTX/record_function ranges.",
    }[top_host]
    return e.finding("gpu_idle", _sev(idle_pct, T.GPU_IDLE_MEDIUM_PCT, T.GPU_IDLE_HIGH_PCT),
                     f"GPU idle {idle_pct:.0f}% of the timeline", txt, sugg)


def sync_stall(res: dict, found: dict) -> dict | None:
    sy = res.get("syncs") or {}
    if not sy.get("count"):
        return None
    e = Evidence(res)
    n = e.cite("sync_calls", "syncs.count")
    blocked = e.cite("blocked_ms", "syncs.blocked_ms")
    blocked_pct = e.cite("blocked_pct", "syncs.blocked_pct", 2)
    idle_ms = e.cite("sync_wait_ms", "breakdown[sync_wait].ms")
    idle_pct = e.cite("sync_wait_pct", "breakdown[sync_wait].pct", 2)
    top = e.cite("top_sync_api", "syncs.top[0].api", default=None)
    e.cite("top_sync_api_issued_by", "syncs.top[0].issued_by", default=None)
    top_ms = e.cite("top_sync_api_ms", "syncs.top[0].ms")
    top_n = e.cite("top_sync_api_count", "syncs.top[0].count", default=0)
    pg_ms = e.cite("pageable_copy_calls_sum_ms", "syncs.pageable_copy_calls_sum_ms")
    td = e.cite("tiny_d2h_reads", "syncs.tiny_d2h.count", default=0)
    txt = [f"{n} blocking calls held the host {blocked:.2f} ms ({blocked_pct:.1f}% of the window, union over threads).",
           f"Top: {top} x{top_n} = {top_ms:.2f} ms, issued by {sy['top'][0]['issued_by'] if sy.get('top') else None}."]
    if pg_ms:
        txt.append(f"{pg_ms:.2f} ms of the calls are copies with a pageable host side (see pageable_copy).")
    txt.append(f"{idle_ms:.2f} ms of it with the GPU idle (breakdown sync_wait, {idle_pct:.1f}% of the window); "
               "severity follows that part: blocking while the GPU computes costs little.")
    if td:
        txt.append(f"{td} device->host reads of <= {sy['tiny_d2h']['threshold_bytes']} bytes ("
                   + ("small blocking reads of results" if advice.is_native(res) else "the .item()/.cpu() pattern") + ").")
    return e.finding("sync_stall", _sev(idle_pct, T.SYNC_STALL_MEDIUM_PCT, T.SYNC_STALL_HIGH_PCT, "low"),
                     "Host blocked in CPU-GPU synchronisation", txt, advice.text("sync_stall", res))


def pageable_copy(res: dict, found: dict) -> dict | None:
    pg = (res.get("copies") or {}).get("pageable") or {}
    if pg.get("count", 0) < T.PAGEABLE_COPY_MIN_COUNT:
        return None
    e = Evidence(res)
    n = e.cite("pageable_copies", "copies.pageable.count")
    gpu_ms = e.cite("pageable_copy_gpu_ms", "copies.pageable.ms")
    nbytes = e.cite("pageable_bytes", "copies.pageable.bytes")
    calls_ms = e.cite("pageable_copy_calls_sum_ms", "syncs.pageable_copy_calls_sum_ms")
    e2e = e.cite("window_ms", "e2e_ms")
    # what pageable copies cost is the host blocked in their calls (the driver stages them)
    # or, for copies issued without a host record, their GPU time
    cost = max(calls_ms, gpu_ms)
    pct = e.derive("cost_pct_of_window", 100.0 * cost / e2e if e2e else 0.0,
                   "100 * max(pageable_copy_calls_sum_ms, pageable_copy_gpu_ms) / window_ms")
    apis = pg.get("by_api") or []
    if apis:
        e.cite("top_pageable_copy_api", "copies.pageable.by_api[0].api", default=None)
    txt = [f"{n} copies from/to pageable host memory: {gpu_ms:.3f} ms on the GPU, {nbytes:,} bytes; "
           f"their calls blocked the host {calls_ms:.3f} ms ({pct:.2f}% of the window)."]
    if apis:
        e.cite("top_pageable_copy_api_ms", "copies.pageable.by_api[0].ms")
        txt.append("Issued by: " + ", ".join(f"{a['api']} x{a['count']} ({a['ms']:.3f} ms on the GPU)" for a in apis[:3]) + ".")
    sev = _sev(pct, T.PAGEABLE_COPY_MIN_PCT, T.SYNC_STALL_HIGH_PCT, "low")
    return e.finding("pageable_copy", sev, "Host<->device copies use pageable memory", txt, advice.text("pageable_copy", res))


def small_copies(res: dict, found: dict) -> dict | None:
    sm = (res.get("copies") or {}).get("small") or {}
    if not sm.get("storm"):
        return None
    e = Evidence(res)
    n, ms, thr, pct = e.cite_all("copies.small", small_copies="count", small_copy_ms="ms",
                                 threshold_bytes="threshold_bytes", pct_of_window=("pct_of_window", 2))
    txt = [f"{n} copies under {thr:,} bytes took {ms:.3f} ms on the GPU ({pct:.2f}% of the window)."]
    copy_api = next((i for i, r in enumerate((res.get("culprits") or {}).get("apis") or [])
                     if r["kind"] == "cuda" and ("Memcpy" in r["name"] or "memcpy" in r["name"])), None)
    if copy_api is not None:
        txt.append(_culprit(e, res, [(f"culprits.apis[{copy_api}]", "name", "total_ms", "pct_of_window",
                                      "of the window (calls summed)", None)], "copy_api"))
    return e.finding("small_copies", "medium" if pct >= T.SMALL_COPY_STORM_PCT else "low", "Many small host<->device copies",
                     txt,
                     "Batch small transfers: stack tensors on the host and copy once, keep per-step scalars on the GPU.")


def launch_storm(res: dict, found: dict) -> dict | None:
    k = res.get("kernels") or {}
    if not k.get("launch_storm"):
        return None
    e = Evidence(res)
    n, rate, p50, tiny, rule = e.cite_all("kernels", kernels="count", launches_per_s="launches_per_s",
                                          kernel_p50_us="p50_us", tiny_pct="tiny_pct", rule="launch_storm_rule")
    txt = [f"{n} kernels at {rate:,.0f} launches/s, median {p50:.2f} us ({rule}).",
           f"{tiny:.0f}% of kernels are shorter than {k['tiny_threshold_us']:g} us."]
    _with_culprit(e, res, "gpu_compute", txt, "top_kernel")
    _culprit_launch(e, res, txt)
    return e.finding("launch_storm", "high", "Kernel launch storm", txt,
                     "Fuse small kernels (torch.compile), capture the loop in CUDA graphs, or raise the batch size so each "
                     "launch does more work.")


def _culprit_launch(e: "Evidence", res: dict, txt: list[str]) -> None:
    """The busiest launch API in the culprit table (cudaLaunchKernel, hipLaunchKernel ...)."""
    apis = (res.get("culprits") or {}).get("apis") or []
    i = next((i for i, r in enumerate(apis) if r["kind"] == "cuda" and LAUNCH_API_RE.search(r["name"])), None)
    if i is not None:
        c = _culprit(e, res, [(f"culprits.apis[{i}]", "name", "total_ms", "pct_of_window", "of the window (calls summed)", None)],
                     "launch_api")
        txt.append(c.replace("Culprit:", "Launch API:"))


def dominant_kernel(res: dict, found: dict) -> dict | None:
    k = res.get("kernels") or {}
    if not (k.get("top") and k.get("distinct", 0) >= 2 and k["top"][0]["share_pct"] >= T.DOMINANT_KERNEL_SHARE_PCT):
        return None
    e = Evidence(res)
    name, share, ms, calls, _ = e.cite_all("kernels.top[0]", top_kernel="name", top_kernel_pct=("share_pct", 2),
                                           top_kernel_sum_ms="sum_ms", top_kernel_calls="calls",
                                           top_kernel_p50_us="p50_us")
    return e.finding("dominant_kernel", "medium", "One kernel dominates GPU time",
                     [f"{short_kernel_name(name)} takes {share:.1f}% of kernel time ({ms:.2f} ms over {calls} calls)."],
                     "Start there: check its shapes and dtype (tensor-core friendly sizes, bf16/fp16), and profile it with "
                     "Nsight Compute.")


def gpu_compute_bound(res: dict, found: dict) -> dict | None:
    k = res.get("kernels") or {}
    if res.get("gpu") is None or _pct(res, "gpu_compute") < T.VERDICT_MIN_SHARE_PCT or not k.get("classes"):
        return None
    e = Evidence(res)
    cl = k["classes"]
    for r in cl:
        e.cite(f"kernel_class_{r['class']}_pct", f"kernels.classes[{r['class']}].share_pct", 2)
    share = e.cite("gpu_compute_pct", "breakdown[gpu_compute].pct", 2)
    if k.get("top"):
        e.cite("top_kernel", "kernels.top[0].name")
        e.cite("top_kernel_pct", "kernels.top[0].share_pct", 2)
    ew = e.derive("elementwise_copy_pct", sum(r["share_pct"] for r in cl if r["class"] in ("elementwise", "copy_cat_transpose")),
                  "kernel_class_elementwise_pct + kernel_class_copy_cat_transpose_pct", 2)
    txt = [f"Compute kernels run {share:.1f}% of the window.",
           "Kernel time by family: " + ", ".join(f"{r['class']} {r['share_pct']:.1f}%" for r in cl) + "."]
    if k.get("top"):
        e.cite("top_kernel_sum_ms", "kernels.top[0].sum_ms")
        txt.append("Top kernels: " + "; ".join(f"{short_kernel_name(r['name'])} {r['sum_ms']:.2f} ms ({r['share_pct']:.1f}% of kernel time)"
                                               for r in k["top"][:3]) + ".")
    if ew >= T.ELEMENTWISE_COPY_SHARE_PCT:
        sugg = (f"Elementwise and copy/concat kernels take {ew:.0f}% of GPU time: fuse them (torch.compile), avoid dtype casts "
                "and .contiguous() copies, and use a static/pre-allocated KV cache instead of torch.cat growth.")
    else:
        sugg = ("The GPU is the bottleneck: cut work per token (lower precision or quantization, fused attention kernels) "
                "or raise batch size for throughput; deep-dive the top kernels with Nsight Compute.")
    return e.finding("gpu_compute_bound", "medium", "The GPU is busy: kernels dominate the time", txt, sugg)


def gpu_communication(res: dict, found: dict) -> dict | None:
    pct = _pct(res, "gpu_communication")
    if res.get("gpu") is None or pct < T.COMM_EXPOSED_MEDIUM_PCT:
        return None
    e = Evidence(res)
    e.cite("exposed_comm_pct", "breakdown[gpu_communication].pct", 2)
    exp_ms = e.cite("exposed_comm_ms", "breakdown[gpu_communication].ms")
    comm_ms = e.cite("comm_kernel_busy_ms", "gpu.comm_kernel_busy_ms")
    ov = e.cite("compute_comm_overlap_pct", "gpu.compute_comm_overlap_pct", 2, default=None)
    txt = [f"Communication kernels (NCCL/RCCL) are busy {comm_ms:.2f} ms; {exp_ms:.2f} ms of it ({pct:.1f}% of the window) "
           f"with no compute kernel running.",
           f"{'n/a' if ov is None else f'{ov:.1f}%'} of communication time overlaps compute (HTA's overlap measure)."]
    i = next((i for i, r in enumerate((res.get("kernels") or {}).get("top") or []) if COMM_KERNEL_RE.search(r["name"])), None)
    if i is not None:
        txt.append(_culprit(e, res, [(f"kernels.top[{i}]", "name", "sum_ms", "share_pct", "of kernel time", None)], "comm_kernel"))
    return e.finding(
        "gpu_communication", _sev(pct, T.COMM_EXPOSED_MEDIUM_PCT, T.COMM_EXPOSED_HIGH_PCT),
        "Communication kernels run with no compute beside them", txt,
        "Overlap communication with compute (bucketed/async collectives, separate communication stream), reduce what is "
        "communicated (tensor-parallel degree, lower precision), or check for waits on a slower rank.")
