"""What a live trace's meta says about its collection (collect/session.py's Session, passed as ``s``).

``meta.collection`` (mode, duration, the collectors' own CPU as an overhead estimate, the buffer, the
sampler's rates and counters - the off-CPU probe's, the timer signals', GC pauses' -, the run's
window on the trace's clock), the trace meta around it (tool versions, GPU devices, the sources
that are missing, LLM models), and the sampling-rate judgement (per-thread rates, the low-rate
warning).  Read at every build_trace and crash-journal flush (session_trace.py), never per tick.
"""
from __future__ import annotations

import os
import sys
import threading
import time

from .buffer import BYTES_PER_EVENT


def collection_meta(s, end_ns: int, complete: bool) -> dict:
    proc_cpu = time.process_time_ns() - s.cpu_start_ns
    own = s.thread_cpu_ns()   # the housekeeping thread's CPU clock includes its flushes
    if s.gpu_act is not None:   # + CUPTI's buffer callbacks (record copies, on CUPTI's thread)
        own += s.gpu_act.callback_cpu_ns
    smp = s.sampler
    dur_ms = (end_ns - s.start_ns) / 1e6
    return {
        "mode": "live", "complete": complete, "pid": s.pid,
        "collection_ms": round(dur_ms, 3), "duration_ms": round(dur_ms, 3),
        "events": 0, "dropped_events": int(s.buffer.dropped),
        "clock_sync_error_us": None,
        "estimated_overhead_pct": round(100.0 * own / proc_cpu, 2) if proc_cpu > 0 else None,
        "overhead_basis": ("CPU time of InferScope's sampler + housekeeping threads (incl. periodic flushes)"
                           + (" + CUPTI buffer callbacks" if s.gpu_act is not None else "")
                           + " / CPU time of the whole process"),
        "buffer_capacity_events": s.buffer.capacity, "bytes_per_event_estimate": BYTES_PER_EVENT,
        "trace_size_mb": s.cfg.trace_size_mb,
        "cpu_sampling_hz": s.cfg.cpu_sampling_frequency_hz,
        "cpu_sampling_hz_achieved": round(smp.achieved_hz, 1) if smp else 0.0,
        "cpu_samples": smp.samples if smp else 0,
        # the off-CPU probe (collect/blocking.py): syscall reads, marks written, time spent (in ticks)
        "offcpu_probes": smp.blocking.probes if smp and smp.blocking is not None else None,
        "offcpu_marks": smp.blocking.marks if smp and smp.blocking is not None else None,
        "offcpu_probe_ms": round(smp.blocking.ns / 1e6, 3) if smp and smp.blocking is not None else None,
        "offcpu_probes_over_budget": smp.blocking.skipped if smp and smp.blocking is not None else None,
        # achieved rate outside module imports (what the analysis window usually sees)
        "cpu_sampling_hz_steady": round(1e9 * smp.steady_ticks / smp.steady_ns, 1) if smp and smp.steady_ns else None,
        # per thread: ticks that saw it outside imports over the time they covered (its lifetime there)
        "cpu_sampling_threads": thread_rates(smp, s.thread_names),
        # wall time the sampler held the GIL: a lower bound on what it cost a Python-bound thread
        "sampler_gil_held_ms": round(smp.busy_ns / 1e6, 1) if smp else 0.0,
        # the main thread's timer signals (collect/sigframes.py): handled, and late (not used for its frame)
        "signal_frames": (smp.signal_counts() or (None, None))[0] if smp else None,
        "signal_frames_late": (smp.signal_counts() or (None, None))[1] if smp else None,
        "cpu_compute_source": (("perf_event task-clock IP samples" + (
            ", libc samples by their caller on the user stack" if smp.perf_stack else ""))
            if smp and smp.perf_active else "GIL heuristic (perf_event off or unavailable)"),
        "system_sampling_hz": s.cfg.system_sampling_hz,
        "torch_profiler": s.torch_state,
        "nvml": "on" if (s.nvml and s.nvml.ok) else "unavailable",
        "follow_children": bool(getattr(s.cfg, "follow_children", True)),
        "flushes": s.flushes,
        # Python garbage collections (collect/gcpauses.py): whole-run counters (gc_* keys)
        **(s.gc_pauses.meta() if s.gc_pauses is not None else {"gc_pauses": False}),
        "wall_start_unix_ns": s.wall_start_ns,
        # when the process started, on the trace's clock (/proc/self/stat starttime: 1/CLK_TCK s
        # resolution, usually 10 ms); the whole-run window starts here, not at the first tick
        "process_start_ns": getattr(s, "process_start_ns", None),
        # native (non-Python) threads whose CPU time was recorded by perf role (native_threads.py)
        "native_threads": sorted(s.sampler.native_threads.seen) if smp and smp.native_threads else [],
        # when collection stopped (the program's exit for a finished run), on the trace's clock: the
        # whole-run window ends here even when the last sample came earlier (or none was taken)
        "run_end_ns": int(end_ns),
        "process_start_resolution_ms": round(1e3 / os.sysconf("SC_CLK_TCK"), 3) if hasattr(os, "sysconf") else None,
    }


