"""Roofline chart of the kernels Nsight Compute profiled (``kernel_deep_dive``), as inline SVG.

Same rules as ``html.py``: nothing external, no script, every name through ``attr()`` into a
``<title>`` element (escaped, control characters made visible).  Only measured positions are drawn:

* a point (log-log: FLOP/byte vs TFLOP/s) for each kernel with FLOP counters (SASS, or tensor-pipe ops) and DRAM bytes;
  its area is proportional to the kernel's share of GPU time; roofs from the section's peaks (DRAM
  bandwidth, FP32, and the datasheet tensor peak dashed);
* a bar of achieved DRAM GB/s against the DRAM roof for each kernel with bytes but no FLOP counters
  (the default ncu sections); bytes derived from DRAM % x peak are said in the title;
* a one-line note for what cannot be placed.  No point is ever invented.
"""
from __future__ import annotations

import math

from ..result import DeepDiveDevice, DeepDiveKernel, Report
from .html_text import attr, text

W, H, ML, MR, MT, MB = 760, 420, 70, 20, 16, 46
PT, BAR, ROOF = "#2e86c1", "#d68910", "#555"


def placeable(k: DeepDiveKernel) -> str | None:
    """'point', 'bar' or None for one deep-dive kernel."""
    tf = sum(k.achieved_tflops.values())
    ai = k.intensity_flop_per_byte
    if tf > 0 and ai is not None and ai > 0:
        return "point"
    if (k.dram_gbps or 0) > 0:
        return "bar"
    return None


def _tick(v: float) -> str:
    for d, p in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if v >= d:
            return f"{v / d:g}{p}"
    return f"{v:g}"


def _radius(share: float) -> float:
    return max(2.5, 22.0 * math.sqrt(max(0.0, min(share, 100.0)) / 100.0))


def _points(ks: list[DeepDiveKernel], dev: DeepDiveDevice) -> str:
    xs = [k.intensity_flop_per_byte for k in ks]
    ys = [sum(k.achieved_tflops.values()) for k in ks]
    bw, fp32, tc = dev.peak_dram_gbps, dev.peak_fp32_tflops, dev.peak_tensor_tflops
    roofs = [r for r in (fp32, tc) if r]
    ridges = [r * 1e3 / bw for r in roofs] if bw else []
    x0 = 10 ** math.floor(math.log10(min(xs + ridges) / 4))
    x1 = 10 ** math.ceil(math.log10(max(xs + ridges) * 4))
    y0 = 10 ** math.floor(math.log10(min(ys) / 4))
    y1 = 10 ** math.ceil(math.log10(max(ys + roofs) * 2))
    pw, ph = W - ML - MR, H - MT - MB
    X = lambda v: ML + pw * (math.log10(v) - math.log10(x0)) / (math.log10(x1) - math.log10(x0))
    Y = lambda v: MT + ph * (1 - (math.log10(v) - math.log10(y0)) / (math.log10(y1) - math.log10(y0)))
    out = [f'<rect x="{ML}" y="{MT}" width="{pw}" height="{ph}" fill="none" stroke="#ccc"/>']
    e = math.log10(x0)
    while 10 ** e <= x1 * 1.001:
        x = X(10 ** e)
        out.append(f'<line x1="{x:.1f}" y1="{MT}" x2="{x:.1f}" y2="{MT + ph}" stroke="#eee"/>'
                   f'<text x="{x:.1f}" y="{MT + ph + 16}" font-size="11" text-anchor="middle">{_tick(10 ** e)}</text>')
        e += 1
    e = math.log10(y0)
    while 10 ** e <= y1 * 1.001:
        y = Y(10 ** e)
        out.append(f'<line x1="{ML}" y1="{y:.1f}" x2="{ML + pw}" y2="{y:.1f}" stroke="#eee"/>'
                   f'<text x="{ML - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end">{_tick(10 ** e)}</text>')
        e += 1
    out.append(f'<text x="{ML + pw / 2:.0f}" y="{H - 8}" font-size="12" text-anchor="middle">arithmetic intensity, FLOP per DRAM byte (log)</text>'
               f'<text x="14" y="{MT + ph / 2:.0f}" font-size="12" text-anchor="middle" transform="rotate(-90 14 {MT + ph / 2:.0f})">'
               'achieved TFLOP/s (log)</text>')
    for roof, label, dash in ((fp32, "FP32", ""), (tc, "tensor (datasheet)", ' stroke-dasharray="6 4"')):
        if not roof:
            continue
        pts = []
        if bw:
            xr = roof * 1e3 / bw
            xa = max(x0, y0 * 1e3 / bw)
            if xa < xr:
                pts.append((xa, xa * bw / 1e3))
            xc = min(max(xr, x0), x1)
            pts.append((xc, min(roof, xc * bw / 1e3)))
        else:
            pts.append((x0, roof))
        if pts[-1][0] < x1:
            pts.append((x1, roof))
        d = " ".join(f"{X(a):.1f},{Y(b):.1f}" for a, b in pts)
        out.append(f'<polyline class="rf-roof" points="{d}" fill="none" stroke="{ROOF}" stroke-width="1.5"{dash}>'
                   f'<title>{attr(f"{label} roof {roof:g} TFLOP/s" + (f", DRAM {bw:g} GB/s" if bw else ""))}</title></polyline>'
                   f'<text x="{X(x1) - 4:.1f}" y="{Y(roof) - 4:.1f}" font-size="11" text-anchor="end">{attr(label)} {roof:g}</text>')
    for k, x, y in zip(ks, xs, ys):
        tip = (f"{k.name}: {y:.4g} TFLOP/s at {x:.4g} FLOP/B, {k.share_pct:.2f}% of GPU time"
               + (" (DRAM bytes from DRAM % x peak)" if k.dram_bytes_estimated else ""))
        out.append(f'<circle class="rf-mark rf-pt" cx="{X(x):.1f}" cy="{Y(y):.1f}" r="{_radius(k.share_pct):.1f}" '
                   f'fill="{PT}" fill-opacity="0.6" stroke="{PT}"><title>{attr(tip)}</title></circle>')
    return (f'<svg id="roofline-chart" class="chart" viewBox="0 0 {W} {H}" role="img" '
            f'aria-label="roofline of the profiled kernels">{"".join(out)}</svg>')


