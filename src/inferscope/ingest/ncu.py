"""Nsight Compute ``ncu --csv`` import (``--page raw`` and ``--page details``, gz or plain).

``read(path)`` returns the capture: one dict per profiled launch (kernel name, grid/block, device,
canonical metrics in base units, ncu's rule results) plus what the capture lacks.  Metric names
differ across ncu versions and sections are optional, so every canonical metric is *probed*: a
list of exact names, then a pattern; what no launch has goes to ``missing`` with one warning
naming the section that would give it.  ``load(path)`` also builds a Trace (the launches back to
back on their streams, as ncu serialises them) so ``inferscope analyze profile.ncu.csv`` runs the
ordinary pipeline; ``meta["ncu"]`` carries the capture to ``analyze/kernel_limits.py``.

Input boundary: the file is inflated/read under a cap, the csv module's field limit stands, rows
are bounded (``MAX_LAUNCHES``); anything malformed is ``InputError`` (one line, exit 2).
"""
from __future__ import annotations

import csv
import gzip
import io
import re
import zlib
from pathlib import Path

from ..errors import InputError
from ._files import NCU_HEADER as _HEADER, read_input

MAX_BYTES = 256 << 20         # decompressed text; a 40-launch --set full raw page is ~0.5 MB
MAX_LAUNCHES = 100_000
MAX_RULES_PER_LAUNCH = 32
MAX_RULE_CHARS = 600

# canonical metric -> raw-page probes: exact names (a tuple = sum of its parts), then a regex
RAW = {
    "duration_ns": ["gpu__time_duration.sum", "gpu__time_duration.avg", "gpu__time_duration"],
    "sm_pct": ["sm__throughput.avg.pct_of_peak_sustained_elapsed"],
    "mem_pct": ["gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
                "gpu__memory_throughput.avg.pct_of_peak_sustained_elapsed"],
    "dram_pct": ["gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
                 "dram__throughput.avg.pct_of_peak_sustained_elapsed"],
    "dram_bytes": ["dram__bytes.sum", ("dram__bytes_read.sum", "dram__bytes_write.sum")],
    "dram_bps": ["dram__bytes.sum.per_second"],
    "l1_hit_pct": ["l1tex__t_sector_hit_rate.pct"],
    "l2_hit_pct": ["lts__t_sector_hit_rate.pct"],
    "occupancy_pct": ["sm__warps_active.avg.pct_of_peak_sustained_active"],
    "theoretical_occupancy_pct": ["sm__maximum_warps_per_active_cycle_pct"],
    "registers": ["launch__registers_per_thread"],
    "waves": ["launch__waves_per_multiprocessor"],
    "grid_blocks": ["launch__grid_size"],
    "tensor_pct": ["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
                   "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
                   "sm__inst_executed_pipe_tensor.avg.pct_of_peak_sustained_active",
                   re.compile(r"^sm__pipe_tensor\w*_cycles_active\.avg\.pct_of_peak_sustained_(elapsed|active)$")],
    "fma_pct": ["sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed",
                "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active"],
    "fp64_pct": ["sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_elapsed"],
    "sm_count": ["device__attribute_multiprocessor_count", "launch__sm_count"],
    "sm_hz": ["gpc__cycles_elapsed.avg.per_second", "sm__cycles_elapsed.avg.per_second"],
    "sm_clock_attr_hz": ["device__attribute_clock_rate"],          # kHz in the CSV (scaled below)
    "mem_clock_attr_hz": ["device__attribute_memory_clock_rate"],
    "bus_width_bits": ["device__attribute_global_memory_bus_width", "device__attribute_fb_bus_width"],
}
for _p, _m in (("fp32", "f"), ("fp16", "h"), ("fp64", "d")):
    RAW[f"{_p}_adds"] = [f"sm__sass_thread_inst_executed_op_{_m}add_pred_on.sum"]
    RAW[f"{_p}_muls"] = [f"sm__sass_thread_inst_executed_op_{_m}mul_pred_on.sum"]
    RAW[f"{_p}_fmas"] = [f"sm__sass_thread_inst_executed_op_{_m}fma_pred_on.sum"]
