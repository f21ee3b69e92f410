"""Finding rules on GPU activity and GPU counters (registered in diagnosis.RULES): idle GPU, syncs,
copies, launch storms, dominant / compute-bound / communication kernels, NVML throttling, temperature,
memory pressure and utilisation, MFU/MBU, and the Nsight Compute limiter.  Evidence: analyze/evidence.py.
"""
from __future__ import annotations

from .. import thresholds as T  # noqa: F401
from .evidence import (CULPRIT_SOURCES, HOST_CATEGORIES, Evidence, _children_explain_waiting, _culprit,  # noqa: F401
                       _gil_explains_waiting, _ms, _off_cpu_ms, _pct, _row, _run_queue_pct, _sev, _t, _t_src,
                       _user_code_pct, _with_culprit, get_path)
from .kernels import short_kernel_name


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
        "cpu_preprocessing": "Overlap CPU preprocessing with GPU work: tokenize/prepare the next batch in a worker thread or process while the GPU runs the current one.",
        "framework_overhead": "Reduce per-op host overhead: capture the steady-state loop in CUDA graphs (torch.compile mode='reduce-overhead' or torch.cuda.graphs), fuse small ops, or raise the batch size.",
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
        txt.append(f"{td} device->host reads of <= {sy['tiny_d2h']['threshold_bytes']} bytes (the .item()/.cpu() pattern).")
    return e.finding("sync_stall", _sev(idle_pct, T.SYNC_STALL_MEDIUM_PCT, T.SYNC_STALL_HIGH_PCT, "low"),
                     "Host blocked in CPU-GPU synchronisation", txt,
                     "Avoid per-step .item()/.cpu()/print of GPU tensors and explicit torch.cuda.synchronize() in the loop; "
                     "keep results on the GPU and read them once per batch, or use non_blocking copies with CUDA events.")


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
    return e.finding("pageable_copy", sev, "Host<->device copies use pageable memory", txt,
                     "Allocate host buffers pinned (tensor.pin_memory(), DataLoader(pin_memory=True)) and copy with "
                     "non_blocking=True, so copies are true DMA and can overlap compute.")


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
    from ..classes import LAUNCH_API_RE
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
    from ..classes import COMM_KERNEL_RE
    i = next((i for i, r in enumerate((res.get("kernels") or {}).get("top") or []) if COMM_KERNEL_RE.search(r["name"])), None)
    if i is not None:
        txt.append(_culprit(e, res, [(f"kernels.top[{i}]", "name", "sum_ms", "share_pct", "of kernel time", None)], "comm_kernel"))
    return e.finding(
        "gpu_communication", _sev(pct, T.COMM_EXPOSED_MEDIUM_PCT, T.COMM_EXPOSED_HIGH_PCT),
        "Communication kernels run with no compute beside them", txt,
        "Overlap communication with compute (bucketed/async collectives, separate communication stream), reduce what is "
        "communicated (tensor-parallel degree, lower precision), or check for waits on a slower rank.")


# ---- counters (NVML, /proc, NUMA) ------------------------------------------------------------
def _series_index(res: dict, metric: str) -> list[int]:
    ser = ((res.get("counters") or {}).get("series")) or []
    return [i for i, r in enumerate(ser) if r["metric"] == metric]


