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
  reason's share is the held time with its bit set / the window (counters_throttle.py);
- the slowest 5 % of steps vs the rest: each counter's value at the steps' midpoints (counters_slow.py);
- GPU memory headroom = the device's total memory (trace meta) - the peak of ``gpu.mem_used_bytes`` (NVML), or
  without it of ``gpu.mem_reserved_bytes`` (torch's caching-allocator pool, from a Kineto trace's memory events).
"""
from __future__ import annotations

import re

import numpy as np

from ..trace.kinds import SpanKind, TrackKind
from ..trace.model import Trace, codes_in
from .counters_slow import slow_steps
from .counters_throttle import REASONS_METRIC, gpu_throttle
from .intervals import active_at, union
from .select import overlap, starts_inside
from .window import Window

CUMULATIVE = {"proc.page_faults": "proc.page_faults_per_s", "proc.ctx_switches": "proc.ctx_switches_per_s",
              "proc.invol_ctx_switches": "proc.invol_ctx_switches_per_s"}
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
    throttle = gpu_throttle(full, lo, hi, win_ns)
    by_range = _by_range(trace, window, per_track, max_ranges)
    slow = slow_steps(trace, window, full, CUMULATIVE)
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
