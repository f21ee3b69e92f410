"""Which result tables the human-readable reports show (report.md and report.html share the rule).

report.json and the CSV tables keep every table (``gpu_idle_gaps``: report.json the largest gaps, its CSV every gap);
a page shows each table once and none that is empty:
- a table without rows is left out;
- ``breakdown``: both pages draw the breakdown in their own section;
- without GPU work in the trace (``result["gpu"]`` is None) the GPU / CUDA API tables are left out, and
  ``nvtx_ranges`` too (its extra columns are kernel attribution; ``ranges`` lists the same ranges);
- ``nvtx_by_pid`` only with ranges from two or more processes (one process: the rows of ``nvtx_ranges``).
"""
from __future__ import annotations

GPU_TABLES = frozenset({"kernels", "copies", "syncs", "gpu_idle_gaps", "nvtx_ranges", "nvtx_kernel_time", "launch_latency",
                        "memory_ops_by_api", "sync_like_api_names", "kernels_by_pid", "sync_by_pid", "nvtx_by_pid",
                        "efficiency_by_op"})
DRAWN_ELSEWHERE = frozenset({"breakdown", "kernel_deep_dive"})


def shown_tables(result: dict) -> list[str]:
    """Names of the tables to show, in the result's order."""
    tables = result.get("tables") if isinstance(result.get("tables"), dict) else {}
    gpu = result.get("gpu") is not None
    out = []
    for name, t in tables.items():
        rows = t.get("rows") if isinstance(t, dict) else None
        if not rows or name in DRAWN_ELSEWHERE:
            continue
        if not gpu and name in GPU_TABLES:
            continue
        if name == "nvtx_by_pid" and len({r[0] for r in rows if isinstance(r, (list, tuple)) and r}) < 2:
            continue
        out.append(name)
    return out


def more_rows_note(n: int) -> str:
    """What a page says under a table it cut: no file is named, only how to get every row."""
    return f"({n} more rows not shown; --format csv or json writes every row)"
