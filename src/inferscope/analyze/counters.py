"""Counters as evidence: per-metric statistics over the window, per step/range, GPU memory
headroom, process RSS / page-fault / context-switch rates, the CPU cores the process may use,
NVML clock-event (throttle) reasons and NUMA placement.

Input: the trace's COUNTER tracks (live runs: collect/system.py, collect/nvml.py; nsys:
GPU_METRICS when exported) and ``meta["numa"]``.  Everything is vectorised per track.

Rules (exact):
- a sample belongs to the window when ``start_ns <= ts_ns <= end_ns``; statistics are over
  samples (min, mean, p95 by linear interpolation, max), not time-weighted;
- NaN, infinite and negative samples are dropped, counted and warned about (no counter here is
  negative); a track whose samples are all dropped is not reported;
- cumulative counters (``proc.page_faults``, ``proc.ctx_switches``) are reported as rates:
  ``(last - first) / (t_last - t_first)`` over the window's samples, and per interval for the
  statistics (``proc.page_faults_per_s``);
- ``gpu.clock_event_reasons`` is a bitmask (NVML ``nvmlClocksEventReasons``): each sample holds
  until the next one (the last one for the median sample interval), clipped to the window; a
  reason's share is the held time with its bit set / the window;
- GPU memory headroom = the device's total memory (trace meta) - the peak of ``gpu.mem_used_bytes`` (NVML), or
  without it of ``gpu.mem_reserved_bytes`` (torch's caching-allocator pool, from a Kineto trace's memory events).
"""
from __future__ import annotations

import re

import numpy as np

from .. import thresholds as T
from ..trace.kinds import SpanKind, TrackKind
from ..trace.model import Trace, codes_in
from .intervals import active_at, union
from .select import inside, overlap, starts_inside
from .window import Window
from .llm import _steps

CUMULATIVE = {"proc.page_faults": "proc.page_faults_per_s", "proc.ctx_switches": "proc.ctx_switches_per_s",
              "proc.invol_ctx_switches": "proc.invol_ctx_switches_per_s"}
REASONS_METRIC = "gpu.clock_event_reasons"
# NVML clocks-event reason bits (nvml.h, nvmlClocksEventReason*; formerly ClocksThrottleReason*).
# 0x1 (GPU idle) and 0x2 (application clocks setting) and 0x100 (display clock setting) are not
# slowdowns of a busy GPU and are not counted as throttling.
THROTTLE_BITS = {
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
}
THROTTLE_MASK = sum(THROTTLE_BITS)
# the counters shown per step / range (the rest are in the window table)
RANGE_METRICS = ("gpu.util_pct", "gpu.sm_clock_mhz", "gpu.power_w", "gpu.temp_c", "gpu.mem_used_bytes", "cpu.util_pct",
                 "proc.cpu_pct", "proc.rss_bytes")
_CORE = re.compile(r"cpu\.core(\d+)\.util_pct")


def unit_of(metric: str) -> str:
    for suf, u in (("_bytes_per_s", "B/s"), ("_per_s", "1/s"), ("_pct", "%"), ("_bytes", "B"), ("_mhz", "MHz"),
                   ("_w", "W"), ("_c", "°C"), ("_us", "us"), ("_ms", "ms")):
        if metric.endswith(suf):
            return u
    return ""


def _stats(v: np.ndarray) -> dict:
    return {"min": float(v.min()), "mean": float(v.mean()), "p95": float(np.percentile(v, 95)), "max": float(v.max())}


