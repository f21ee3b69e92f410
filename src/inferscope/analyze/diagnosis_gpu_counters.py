"""Finding rules on GPU counters (registered in diagnosis.RULES): NVML clock throttling, GPU temperature,
GPU memory pressure and NVML utilisation against the trace's busy time.  Evidence: analyze/evidence.py.
"""
from __future__ import annotations

from .. import thresholds as T
from .evidence import Evidence, _sev, _t, _t_src


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
        e.cite("top_reason_pct_of_window", f"{base}.reasons[0].window_pct", 2)
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
    """Peak device memory at or above GPU_MEMORY_WARN_PCT of the total: the early warning below capacity.

    One cause, one finding: when ``oom`` has fired (an out-of-memory exception, or memory at OOM_CAPACITY_PCT, the
    level of GPU_MEMORY_CRITICAL_PCT), this rule says nothing.  Both would state the same peak with two severities
    and two pieces of advice; oom is the one kept because it names the consequence (the next allocation fails, or
    did), is high whatever the configured warning levels, and its advice covers this one's.  oom cites this rule's
    numbers (peak, total, headroom) in its own evidence.  diagnosis.RULES runs oom before this rule for that."""
    if "oom" in found:
        return None
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
