"""Nsight Compute metric names and units (used by ``ingest/ncu.py``; imports nothing of the package).

* ``unit_scale(unit)``: every unit ncu writes -> (class, factor to base units): time -> ns, bytes -> B,
  byte rates -> B/s, frequencies (``Hz``..``Ghz``, ``cycle/usecond``) -> Hz, ``%`` -> pct, the rest
  (``cycle``, ``inst``, ``warp``, ``register/thread``, ...) counts.  Decimal prefixes as ncu prints them
  (``Kbyte`` = 1e3 B); binary ones (``KiB``) by 1024.
* ``RAW``: canonical metric -> probes over metric names (the raw page's columns, and the raw names a
  details page prints under "Command line profiler metrics" for ``--metrics``): an exact name, a tuple
  (the sum of its parts), a regex (first match), or ``Max(regex)`` / ``Sum(regex)`` over every match.
* ``resolve(names)``: which names give each canonical metric; ``value(spec, get)``: its value.
* ``stall_spec(names)`` / ``stall_values``: warp stall reasons per launch (``STALL_FAMILIES``).
"""
from __future__ import annotations

import re
from typing import Callable, Iterable


class Max:
    """The largest value over every name the pattern matches (elapsed-based names first, if any)."""
    def __init__(self, pattern: str):
        self.rx = re.compile(pattern)


class Sum:
    """The sum over every name the pattern matches, a name dropped when another match's stem is its prefix
    (``X_sparsity_on`` inside ``X``) and ``smsp__`` names dropped when ``sm__`` ones match (the same work)."""
    def __init__(self, pattern: str):
        self.rx = re.compile(pattern)


# tensor pipes, % of peak: cycles active per pipe / sub-pipe, instructions issued, and math-op paths
TENSOR_PCT = Max(r"^(sm|smsp)__(pipe_tensor\w*_cycles_active|inst_executed_pipe_tensor\w*|ops_path_tensor\w*)"
                 r"\.(avg|sum)\.pct_of_peak_sustained_(elapsed|active)$")
# tensor math ops executed (ncu's roofline counts them as FLOPs), per source/destination type
TENSOR_OPS = Sum(r"^(sm|smsp)__ops_path_tensor_\w+\.sum$")
TENSOR_INST = Max(r"^(sm|smsp)__inst_executed_pipe_tensor\w*\.sum$")

RAW: dict[str, list] = {
    "duration_ns": ["gpu__time_duration.sum", "gpu__time_duration.avg", "gpu__time_duration"],
    "sm_pct": ["sm__throughput.avg.pct_of_peak_sustained_elapsed"],
    "mem_pct": ["gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
                "gpu__memory_throughput.avg.pct_of_peak_sustained_elapsed"],
    "dram_pct": ["gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
                 "dram__throughput.avg.pct_of_peak_sustained_elapsed"],
    "dram_bytes": ["dram__bytes.sum", ("dram__bytes_read.sum", "dram__bytes_write.sum")],
    "dram_bps": ["dram__bytes.sum.per_second",
                 ("dram__bytes_read.sum.per_second", "dram__bytes_write.sum.per_second")],
    "l1_hit_pct": ["l1tex__t_sector_hit_rate.pct"],
    "l2_hit_pct": ["lts__t_sector_hit_rate.pct"],
    "occupancy_pct": ["sm__warps_active.avg.pct_of_peak_sustained_active"],
    "theoretical_occupancy_pct": ["sm__maximum_warps_per_active_cycle_pct"],
    "registers": ["launch__registers_per_thread"],
    "waves": ["launch__waves_per_multiprocessor"],
    "grid_blocks": ["launch__grid_size"],
    "tensor_pct": [TENSOR_PCT],
    "tensor_flops": [TENSOR_OPS],
    "tensor_inst": [TENSOR_INST],
    "fma_pct": ["sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed",
                "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"],
    "fp64_pct": ["sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_elapsed"],
    "sm_count": ["device__attribute_multiprocessor_count", "launch__sm_count"],
    "sm_hz": ["gpc__cycles_elapsed.avg.per_second", "sm__cycles_elapsed.avg.per_second"],
    "sm_clock_attr_hz": ["device__attribute_clock_rate"],          # kHz in the CSV (KHZ_NAMES)
    "mem_clock_attr_hz": ["device__attribute_memory_clock_rate"],
    "bus_width_bits": ["device__attribute_global_memory_bus_width", "device__attribute_fb_bus_width"],
}
for _p, _m in (("fp32", "f"), ("fp16", "h"), ("fp64", "d")):
    RAW[f"{_p}_adds"] = [f"sm__sass_thread_inst_executed_op_{_m}add_pred_on.sum"]
    RAW[f"{_p}_muls"] = [f"sm__sass_thread_inst_executed_op_{_m}mul_pred_on.sum"]
    RAW[f"{_p}_fmas"] = [f"sm__sass_thread_inst_executed_op_{_m}fma_pred_on.sum"]