def _held_durations(ts: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Time each sample holds inside [lo, hi): until the next sample; the last for the median interval."""
    if len(ts) == 0:
        return np.zeros(0, np.int64)
    step = int(np.median(np.diff(ts))) if len(ts) > 1 else 0
    ends = np.concatenate((ts[1:], [ts[-1] + step]))
    return np.maximum(0, np.minimum(ends, hi) - np.maximum(ts, lo))


MAX_CPU_ID = 1 << 16   # a cpulist id beyond any Linux build (NR_CPUS <= 8192): the list is not one


def _parse_cpus(x) -> list[int] | None:
    if isinstance(x, list) and all(isinstance(i, int) for i in x):
        return sorted(x)
    if isinstance(x, str) and x.strip():
        out: set[int] = set()
        try:
            for part in x.split(","):
                if "-" in part:
                    a, b = part.split("-")
                    if not 0 <= int(a) <= int(b) < MAX_CPU_ID:
                        return None
                    out.update(range(int(a), int(b) + 1))
                elif part.strip():
                    if not 0 <= int(part) < MAX_CPU_ID:
                        return None
                    out.add(int(part))
        except ValueError:
            return None
        return sorted(out)
    return None


def counters(trace: Trace, window: Window, max_ranges: int = 8) -> dict | None:
    c = trace.counters
    numa = trace.meta.get("numa") if isinstance(trace.meta.get("numa"), dict) else None
    if not len(c) and not numa:
        return None
    lo, hi = int(window.start_ns), int(window.end_ns)
    win_ns = max(1, hi - lo)
    warnings: list[str] = []
    tk = trace.tracks
    series: list[dict] = []
    per_track: dict[int, tuple[str, int, np.ndarray, np.ndarray]] = {}   # kept samples in the window
    full: dict[int, tuple[str, int, np.ndarray, np.ndarray]] = {}        # every kept sample (held values)
    bad_total, bad_names = 0, []
    for t in np.unique(c.track).tolist():
        if int(tk.kind[t]) != int(TrackKind.COUNTER):
            continue
        metric = trace.strings[int(tk.name[t])] if tk.name[t] >= 0 else f"track{t}"
        dev = int(tk.device[t])
        m = c.track == t
        ts, v = c.ts_ns[m], c.value[m]
        good = np.isfinite(v) & (v >= 0)
        nbad = int((~good).sum())
        if nbad:
            bad_total += nbad
            bad_names.append(metric)
            ts, v = ts[good], v[good]
        o = np.argsort(ts, kind="stable")
        ts, v = ts[o], v[o]
        inw = starts_inside(ts, window, include_end=True)   # closed: a sample at end_ns counts
        per_track[t] = (metric, dev, ts[inw], v[inw])
        full[t] = (metric, dev, ts, v)
        if metric == REASONS_METRIC:
            continue
        ts_w, v_w = ts[inw], v[inw]
        if metric in CUMULATIVE:
            if len(ts_w) < 2:
                continue
            dt = np.diff(ts_w) / 1e9
            ok = dt > 0
            rates = np.diff(v_w)[ok] / dt[ok]
            rates = rates[rates >= 0]         # a counter reset is not a negative rate
            if not len(rates):
                continue
            row = {"metric": CUMULATIVE[metric], "device": dev, "unit": "1/s", "samples": int(len(ts_w)), **_stats(rates)}
            if v_w[-1] >= v_w[0] and ts_w[-1] > ts_w[0]:     # the window's overall rate
                row["mean"] = float((v_w[-1] - v_w[0]) / ((ts_w[-1] - ts_w[0]) / 1e9))
            series.append(row)
            continue
        if not len(v_w):
            continue
        series.append({"metric": metric, "device": dev, "unit": unit_of(metric), "samples": int(len(v_w)), **_stats(v_w)})
    if bad_total:
        warnings.append(f"counters: {bad_total} sample(s) dropped as NaN, infinite or negative "
                        f"({', '.join(sorted(set(bad_names))[:6])}); statistics use the remaining samples")
    # GPU counters first, then cpu.util_pct, per-core, process; per-core rows go to their own table
    cores_rows = [r for r in series if _CORE.fullmatch(r["metric"])]
    series = [r for r in series if not _CORE.fullmatch(r["metric"])]
    series.sort(key=lambda r: (0 if r["metric"].startswith("gpu.") else 1 if r["metric"].startswith("cpu.") else 2,
                               r["device"], r["metric"]))

    def find(metric: str, dev: int | None = None):
        return next((r for r in series if r["metric"] == metric and (dev is None or r["device"] == dev)), None)

    # GPU memory peak and headroom per device
    devices = {int(d.get("id", i)): d for i, d in enumerate(trace.meta.get("devices") or []) if isinstance(d, dict)}
    gpu_memory = []
    nvml_devs = {r["device"] for r in series if r["metric"] == "gpu.mem_used_bytes"}
    for r in series:      # NVML's used memory, else torch's reserved pool (a Kineto trace's memory events)
        if not (r["metric"] == "gpu.mem_used_bytes"
                or (r["metric"] == "gpu.mem_reserved_bytes" and r["device"] not in nvml_devs)):
            continue
        total = devices.get(r["device"], {}).get("total_memory_bytes")
        if not isinstance(total, (int, float)) or total <= 0:
            warnings.append(f"counters: GPU {r['device']} has memory samples but no total memory in the trace; headroom not computed")
            total = None
        gpu_memory.append({"device": r["device"], "metric": r["metric"], "peak_bytes": int(r["max"]), "total_bytes": int(total) if total else None,
                           "peak_pct": 100.0 * r["max"] / total if total else None,
                           "headroom_bytes": int(total - r["max"]) if total else None})
    rss = find("proc.rss_bytes")
    pf = find("proc.page_faults_per_s")
    cs = find("proc.ctx_switches_per_s")
    # the cores the process may run on (affinity recorded at collection), else every core
    allowed = _parse_cpus((numa or {}).get("process_cpus"))
    core_table = []
    for r in sorted(cores_rows, key=lambda r: int(_CORE.fullmatch(r["metric"]).group(1))):
        core = int(_CORE.fullmatch(r["metric"]).group(1))
        if allowed is None or core in allowed:
            core_table.append([core, round(r["mean"], 3), round(r["p95"], 3), round(r["max"], 3)])
    process_cores = None
    if core_table:
        means = np.array([row[1] for row in core_table])
        process_cores = {"cores": len(core_table), "basis": "process CPU affinity at collection" if allowed is not None
                         else "affinity not recorded: every core", "mean_util_pct": float(means.mean()),
                         "max_core_mean_util_pct": float(means.max())}
    throttle = _throttle(full, lo, hi, win_ns)
    by_range = _by_range(trace, window, per_track, max_ranges)
    slow = _slow_steps(trace, window, full)
    tables = {}
    if series:
        tables["counters"] = {"columns": ["metric", "device", "unit", "samples", "min", "mean", "p95", "max"],
                              "rows": [[r["metric"], r["device"], r["unit"], r["samples"], round(r["min"], 4), round(r["mean"], 4),
                                        round(r["p95"], 4), round(r["max"], 4)] for r in series]}
    if core_table:
        tables["counters_cores"] = {"columns": ["core", "mean_util_pct", "p95_util_pct", "max_util_pct"], "rows": core_table}
    if by_range["rows"]:
        tables["counters_by_range"] = by_range
    return {"series": series, "gpu_memory": gpu_memory,
            "rss_peak_bytes": int(rss["max"]) if rss else None,
            "page_faults_per_s": pf["mean"] if pf else None,
            "ctx_switches_per_s": cs["mean"] if cs else None,
            "invol_ctx_switches_per_s": _mean(find("proc.invol_ctx_switches_per_s")),
            "sys_cpu_pct": _mean(find("proc.sys_cpu_pct")),
            "main_runq_pct": _mean(find("proc.main_runq_pct")),
            "process_cores": process_cores, "throttle": throttle, "numa": _numa(numa),
            "dropped_samples": bad_total, "slow_steps": slow,
            "rule": "samples with start <= ts <= end of the window; min/mean/p95/max over samples; cumulative counters as "
                    "rates; NaN/inf/negative samples dropped",
            "tables": tables, "warnings": warnings}


def _mean(row: dict | None) -> float | None:
    return row["mean"] if row else None


def _throttle(per_track: dict, lo: int, hi: int, win_ns: int) -> list[dict]:
    """``per_track``: every sample (a sample before the window holds into it).  Per GPU: NVML clock-event reasons (share of the window with a slowdown bit set) and SM clock drops
    (share of the window with the SM clock below CLOCK_DROP_FRACTION x its max in the window)."""
    reasons_by_dev = {dev: (ts, v) for metric, dev, ts, v in per_track.values() if metric == REASONS_METRIC and len(ts)}
    clocks = {dev: (ts, v) for metric, dev, ts, v in per_track.values() if metric == "gpu.sm_clock_mhz" and len(ts)}
    out = []
    for dev in sorted(set(reasons_by_dev) | set(clocks)):
        row = {"device": dev, "samples": 0, "covered_pct": 0.0, "affected_pct": 0.0, "affected_samples": 0, "reasons": [],
               "sm_clock_mhz_throttled": None, "sm_clock_mhz_other": None, "sm_clock_mhz_max": None,
               "clock_drop_pct": None, "intervals": []}
        thr = None
        if dev in reasons_by_dev:
            ts, v = reasons_by_dev[dev]
            held = _held_durations(ts, lo, hi)
            used = held > 0
            ts, v, held = ts[used], v[used], held[used]
            bits = v.astype(np.int64)
            thr = (bits & THROTTLE_MASK) != 0
            reasons = []
            for bit, name in THROTTLE_BITS.items():
                on = (bits & bit) != 0
                if on.any():
                    reasons.append({"reason": name, "bit": bit, "samples": int(on.sum()),
                                    "window_pct": 100.0 * float(held[on].sum()) / win_ns})
            reasons.sort(key=lambda r: -r["window_pct"])
            row.update(samples=int(len(ts)), covered_pct=100.0 * float(held.sum()) / win_ns,
                       affected_pct=100.0 * float(held[thr].sum()) / win_ns, affected_samples=int(thr.sum()), reasons=reasons)
            if thr.any():
                us, ue = union(np.maximum(ts[thr], lo), np.maximum(ts[thr], lo) + held[thr])
                row["intervals"] = [[int(a), int(b)] for a, b in zip(us[:200].tolist(), ue[:200].tolist())]
        if dev in clocks:
            cts, cv = clocks[dev]
            held_c = _held_durations(cts, lo, hi)
            used = held_c > 0
            cts, cv, held_c = cts[used], cv[used], held_c[used]
        if dev in clocks and len(cts):
            cmax = float(cv.max())
            row["sm_clock_mhz_max"] = cmax
            if cmax > 0:
                row["clock_drop_pct"] = 100.0 * float(held_c[cv < T.CLOCK_DROP_FRACTION * cmax].sum()) / win_ns
            if thr is not None and thr.any():
                # the reason sample in force at each clock sample (the last one at or before it)
                k = np.searchsorted(ts, cts, side="right") - 1
                th = np.zeros(len(cts), bool)
                th[k >= 0] = thr[k[k >= 0]]
                if th.any():
                    row["sm_clock_mhz_throttled"] = float(cv[th].mean())
                if (~th).any():
                    row["sm_clock_mhz_other"] = float(cv[~th].mean())
        out.append(row)
    return out


SLOW_METRICS = ("gpu.sm_clock_mhz", "gpu.power_w", "gpu.temp_c", "gpu.util_pct", "cpu.util_pct", "proc.cpu_pct",
                "proc.page_faults", "proc.ctx_switches")


def _llm_steps_of_one_kind(trace: Trace, window: Window, inw: np.ndarray) -> tuple[np.ndarray, str]:
    """Generation steps (analyze/llm.py: live hf.forward, vLLM/SGLang steps) of the most frequent kind
    (decode, as a rule): a prefill is slower than a decode step by design, so only like is compared with like."""
    rows = [r for r in _steps(trace, window, None) if inw[r["i"]]]
    if not rows:
        return np.zeros(0, dtype=np.int64), ""
    kinds: dict[str, list] = {}
    for r in rows:
        kinds.setdefault(r["kind"], []).append(r)
    kind, rs = max(kinds.items(), key=lambda kv: len(kv[1]))
    names = sorted({r["name"] for r in rs})
    label = names[0] if len(names) == 1 else "generation steps"
    return np.asarray(sorted(r["i"] for r in rs), dtype=np.int64), f"{kind} steps ({label[:60]})"


def _slow_steps(trace: Trace, window: Window, full: dict) -> dict | None:
    """The slowest 5 % of steps vs the rest: each counter's value in force at each step's midpoint
    (the last sample at or before it; cumulative counters as the rate over the surrounding interval).
    Steps: ProfilerStep ranges, else generation steps of one kind (decode with decode), else the most
    frequent range name."""
    s = trace.spans
    inw = inside(s.start_ns, s.end_ns, window) & (s.end_ns > s.start_ns)
    idx = np.flatnonzero(inw & (s.kind == int(SpanKind.STEP)))
    source = "steps"
    if len(idx) < T.SLOW_STEPS_MIN_STEPS:
        idx, source = _llm_steps_of_one_kind(trace, window, inw)
    if len(idx) < T.SLOW_STEPS_MIN_STEPS:
        ann = np.flatnonzero(inw & (s.kind == int(SpanKind.ANNOTATION)))
        if not len(ann):
            return None
        u, inv, cnt = np.unique(s.name[ann], return_inverse=True, return_counts=True)
        j = int(np.argmax(cnt))
        if cnt[j] < T.SLOW_STEPS_MIN_STEPS:
            return None
        idx = ann[inv == j]
        source = trace.strings[int(u[j])]
    dur = (s.end_ns[idx] - s.start_ns[idx]).astype(np.float64)
    mid = (s.start_ns[idx] + s.end_ns[idx]) // 2
    n_slow = max(1, int(round(len(idx) * T.SLOW_STEPS_FRACTION)))
    order = np.argsort(-dur, kind="stable")
    slow = np.zeros(len(idx), bool)
    slow[order[:n_slow]] = True
    rows = []
    for metric, dev, ts, v in full.values():
        if metric not in SLOW_METRICS or len(ts) < 2:
            continue
        if metric in CUMULATIVE:
            dt = np.diff(ts) / 1e9
            with np.errstate(divide="ignore", invalid="ignore"):
                v = np.where(dt > 0, np.diff(v) / dt, np.nan)
            ts = ts[:-1]                                   # the rate from this sample to the next one
            metric = CUMULATIVE[metric]
        k = np.searchsorted(ts, mid, side="right") - 1
        ok = (k >= 0) & (mid <= ts[-1] + (ts[-1] - ts[0]) / max(1, len(ts) - 1) * 2)
        val = np.full(len(idx), np.nan)
        val[ok] = v[k[ok]]
        a, b = val[slow & np.isfinite(val)], val[~slow & np.isfinite(val)]
        if not len(a) or not len(b):
            continue
        sm, rm = float(a.mean()), float(b.mean())
        rows.append({"metric": metric, "device": dev, "slow_mean": sm, "rest_mean": rm,
                     "diff_pct": 100.0 * (sm - rm) / abs(rm) if rm else None})
    rows.sort(key=lambda r: -abs(r["diff_pct"] or 0.0))
    return {"source": source, "steps": int(len(idx)), "slow_count": n_slow,
            "slow_mean_ms": float(dur[slow].mean()) / 1e6, "rest_mean_ms": float(dur[~slow].mean()) / 1e6 if (~slow).any() else None,
            "metrics": rows}


def _by_range(trace: Trace, window: Window, per_track: dict, max_ranges: int) -> dict:
    """Mean of each counter over the samples inside each step / range name (the longest names first)."""
    s = trace.spans
    lo, hi = int(window.start_ns), int(window.end_ns)
    m = codes_in(s.kind, [int(SpanKind.STEP), int(SpanKind.ANNOTATION)]) & overlap(s.start_ns, s.end_ns, window) & (s.end_ns > s.start_ns)
    idx = np.flatnonzero(m)
    present = {metric for metric, _, ts, _ in per_track.values() if len(ts)}
    metrics = [m for m in RANGE_METRICS if m in present]
    cols = ["range", "count", "samples"] + metrics
    if not len(idx) or not metrics:
        return {"columns": cols, "rows": []}
    names = s.name[idx]
    dur = np.minimum(s.end_ns[idx], hi) - np.maximum(s.start_ns[idx], lo)
    uniq, inv = np.unique(names, return_inverse=True)
    tot = np.bincount(inv, weights=dur)
    order = np.argsort(-tot, kind="stable")[:max_ranges]
    rows = []
    for u in order.tolist():
        sel = idx[inv == u]
        us, ue = union(np.maximum(s.start_ns[sel], lo), np.minimum(s.end_ns[sel], hi))
        row = [trace.strings[int(uniq[u])], int(len(sel)), 0]
        nsamp = 0
        for metric in metrics:
            vals = []
            for mt, _, ts, v in per_track.values():
                if mt == metric and len(ts):
                    inside = active_at(us, ue, ts) > 0
                    if inside.any():
                        vals.append(v[inside])
            if vals:
                allv = np.concatenate(vals)
                nsamp = max(nsamp, len(allv))
                row.append(round(float(allv.mean()), 4))
            else:
                row.append(None)
        row[2] = nsamp
        if nsamp:
            rows.append(row)
    return {"columns": cols, "rows": rows}


def _int(x) -> int | None:
    """x when it is a plain int64 (not a bool), else None: a live trace's meta is input like any other."""
    return x if isinstance(x, int) and not isinstance(x, bool) and -2 ** 63 <= x < 2 ** 63 else None


def _numa(numa: dict | None) -> dict | None:
    if not numa or not isinstance(numa, dict):
        return None
    nodes = numa.get("process_numa_nodes")
    out = {"numa_nodes": _int(numa.get("numa_nodes")),
           "process_numa_nodes": [int(n) for n in nodes] if isinstance(nodes, list) and all(_int(n) is not None for n in nodes) else None}
    for k in ("gpu_local", "remote_numa_possible"):
        out[k] = numa.get(k) if isinstance(numa.get(k), bool) else None
    cpus = _parse_cpus(numa.get("process_cpus"))
    out["process_cpus"] = len(cpus) if cpus is not None else None
    tt = numa.get("torch_threads")
    out["torch_threads"] = _int(tt)
    g = numa.get("gpu_numa_nodes")
    out["gpu_numa_nodes"] = [{"pci_bus_id": str(x.get("pci_bus_id"))[:64],
                              "numa_node": -1 if _int(x.get("numa_node", -1)) is None else x.get("numa_node", -1)}
                             for x in g if isinstance(x, dict)] if isinstance(g, list) else []
    return out