def _bars(ks: list[DeepDiveKernel], bw: float) -> str:
    row, lab = 20, 260
    pw = W - lab - MR - 60
    hh = MT + row * len(ks) + 30
    out = []
    vmax = max([bw] + [k.dram_gbps for k in ks])
    X = lambda v: lab + pw * v / vmax
    for i, k in enumerate(ks):
        y = MT + i * row
        v = k.dram_gbps
        tip = (f"{k.name}: {v:.4g} GB/s = {100 * v / bw:.2f}% of the {bw:g} GB/s DRAM roof, {k.share_pct:.2f}% of GPU time"
               + (" (bytes from DRAM % x peak x duration)" if k.dram_bytes_estimated else ""))
        out.append(f'<text x="{lab - 6}" y="{y + 14}" font-size="11" text-anchor="end">{attr(k.short_name[:40])}</text>'
                   f'<rect class="rf-mark rf-bar" x="{lab}" y="{y + 3}" width="{max(1.0, X(v) - lab):.1f}" height="{row - 6}" '
                   f'fill="{BAR}"><title>{attr(tip)}</title></rect>'
                   f'<text x="{max(X(v), lab + 1) + 4:.1f}" y="{y + 14}" font-size="11">{100 * v / bw:.1f}%</text>')
    xr = X(bw)
    out.append(f'<line class="rf-roof" x1="{xr:.1f}" y1="{MT}" x2="{xr:.1f}" y2="{MT + row * len(ks)}" stroke="{ROOF}" '
               f'stroke-width="1.5"><title>{attr(f"DRAM roof {bw:g} GB/s")}</title></line>'
               f'<text x="{xr:.1f}" y="{hh - 8}" font-size="11" text-anchor="middle">DRAM roof {bw:g} GB/s</text>')
    return (f'<svg id="roofline-bw-chart" class="chart" viewBox="0 0 {W} {hh}" role="img" '
            f'aria-label="achieved DRAM bandwidth against the DRAM roof">{"".join(out)}</svg>')


def roofline_section(report: Report) -> str:
    dd = report.kernel_deep_dive
    if dd is None or not dd.kernels:
        return ""
    dev = dd.device
    ks = dd.kernels
    pts = [k for k in ks if placeable(k) == "point"]
    bars = [k for k in ks if placeable(k) == "bar"]
    notes = []
    out = ['<section id="kernel-roofline"><h2>Kernel roofline (Nsight Compute)</h2>']
    if pts:
        out.append(_points(pts, dev))
        out.append(f'<p class="muted">{len(pts)} kernel(s) placed from measured FLOP counters and DRAM bytes; '
                   'circle area = share of GPU time; roofs from the deep-dive peaks.</p>')
    if bars and dev.peak_dram_gbps:
        out.append(f'<p>{len(bars)} kernel(s) without FLOP counters in the capture: achieved DRAM bandwidth against the DRAM roof '
                   '(no roofline position without FLOPs).</p>')
        out.append(_bars(bars, float(dev.peak_dram_gbps)))
    elif bars:
        notes.append(f"{len(bars)} kernel(s) with DRAM bandwidth but no known DRAM peak: not drawn")
    rest = len(ks) - len(pts) - len(bars)
    if rest:
        notes.append(f"{rest} kernel(s) with neither FLOP counters nor DRAM bytes: not drawn")
    if not pts:
        notes.append("no kernel has both FLOP counters and DRAM bytes (capture --section SpeedOfLight_RooflineChart "
                     "and MemoryWorkloadAnalysis for roofline points)")
    out += [f'<p class="muted">{text(n, 400)}.</p>' for n in notes]
    lr = dd.launch_range
    if lr is not None and lr.text:
        out.append(f'<p class="muted">{text(lr.text, 1000)}.</p>')
    out.append("</section>")
    return "".join(out)