# warp stall reasons, one family per launch (the first the capture's names have): (basis, pattern with the reason
# as group 1).  WarpStateStats: warp cycles per issued instruction spent in each state; the same as % of active
# warps; SourceCounters: PC samples per state.  ``*_not_issued`` sample counts are a subset, never summed in.
STALL_FAMILIES = (
    ("warp cycles per issued instruction (WarpStateStats)",
     re.compile(r"^smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$")),
    ("warp cycles per issued instruction (WarpStateStats)",
     re.compile(r"^smsp__average_warp_latency_issue_stalled_(\w+?)(?:\.ratio|\.avg|\.sum)?$")),
    ("% of active warps in the state (WarpStateStats)",
     re.compile(r"^smsp__warp_issue_stalled_(\w+?)_per_warp_active\.pct$")),
    ("PC samples (SourceCounters)", re.compile(r"^smsp__pcsamp_warps_issue_stalled_(\w+?)(?:\.sum)?$")),
)


def stall_spec(names: Iterable[str]) -> tuple[str, dict[str, str]] | None:
    """(basis, {reason: metric name}) of the first stall family the names have, or None."""
    listed = sorted(names)
    for basis, rx in STALL_FAMILIES:
        hits = {}
        for n in listed:
            m = rx.match(n)
            if m and not m.group(1).endswith("_not_issued"):
                hits.setdefault(m.group(1), n)
        if hits:
            return basis, hits
    return None


def stall_values(spec: tuple[str, dict[str, str]], get: Callable[[str], float | None]) -> dict[str, float]:
    """{reason: value} of one launch (absent and negative values left out)."""
    out = {}
    for reason, name in spec[1].items():
        v = get(name)
        if v is not None and v >= 0:
            out[reason] = v
    return out


# device attributes ncu prints without a unit, in kHz (scaled to Hz unless a frequency unit is printed)
KHZ_NAMES = {"device__attribute_clock_rate", "device__attribute_memory_clock_rate"}

# details page: (metric name, unit class) -> canonical metric (several names: ncu versions)
DETAILS = {
    ("Duration", "time"): "duration_ns", ("Compute (SM) Throughput", "pct"): "sm_pct",
    ("Compute (SM) [%]", "pct"): "sm_pct", ("SM [%]", "pct"): "sm_pct",
    ("Memory Throughput", "pct"): "mem_pct", ("Memory [%]", "pct"): "mem_pct",
    ("DRAM Throughput", "pct"): "dram_pct", ("Memory Throughput", "rate"): "dram_bps",
    ("L1/TEX Hit Rate", "pct"): "l1_hit_pct", ("L2 Hit Rate", "pct"): "l2_hit_pct",
    ("Achieved Occupancy", "pct"): "occupancy_pct", ("Theoretical Occupancy", "pct"): "theoretical_occupancy_pct",
    ("Registers Per Thread", "count"): "registers", ("Waves Per SM", "count"): "waves",
    ("Grid Size", "count"): "grid_blocks", ("# SMs", "count"): "sm_count", ("SM Frequency", "freq"): "sm_hz",
    ("DRAM Frequency", "freq"): "dram_hz",
}
# what to add to the capture for a missing metric (the warning names it)
WHERE = {"dram_bytes": "MemoryWorkloadAnalysis", "l1_hit_pct": "MemoryWorkloadAnalysis",
         "l2_hit_pct": "MemoryWorkloadAnalysis", "fp32_fmas": "SpeedOfLight_RooflineChart",
         "tensor_pct": "ComputeWorkloadAnalysis (raw page)", "duration_ns": "SpeedOfLight",
         "sm_pct": "SpeedOfLight", "dram_pct": "SpeedOfLight", "occupancy_pct": "Occupancy"}