def trace_meta(s, collection: dict, warnings: list, devices: list) -> dict:
    out = {"source_format": "inferscope", "devices": devices, "tool_versions": tool_versions(),
           "warnings": warnings, "missing": missing(s), "collection": collection}
    llm = getattr(s, "llm", None)
    if llm is not None and llm.models:
        out["models"] = llm.meta()
    return out


def tool_versions() -> dict:
    tool_versions = {"python": sys.version.split()[0]}
    tv = sys.modules.get("torch")
    if tv is not None:
        tool_versions["torch"] = str(getattr(tv, "__version__", "?"))
        cuda = getattr(getattr(tv, "version", None), "cuda", None)
        if cuda:
            tool_versions["cuda"] = str(cuda)
    return tool_versions


def devices(s) -> list:
    if s.nvml is not None and s.nvml.ok:
        return [{k: d[k] for k in ("id", "name", "total_memory_bytes")} for d in s.nvml.devices]
    return []


def missing(s) -> list[str]:
    miss = []
    if s.torch_state != "on":
        miss.append("torch_ops")
    if not (s.nvml and s.nvml.ok):
        miss.append("gpu_counters")
    if not (s.torch and s.torch.cuda) and not (s.gpu_act is not None and s.gpu_act.clock_start):
        miss.append("gpu_kernels")
    return miss


RATE_MIN_STEADY_NS = 500_000_000     # a rate is judged over at least this much steady time


def thread_rates(sampler, names: dict | None = None) -> list[dict]:
    """Per sampled thread: {tid, name, ticks, steady_ms, hz} outside imports (collect/sampler.py
    ``thread_ticks``); the main thread is named "main"; ``names``: tid -> name of threads seen (ended ones)."""
    if sampler is None:
        return []
    names = dict(names or {})
    names.update({t.native_id: t.name for t in threading.enumerate()})
    out = []
    for tid, (n, ns) in sorted(dict(getattr(sampler, "thread_ticks", None) or {}).items()):
        name = "main" if tid == getattr(sampler, "main_tid", None) else names.get(tid, f"tid {tid}")
        out.append({"tid": int(tid), "name": name, "ticks": int(n), "steady_ms": round(ns / 1e6, 1),
                    "hz": round(1e9 * n / ns, 1) if ns > 0 else None})
    return out


def sampling_rate_warning(sampler, setting_hz: float, names: dict | None = None) -> str | None:
    """One line when the sampler achieved less than half its rate outside imports (host load, a
    descheduled sampler, the GIL budget binding), naming the threads below half (each judged over
    >= 0.5 s of its steady ticks); the sampler as a whole judged likewise."""
    if sampler is None or not setting_hz:
        return None
    low = [r for r in thread_rates(sampler, names)
           if r["hz"] is not None and r["steady_ms"] * 1e6 >= RATE_MIN_STEADY_NS and r["hz"] < 0.5 * setting_hz]
    whole = (1e9 * sampler.steady_ticks / sampler.steady_ns
             if sampler.steady_ns >= RATE_MIN_STEADY_NS else None)
    if not low and (whole is None or whole >= 0.5 * setting_hz):
        return None
    who = ""
    if low:
        who = " on thread(s) " + ", ".join(f"{r['name']} ({r['hz']:.0f} Hz)" for r in low[:4])
        if len(low) > 4:
            who += f" and {len(low) - 4} more"
    hz = whole if whole is not None else min(r["hz"] for r in low)
    return (f"CPU sampling achieved {hz:.0f} Hz of the {setting_hz:g} Hz set{who}, below half (host load or an "
            "expensive tick): CPU class shares rest on fewer samples, see their 95 % interval")
