"""Which result tables the human-readable reports show (report.md and report.html share the rule).

report.json and the CSV tables keep every table (``gpu_idle_gaps``: report.json the largest gaps, its CSV every gap);
a page shows each table once and none that is empty:
- a table without rows is left out;
- ``breakdown``: both pages draw the breakdown in their own section;
- without GPU work in the trace (``report.gpu`` is None) the GPU / CUDA API tables are left out, and
  ``nvtx_ranges`` too (its extra columns are kernel attribution; ``ranges`` lists the same ranges);
- ``nvtx_by_pid`` only with ranges from two or more processes (one process: the rows of ``nvtx_ranges``).
"""
from __future__ import annotations

import re

from ..result import Report

GPU_TABLES = frozenset({"kernels", "copies", "syncs", "gpu_idle_gaps", "nvtx_ranges", "nvtx_kernel_time", "launch_latency",
                        "memory_ops_by_api", "sync_like_api_names", "kernels_by_pid", "sync_by_pid", "nvtx_by_pid",
                        "efficiency_by_op"})
DRAWN_ELSEWHERE = frozenset({"breakdown", "kernel_deep_dive"})


# the heading of each table in report.md and report.html (the name stays the CSV's and report.json's key)
TABLE_TITLES = {
    "llm_requests": "LLM requests (TTFT and TPOT per request)",
    "llm_steps": "LLM generation steps (prefill / decode)",
    "efficiency_by_op": "FLOPs, bytes and achieved throughput per op (from recorded shapes)",
    "module_hotspots": "Module hotspots (nn.Module paths: CPU time, GPU time of the kernels launched inside, FLOPs)",
    "gemm_shapes": "GEMM shapes (M/N/K per matrix-multiply op, the kernels they launched, achieved TFLOP/s)",
    "cublas_gemms": "cuBLAS GEMMs (--cublas-log: column-major m/n/k; the algorithm and tile per shape where cuBLASLt "
                    "logged one, none from the cuBLAS API log)",
    "top_python_functions": "Top Python functions (self time; the sampled function of each tick, or recorded frames)",
    "top_ops": "Top framework ops (self CPU time; device time of the work they launched)",
    "top_apis": "Top runtime / driver API calls (by total time)",
    "kernels": "Top GPU kernels (by total time)",
    "copies": "Copies",
    "syncs": "Blocking sync calls (the breakdown's sync_wait rule; rows add up to every call)",
    "gpu_idle_gaps": "Largest GPU idle gaps (no activity on any stream; --format csv writes every gap)",
    "steps": "Profiler steps",
    "ranges": "User / NVTX ranges (GPU time inclusive: a kernel counts for every range around its launch)",
    "phases": "Phases",
    "nvtx_ranges": "NVTX ranges with the kernel time attributed to them",
    "nvtx_kernel_time": "GPU kernel time by innermost NVTX range (via the launching call)",
    "nvtx_phases": "NVTX phases (--phase-map)",
    "launch_latency": "Launch API time vs queue time vs kernel time, per launch API",
    "memory_ops_by_api": "Memory operations by API (pageable async copies, synchronous copies / memsets)",
    "sync_like_api_names": "API names that look sync-like (Synchronize / Wait / Query in the name; includes non-blocking polls, not blocked time)",
    "kernels_by_pid": "Top kernels per process",
    "counters": "Counters over the window (GPU first; cumulative counters as rates)",
    "counters_by_range": "Counter means per step / range (samples inside its occurrences)",
    "counters_cores": "CPU utilisation of the process's cores",
    "sync_by_pid": "Blocking sync calls per process",
    "nvtx_by_pid": "NVTX ranges per process",
    "gc_pauses": "Python garbage-collector pauses per thread",
    "waited_for": "Waiting for other threads: what each other thread did on a CPU while the critical thread waited "
                  "(its dominant class and function then; not added to the breakdown)",
    "kernel_measured_vs_estimated": "Kernel efficiency: measured (Nsight Compute) vs estimated from shapes",
}
_ACRONYMS = {"cpu": "CPU", "gpu": "GPU", "gc": "GC", "nvtx": "NVTX", "api": "API", "apis": "APIs", "pid": "PID",
             "pids": "PIDs", "llm": "LLM", "ttft": "TTFT", "tpot": "TPOT", "mfu": "MFU", "mbu": "MBU", "numa": "NUMA",
             "sm": "SM", "dram": "DRAM", "nccl": "NCCL", "ms": "ms", "pct": "%", "ncu": "ncu", "id": "id"}


def words(name) -> str:
    """An identifier as words: ``gc_pauses`` -> "GC pauses", ``cpu_op`` -> "CPU op" (acronyms upper-cased,
    the first word capitalised); a name that is not an identifier is returned as it is."""
    s = str(name)
    if not re.fullmatch(r"[a-z][a-z0-9]*(_[a-z0-9]+)*", s):
        return s
    w = [_ACRONYMS.get(x, x) for x in s.split("_")]
    return " ".join([w[0][:1].upper() + w[0][1:]] + w[1:])


def table_title(name) -> str:
    """The words a page shows above a table."""
    return TABLE_TITLES.get(name) or words(name)


def shown_tables(report: Report) -> list[str]:
    """Names of the tables to show, in the report's order."""
    gpu = report.gpu is not None
    out = []
    for name, t in report.tables.items():
        rows = t.rows
        if not rows or name in DRAWN_ELSEWHERE:
            continue
        if not gpu and name in GPU_TABLES:
            continue
        if name == "nvtx_by_pid" and len({r[0] for r in rows if r}) < 2:
            continue
        out.append(name)
    return out


def more_rows_note(n: int) -> str:
    """What a page says under a table it cut: no file is named, only how to get every row."""
    return f"({n} more rows not shown; --format csv or json writes every row)"