_TIME = {"ps": 1e-3, "psecond": 1e-3, "ns": 1.0, "nsecond": 1.0, "nsec": 1.0, "us": 1e3, "usecond": 1e3, "usec": 1e3,
         "ms": 1e6, "msecond": 1e6, "msec": 1e6, "s": 1e9, "second": 1e9, "sec": 1e9}
_BYTES = {"byte": 1.0, "bytes": 1.0, "b": 1.0, "kbyte": 1e3, "kb": 1e3, "mbyte": 1e6, "mb": 1e6, "gbyte": 1e9,
          "gb": 1e9, "tbyte": 1e12, "tb": 1e12, "pbyte": 1e15, "kibyte": 1024.0, "kib": 1024.0,
          "mibyte": 1024.0 ** 2, "mib": 1024.0 ** 2, "gibyte": 1024.0 ** 3, "gib": 1024.0 ** 3}
_HZ = {"hz": 1.0, "khz": 1e3, "mhz": 1e6, "ghz": 1e9}
_CYCLES = {"cycle": 1.0, "kcycle": 1e3, "mcycle": 1e6, "gcycle": 1e9}


def unit_scale(unit: str) -> tuple[str, float]:
    """(class, factor to base units): time -> ns, bytes -> B, rate -> B/s, freq -> Hz, pct, count."""
    u = unit.strip().lower()
    if u in ("%", "percent", "pct"):
        return "pct", 1.0
    if u in _TIME:
        return "time", _TIME[u]
    if u in _BYTES:
        return "bytes", _BYTES[u]
    if u in _HZ:
        return "freq", _HZ[u]
    if "/" in u:
        num, _, den = u.partition("/")
        den = {"s": "second", "sec": "second"}.get(den, den)
        if num in _BYTES and den in _TIME:
            return "rate", _BYTES[num] * 1e9 / _TIME[den]
        if num in _CYCLES and den in _TIME:
            return "freq", _CYCLES[num] * 1e9 / _TIME[den]
        if num in _BYTES:                          # Kbyte/block: bytes per something
            return "bytes", _BYTES[num]
    return "count", 1.0


def number(text: str) -> float | None:
    """ncu's numbers: '10,964', '1,583.08', '5.54'; 'n/a' and '' -> None."""
    t = text.strip().replace(",", "")
    if not t:
        return None
    try:
        v = float(t)
    except ValueError:
        return None
    return v if v == v and abs(v) != float("inf") else None


def _stem(n: str) -> str:
    return n.rsplit(".", 1)[0] if n.endswith(".sum") else n


def _matches(p, names: list[str]) -> tuple | None:
    hits = [n for n in names if p.rx.match(n)]
    if not hits:
        return None
    if isinstance(p, Max):
        el = [n for n in hits if not n.endswith("_active")]
        return ("max", tuple(el or hits))
    if any(n.startswith("sm__") for n in hits):
        hits = [n for n in hits if n.startswith("sm__")]
    stems = {_stem(n) for n in hits}
    return ("sum", tuple(n for n in hits if not any(s != _stem(n) and _stem(n).startswith(s) for s in stems)))


def resolve(names: Iterable[str]) -> dict:
    """{canonical metric: spec} for the probes ``names`` satisfy: a name, a tuple of names (sum) or
    ("max"|"sum", names)."""
    have = names if isinstance(names, (set, dict, frozenset)) else set(names)
    listed = sorted(have)
    out = {}
    for key, probes in RAW.items():
        for p in probes:
            if isinstance(p, (Max, Sum)):
                hit = _matches(p, listed)
            elif isinstance(p, tuple):
                hit = p if all(x in have for x in p) else None
            else:
                hit = p if p in have else None
            if hit is not None:
                out[key] = hit
                break
    return out


def value(spec, get: Callable[[str], float | None]) -> float | None:
    """The canonical metric's value in base units from ``get(name)`` (None when a needed part is absent)."""
    if isinstance(spec, str):
        return get(spec)
    if spec[0] in ("max", "sum"):
        vals = [v for v in (get(n) for n in spec[1]) if v is not None]
        return (max(vals) if spec[0] == "max" else sum(vals)) if vals else None
    parts = [get(n) for n in spec]
    return None if any(v is None for v in parts) else sum(parts)