_KHZ = {"sm_clock_attr_hz", "mem_clock_attr_hz"}

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

_TIME = {"ns": 1.0, "nsecond": 1.0, "nsec": 1.0, "us": 1e3, "usecond": 1e3, "usec": 1e3,
         "ms": 1e6, "msecond": 1e6, "msec": 1e6, "s": 1e9, "second": 1e9, "sec": 1e9}
_BYTES = {"byte": 1.0, "b": 1.0, "kbyte": 1e3, "kb": 1e3, "mbyte": 1e6, "mb": 1e6, "gbyte": 1e9, "gb": 1e9,
          "tbyte": 1e12, "tb": 1e12, "kibyte": 1024.0, "mibyte": 1024.0 ** 2, "gibyte": 1024.0 ** 3}
_HZ = {"hz": 1.0, "khz": 1e3, "mhz": 1e6, "ghz": 1e9}


def unit_scale(unit: str) -> tuple[str, float]:
    """(class, factor to base units): time -> ns, bytes -> B, rate -> B/s, freq -> Hz, pct, count."""
    u = unit.strip().lower()
    if u == "%":
        return "pct", 1.0
    if u in _TIME:
        return "time", _TIME[u]
    if u in _BYTES:
        return "bytes", _BYTES[u]
    if u in _HZ:
        return "freq", _HZ[u]
    if "/" in u:
        num, _, den = u.partition("/")
        den = {"s": "second"}.get(den, den)
        if num in _BYTES and den in _TIME:
            return "rate", _BYTES[num] * 1e9 / _TIME[den]
        if num == "cycle" and den in _TIME:
            return "freq", 1e9 / _TIME[den]
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


def _text(path: Path, max_bytes: int) -> str:
    raw = read_input(path, max_bytes + 1, "an ncu --csv file")
    if raw[:2] == b"\x1f\x8b":
        try:
            d = zlib.decompressobj(16 + zlib.MAX_WBITS)
            raw = d.decompress(raw, max_bytes + 1)
            if not d.eof and len(raw) <= max_bytes:
                with gzip.open(path, "rb") as f:          # compressed beyond the first read: stream it
                    raw = f.read(max_bytes + 1)
        except (OSError, EOFError, zlib.error) as e:
            raise InputError(f"{path}: damaged gzip ({e})") from None
    if len(raw) > max_bytes:
        raise InputError(f"{path}: more than {max_bytes >> 20} MB of ncu CSV (raise --max-decompressed-mb)")
    return raw.decode("utf-8", errors="replace")


def _rows(path: Path, text: str) -> tuple[list[str], list[list[str]]]:
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.strip() and not ln.startswith("==")), None)
    if start is None or not _HEADER.match(lines[start]):
        raise InputError(f"{path}: not an ncu --csv file (no \"ID\",\"Process ID\",... header)")
    try:
        rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    except csv.Error as e:
        raise InputError(f"{path}: malformed ncu CSV ({e})") from None
    header = [h.strip() for h in rows[0]]
    for need in ("ID", "Kernel Name"):
        if need not in header:
            raise InputError(f"{path}: ncu CSV header lacks the {need!r} column")
    return header, rows[1:]


def _launch(header_idx: dict, row: list[str]) -> dict:
    g = lambda k: row[header_idx[k]].strip() if k in header_idx and header_idx[k] < len(row) else ""
    name = g("Kernel Name")
    dev, stream, pid = number(g("Device")), number(g("Stream")), number(g("Process ID"))
    return {"id": int(number(g("ID")) or 0), "name": name, "pid": int(pid) if pid is not None and 0 <= pid < 2 ** 31 else -1, "mangled": name.startswith("_Z"),
            "grid": g("Grid Size") or None, "block": g("Block Size") or None,
            "device": int(dev) if dev is not None and 0 <= dev < 2 ** 15 else 0, "stream": int(stream) if stream is not None and abs(stream) < 2 ** 31 else 0,
            "cc": g("CC") or None, "device_name": None, "metrics": {}, "rules": []}