def gpu_throttling(res: dict, found: dict) -> dict | None:
    thr = (res.get("counters") or {}).get("throttle") or []
    if not thr:
        return None
    i = max(range(len(thr)), key=lambda j: thr[j]["affected_pct"])
    t = thr[i]
    base = f"counters.throttle[{i}]"
    e = Evidence(res)
    if t["samples"] and t["affected_pct"] >= T.THROTTLE_MEDIUM_PCT:
        dev = e.cite("device", f"{base}.device")
        pct = e.cite("affected_pct_of_window", f"{base}.affected_pct", 2)
        n = e.cite("affected_samples", f"{base}.affected_samples")
        e.cite("reason_samples", f"{base}.samples")
        top = e.cite("top_reason", f"{base}.reasons[0].reason", default=None)
        top_pct = e.cite("top_reason_pct_of_window", f"{base}.reasons[0].window_pct", 2)
        txt = [f"GPU {dev}: NVML clock-event reasons report a slowdown for {pct:.1f}% of the window ({n} of "
               f"{t['samples']} samples; each sample holds until the next).",
               "Reasons: " + ", ".join(f"{r['reason']} (0x{r['bit']:x}) {r['window_pct']:.1f}%" for r in t["reasons"]) + "."]
        if t.get("sm_clock_mhz_throttled") is not None and t.get("sm_clock_mhz_other") is not None:
            a = e.cite("sm_clock_mhz_throttled", f"{base}.sm_clock_mhz_throttled", 0)
            b = e.cite("sm_clock_mhz_other", f"{base}.sm_clock_mhz_other", 0)
            txt.append(f"Mean SM clock {a:.0f} MHz while throttled vs {b:.0f} MHz otherwise.")
        pw = _series_index(res, "gpu.power_w")
        if pw:
            e.cite("power_w_max", f"counters.series[{pw[0]}].max", 1)
            txt.append(f"Power draw up to {res['counters']['series'][pw[0]]['max']:.0f} W.")
        sugg = {"sw_power_cap": "The GPU runs at its power limit: kernel times include power-capped clocks. Compare with "
                                "`nvidia-smi -q -d POWER` (enforced limit), check other work on the GPU, and benchmark with "
                                "the same limit you deploy with; lower precision (bf16/fp8) or smaller batches draw less power.",
                "sw_thermal_slowdown": "The GPU slows down for heat: check cooling/airflow and the temperature finding.",
                "hw_thermal_slowdown": "Hardware thermal slowdown: check cooling/airflow; kernel times are not representative.",
                "hw_slowdown": "Hardware slowdown (power brake or thermal): check the power supply, cooling and `nvidia-smi -q -d PERFORMANCE`.",
                "hw_power_brake_slowdown": "External power brake asserted: check the system's power supply/PSU limits.",
                "sync_boost": "Clocks follow another GPU in a sync-boost group: profile with the group idle or leave it."}.get(
                    str(top), "Check `nvidia-smi -q -d PERFORMANCE` while the workload runs.")
        return e.finding("gpu_throttling", _sev(pct, T.THROTTLE_MEDIUM_PCT, T.THROTTLE_HIGH_PCT),
                         f"GPU clocks throttled ({top}) for {pct:.0f}% of the window", txt, sugg)
    if not t["samples"] and (t.get("clock_drop_pct") or 0.0) >= T.THROTTLE_MEDIUM_PCT:
        dev = e.cite("device", f"{base}.device")
        pct = e.cite("clock_drop_pct_of_window", f"{base}.clock_drop_pct", 2)
        cmax = e.cite("sm_clock_mhz_max", f"{base}.sm_clock_mhz_max", 0)
        return e.finding("gpu_throttling", "low", f"GPU SM clock below {T.CLOCK_DROP_FRACTION:.0%} of its max for {pct:.0f}% of the window",
                         [f"GPU {dev}: SM clock below {T.CLOCK_DROP_FRACTION * cmax:.0f} MHz ({T.CLOCK_DROP_FRACTION:.0%} of the "
                          f"window's max {cmax:.0f} MHz) for {pct:.1f}% of the window; no clock-event reasons were recorded "
                          "(an idle GPU also lowers its clocks)."],
                         "Record clock-event reasons (nvidia-ml-py with a recent driver) to tell power/thermal throttling from idle clocks.")
    return None


def gpu_temperature(res: dict, found: dict) -> dict | None:
    idx = _series_index(res, "gpu.temp_c")
    if not idx:
        return None
    ser = res["counters"]["series"]
    i = max(idx, key=lambda j: ser[j]["max"])
    if ser[i]["max"] < _t('GPU_TEMP_WARN_C'):
        return None
    e = Evidence(res)
    dev, mx, mean, n = e.cite_all(f"counters.series[{i}]", device="device", temp_c_max=("max", 1), temp_c_mean=("mean", 1),
                                  samples="samples")
    e.derive("warn_c", _t('GPU_TEMP_WARN_C'), _t_src('GPU_TEMP_WARN_C'))
    e.derive("critical_c", _t('GPU_TEMP_CRITICAL_C'), _t_src('GPU_TEMP_CRITICAL_C'))
    return e.finding("gpu_temperature", _sev(mx, _t('GPU_TEMP_WARN_C'), _t('GPU_TEMP_CRITICAL_C')),
                     f"GPU temperature reached {mx:.0f} °C",
                     [f"GPU {dev}: up to {mx:.0f} °C (mean {mean:.0f} °C over {n} samples); alerts at "
                      f"> {_t('GPU_TEMP_WARN_C'):g} °C (warning) and > {_t('GPU_TEMP_CRITICAL_C'):g} °C (critical)."],
                     "Check cooling and airflow (fans, inlet temperature, neighbouring GPUs); hot GPUs throttle their clocks "
                     "(see gpu_throttling), which slows kernels.")


