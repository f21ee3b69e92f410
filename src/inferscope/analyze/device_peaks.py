"""Device peaks: the thresholds.DEVICE_PEAKS row for a device name, and the peak TFLOP/s and GB/s an analysis
measures MFU/MBU against (--peak-tflops / --peak-gbps, else the device's datasheet row), with their source.
"""
from __future__ import annotations

import re

from .. import thresholds as T
from ..trace.model import Trace

# ------------------------------------------------------------------------------- peaks

def _word(p: str) -> re.Pattern:
    return re.compile(r"(?<![a-z0-9])" + re.escape(p) + r"(?![a-z0-9])")


def device_peak(name: str | None):
    """The DEVICE_PEAKS row for a device name (word-bounded patterns), or None."""
    n = (name or "").lower()
    if not n.strip():
        return None
    for pats, label, tflops, gbps, source in T.DEVICE_PEAKS:
        if all(_word(p).search(n) for p in pats):
            return {"label": label, "tflops": tflops, "gbps": gbps, "source": source}
    return None


def resolve_peaks(trace: Trace, dtype: str | None, peak_tflops: float | None = None, peak_gbps: float | None = None):
    """(peak_tflops, peak_gbps, source, device_name, warnings)."""
    warnings = []
    devs = trace.meta.get("devices") or []
    names = [d.get("name") for d in devs if isinstance(d, dict) and d.get("name")]
    dev = names[0] if names else None
    row = device_peak(dev)
    parts = []
    tf = gb = None
    if peak_tflops is not None:
        tf = float(peak_tflops)
        parts.append("TFLOP/s from --peak-tflops")
    elif row is not None:
        tf = row["tflops"].get(dtype or "", None)
        if tf is None:
            warnings.append(f"peak TFLOP/s unknown: the {row['label']} datasheet gives no {dtype or 'matching'} rate; "
                            "MFU is null (pass --peak-tflops)")
    if peak_gbps is not None:
        gb = float(peak_gbps)
        parts.append("GB/s from --peak-gbps")
    elif row is not None:
        gb = row["gbps"]
    if row is not None and (peak_tflops is None or peak_gbps is None):
        what = [f"{dtype} dense {tf:g} TFLOP/s" if (dtype and tf is not None and peak_tflops is None) else None,
                f"{gb:g} GB/s" if (gb is not None and peak_gbps is None) else None]
        parts.insert(0, f"{row['label']} (" + ", ".join(x for x in what if x) + f"): {row['source']}")
    if row is None and (peak_tflops is None or peak_gbps is None):
        what = f"device {dev!r} is not in the peak table" if dev else "the trace names no device"
        warnings.append(f"peak FLOP/s and memory bandwidth unknown: {what}; MFU/MBU are null "
                        "(pass --peak-tflops / --peak-gbps)")
    src = "; ".join(parts) or None
    return tf, gb, src, dev, warnings