def _probe(cols: dict, probes: list) -> int | tuple | None:
    for p in probes:
        if isinstance(p, re.Pattern):
            hit = next((i for n, i in cols.items() if p.match(n)), None)
            if hit is not None:
                return hit
        elif isinstance(p, tuple):
            if all(x in cols for x in p):
                return tuple(cols[x] for x in p)
        elif p in cols:
            return cols[p]
    return None


def _raw(path: Path, header: list[str], rows: list[list[str]], warnings: list[str]) -> list[dict]:
    units = rows[0] if rows and not rows[0][0].strip() else [""] * len(header)
    data = rows[1:] if rows and not rows[0][0].strip() else rows
    cols = {n: i for i, n in enumerate(header)}
    where = {key: _probe(cols, probes) for key, probes in RAW.items()}
    scale = [unit_scale(u)[1] if i < len(units) else 1.0 for i, u in enumerate(units)]
    name_col = cols.get("device__attribute_display_name")
    out, bad = [], 0
    for row in data:
        if len(row) != len(header) or number(row[0]) is None:
            bad += 1
            continue
        la = _launch(cols, row)
        m = la["metrics"]
        for key, w in where.items():
            if w is None:
                continue
            parts = [number(row[i]) for i in (w if isinstance(w, tuple) else (w,))]
            if any(v is None for v in parts):
                continue
            idx = w if isinstance(w, tuple) else (w,)
            m[key] = sum(v * scale[i] for v, i in zip(parts, idx)) * (1e3 if key in _KHZ else 1.0)
        if name_col is not None:
            la["device_name"] = row[name_col].strip()[:200] or None
        out.append(la)
        if len(out) >= MAX_LAUNCHES:
            warnings.append(f"ncu: only the first {MAX_LAUNCHES:,} launches read")
            break
    if bad:
        warnings.append(f"ncu: {bad} raw-page row(s) with a wrong field count or ID skipped (truncated file?)")
    return out


def _details(path: Path, header: list[str], rows: list[list[str]], warnings: list[str]) -> list[dict]:
    cols = {n: i for i, n in enumerate(header)}
    ix = {k: cols.get(k, 10 ** 9) for k in ("ID", "Section Name", "Metric Name", "Metric Unit", "Metric Value",
                                          "Rule Name", "Rule Type", "Rule Description", "Estimated Speedup Type",
                                          "Estimated Speedup")}
    g = lambda row, k: row[ix[k]].strip() if ix[k] < len(row) else ""
    by_id: dict[int, dict] = {}
    bad = 0
    for row in rows:
        lid = number(row[0]) if row else None
        if lid is None or len(row) < min(len(header), 15):
            bad += bool(row)
            continue
        la = by_id.get(int(lid))
        if la is None:
            if len(by_id) >= MAX_LAUNCHES:
                warnings.append(f"ncu: only the first {MAX_LAUNCHES:,} launches read")
                break
            la = by_id[int(lid)] = _launch(cols, row)
        rule = g(row, "Rule Name")
        if rule:
            if len(la["rules"]) < MAX_RULES_PER_LAUNCH:
                la["rules"].append({"section": g(row, "Section Name")[:80], "rule": rule[:80], "type": g(row, "Rule Type")[:16],
                                    "text": g(row, "Rule Description")[:MAX_RULE_CHARS],
                                    "speedup_pct": number(g(row, "Estimated Speedup")),
                                    "speedup_type": g(row, "Estimated Speedup Type")[:16] or None})
            continue
        cls, f = unit_scale(g(row, "Metric Unit"))
        key = DETAILS.get((g(row, "Metric Name"), cls))
        v = number(g(row, "Metric Value"))
        if key and v is not None and key not in la["metrics"]:
            la["metrics"][key] = v * f
    if bad:
        warnings.append(f"ncu: {bad} details-page row(s) without a launch ID or with too few fields skipped")
    return list(by_id.values())