def gpu_memory_pressure(res: dict, found: dict) -> dict | None:
    gm = (res.get("counters") or {}).get("gpu_memory") or []
    rows = [(j, g) for j, g in enumerate(gm) if g.get("peak_pct") is not None]
    if not rows:
        return None
    i, g = max(rows, key=lambda r: r[1]["peak_pct"])
    if g["peak_pct"] < _t('GPU_MEMORY_WARN_PCT'):
        return None
    e = Evidence(res)
    dev, pct, peak, total, head = e.cite_all(f"counters.gpu_memory[{i}]", device="device", peak_pct=("peak_pct", 2),
                                             peak_bytes="peak_bytes", total_bytes="total_bytes", headroom_bytes="headroom_bytes")
    return e.finding("gpu_memory_pressure", _sev(pct, _t('GPU_MEMORY_WARN_PCT'), _t('GPU_MEMORY_CRITICAL_PCT')),
                     f"GPU memory {pct:.0f}% used at peak",
                     [f"GPU {dev}: peak {peak / 2**30:.2f} GiB of {total / 2**30:.2f} GiB ({pct:.1f}%), headroom "
                      f"{head / 2**30:.2f} GiB; alerts at > {_t('GPU_MEMORY_WARN_PCT'):g}% (warning) and "
                      f"> {_t('GPU_MEMORY_CRITICAL_PCT'):g}% (critical)."],
                     "Leave headroom for longer sequences and larger batches: cap the KV cache (paged attention, a smaller "
                     "max length), quantize weights, or lower the batch size; an OOM mid-run loses the batch.")


def gpu_util_counter(res: dict, found: dict) -> dict | None:
    idx = _series_index(res, "gpu.util_pct")
    ser = (res.get("counters") or {}).get("series") or []
    idx = [j for j in idx if ser[j]["samples"] >= T.GPU_UTIL_MIN_SAMPLES]
    if not idx:
        return None
    i = idx[0]
    e = Evidence(res)
    dev, mean, n = e.cite_all(f"counters.series[{i}]", device="device", nvml_util_mean_pct=("mean", 1), samples="samples")
    win = e.cite("window_ms", "e2e_ms")
    gpu = res.get("gpu")
    busy = e.cite("trace_busy_pct", "gpu.busy_pct", 1) if gpu is not None else 0.0
    diff = e.derive("disagreement_pts", abs(mean - busy), "|nvml_util_mean_pct - trace_busy_pct|", 1)
    txt = [f"GPU {dev}: NVML utilisation {mean:.0f}% on average over {n} samples; the trace's GPU busy time is "
           f"{busy:.0f}% of the window."]
    if mean < _t('GPU_UTIL_LOW_PCT'):
        sev = "high" if win / 1e3 >= T.GPU_UTIL_LOW_CRITICAL_S else "medium"
        txt.append(f"Below the alert level of {_t('GPU_UTIL_LOW_PCT'):g}% (critical when it lasts > "
                   f"{T.GPU_UTIL_LOW_CRITICAL_S:g} s; this window is {win / 1e3:.1f} s).")
        return e.finding("gpu_util_counter", sev, f"NVML GPU utilisation {mean:.0f}%", txt,
                         "The GPU has little to do: batch more requests, overlap host work with GPU work, or share the GPU.")
    if diff >= T.GPU_UTIL_DISAGREE_PTS:
        txt.append(f"They differ by {diff:.0f} points (>= {T.GPU_UTIL_DISAGREE_PTS:g}): "
                   + ("another process or unrecorded kernels keep the GPU busy" if mean > busy else
                      "NVML's coarse sampling period (1/6-1 s) misses short bursts, or the profiler recorded work NVML did not see")
                   + ".")
        return e.finding("gpu_util_counter", "low", "NVML GPU utilisation disagrees with the trace", txt,
                         "Check `nvidia-smi pmon` for other processes on the GPU; analyse a longer window so NVML's period "
                         "fits inside it.")
    if mean >= _t('GPU_UTIL_HIGH_PCT'):
        txt.append(f"Above the warning level of {_t('GPU_UTIL_HIGH_PCT'):g}%: the GPU is saturated.")
        return e.finding("gpu_util_counter", "info", f"NVML GPU utilisation {mean:.0f}% (saturated)", txt,
                         "Throughput now depends on the kernels themselves (see the kernel table); more load will queue.")
    return None


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
    if not d or d.get("mbu_pct") is None or d["mbu_pct"] >= T.DECODE_LOW_MBU_PCT:
        return None
    e = Evidence(res)
    mbu = e.cite("decode_mbu_pct", "llm.stages[decode].mbu_pct", 2)
    e.cite("bytes_per_step", "llm.stages[decode].bytes_per_step")
    e.cite("mean_step_ms", "llm.stages[decode].step_ms.mean")
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
    if k["limiter"] == "compute" and (k.get("tensor_pct") or 0.0) >= T.KERNEL_TENSOR_UNUSED_PCT:
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
    txt += [f"ncu: {r}" for r in k.get("ncu_rules", [])[:1]]
    return e.finding("kernel_limiter", "medium" if share >= 2 * T.KERNEL_LIMITER_MIN_SHARE_PCT else "low",
                     f"Top profiled kernel is {k['limiter_text'].split(':')[0]}", txt, k["lever"])