def read(path, max_bytes: int | None = None) -> dict:
    """The capture: {layout, launches: [...], missing: [...], warnings: [...], file}."""
    p = Path(path)
    header, rows = _rows(p, _text(p, max_bytes or MAX_BYTES))
    warnings: list[str] = []
    layout = "details" if {"Metric Name", "Metric Value"} <= set(header) else "raw"
    launches = (_details if layout == "details" else _raw)(p, header, rows, warnings)
    if not launches:
        raise InputError(f"{p}: no kernel launches in this ncu CSV")
    for la in launches:
        m = la["metrics"]
        for prec in ("fp32", "fp16", "fp64"):
            parts = [m.pop(f"{prec}_{k}", None) for k in ("adds", "muls", "fmas")]
            if all(v is not None for v in parts):
                m[f"{prec}_flops"] = parts[0] + parts[1] + 2 * parts[2]      # an FMA is two FLOPs
    have = set().union(*(la["metrics"] for la in launches))
    keys = ["duration_ns", "sm_pct", "dram_pct", "occupancy_pct", "dram_bytes", "l1_hit_pct", "l2_hit_pct",
            "fp32_flops", "tensor_pct"]
    missing = [k for k in keys if k not in have]
    if missing:
        hint = sorted({WHERE.get(k if k != "fp32_flops" else "fp32_fmas", "?") for k in missing})
        warnings.append(f"ncu: this capture lacks {', '.join(missing)} (add --section {' / '.join(hint)}, or --set full); "
                        "the deep-dive uses what is there and labels estimates")
    if "duration_ns" not in have:
        raise InputError(f"{p}: ncu CSV without kernel durations (gpu__time_duration / Duration); capture the SpeedOfLight section")
    return {"file": p.name, "layout": layout, "launches": launches, "missing": missing, "warnings": warnings}


def load(path, max_decompressed: int | None = None):
    """A Trace of the launches, back to back per stream in capture order (ncu serialises them)."""
    import numpy as np
    from ..trace.builder import TraceBuilder
    from ..trace.kinds import SpanKind, TrackKind
    cap = read(path, max_decompressed)
    b = TraceBuilder()
    la = cap["launches"]
    dur = np.array([max(0.0, x["metrics"].get("duration_ns") or 0.0) for x in la], dtype=np.float64)
    end = np.cumsum(np.round(dur).astype(np.int64))
    tracks = [b.track(TrackKind.GPU_STREAM, pid=x["pid"], tid=x["stream"], device=x["device"]) for x in la]
    b.add_spans(start_ns=end - np.round(dur).astype(np.int64), end_ns=end, track=np.array(tracks, np.int32),
                kind=int(SpanKind.KERNEL), name=np.array([b.strings.intern(x["name"][:4096]) for x in la], np.int32))
    devs = {}
    for x in la:
        devs.setdefault(x["device"], {"id": x["device"], "name": x["device_name"],
                                      "sm_count": int(x["metrics"]["sm_count"]) if "sm_count" in x["metrics"] else None,
                                      "compute_capability": x["cc"]})
    b.meta.update({"source_format": "ncu", "source_file": cap["file"], "devices": list(devs.values()),
                   "warnings": list(cap["warnings"]) + [
                       "ncu capture: the timeline is synthetic (launches back to back in capture order, with the "
                       "durations ncu measured while serialising kernels); gaps, overlap and host time are not in it"],
                   "ncu": dict(cap, joined=False)})
    return b.finalize()
