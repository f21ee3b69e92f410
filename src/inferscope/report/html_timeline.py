"""The report.html timeline: one SVG of step / range marker rows, one activity lane per
CPU thread and GPU stream (the first lane is the breakdown itself), counter lanes, the largest GPU idle
gaps and NVML throttling as overlays, and a time axis.

Large traces are summarised (see ``analyze/timeline_summary.py``): the file size depends on the number
of lanes and bins, not on the number of events.
"""
from __future__ import annotations

import math

import numpy as np

from ..result import Report
from .html_assets import CLASSES, _swatch
from .html_text import _num, attr, clean, fmt_ms, fmt_pct, text


def _gaps(report: Report) -> list[tuple[int, int, str]]:
    """The report's largest device-wide idle gaps (``idle_gaps.largest``) as ns intervals with their host label."""
    out = []
    for g in (report.idle_gaps.largest if report.idle_gaps is not None else [])[:50]:
        # (through a float, as the strip's bounds: epoch-scale ns round to a few hundred ns, the page unchanged)
        s, e = _num(g.start_ns), _num(g.end_ns)
        if s is None or e is None or e <= s:
            continue
        label = f"CPU meanwhile: {g.host}" + (f" ({g.host_kind})" if g.host_kind else "") if g.host else ""
        out.append((int(s), int(e), label))
    return out


def _nice_step(span_ms: float, target: int = 10) -> float:
    raw = span_ms / max(1, target)
    mag = 10 ** math.floor(math.log10(raw)) if raw > 0 else 1
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def _lane_path(h: np.ndarray) -> str:
    """SVG path of one class in one lane: stacked bars, runs of equal bars merged.

    ``h`` is [2, n_bins]: bottom offset and height (percent of lane).  Coordinates are
    bin index (x) and percent (y, 0 = top of lane); the group transform scales them.
    """
    bottom, height = h
    nz = np.flatnonzero(height)
    if len(nz) == 0:
        return ""
    # run-length: a run continues while bins are consecutive and (bottom, height) unchanged
    brk = np.ones(len(nz), dtype=bool)
    brk[1:] = (np.diff(nz) != 1) | (bottom[nz[1:]] != bottom[nz[:-1]]) | (height[nz[1:]] != height[nz[:-1]])
    starts = nz[brk]
    ends = np.append(nz[np.flatnonzero(brk)[1:] - 1], nz[-1]) + 1
    y = 100 - bottom[starts].astype(np.int64) - height[starts].astype(np.int64)
    hh = height[starts].astype(np.int64)
    ln = ends - starts
    return "".join(f"M{a} {b}h{c}v{d}h-{c}z" for a, b, c, d in zip(starts.tolist(), y.tolist(), ln.tolist(), hh.tolist()))


def _fmtv(v: float) -> str:
    """A counter value for an axis / tooltip: 3 significant digits, k/M/G above 1e4."""
    a = abs(v)
    for div, suf in ((1e9, "G"), (1e6, "M"), (1e4, "k")):
        if a >= div * (10 if suf == "k" else 1):
            return f"{v / div:.3g}{suf}"
    return f"{v:.3g}"


def _timeline(report: Report, summ) -> str:
    """The strip of ``summ`` (``result.views.TimelineSummary``, analyze/timeline_summary.py; None without a trace)."""
    if summ is None:
        return '<section id="timeline"><h2>Timeline</h2><p class="muted">No trace available.</p></section>'
    t0, t1 = summ.t0, summ.t1
    span_ms = summ.span_ns / 1e6
    nb = summ.n_bins
    LABEL_W, PLOT_W, LANE_H, GAP = 190, 1180, 22, 4
    MARK_H, AXIS_H, CTR_H = 18, 22, 30
    x0 = LABEL_W

    def xpx(ns) -> float:
        return x0 + PLOT_W * (ns - t0) / summ.span_ns

    steps = [m for m in summ.marks if m.kind == "step"]
    anns = [m for m in summ.marks if m.kind == "annotation"]
    mark_rows = [r for r in (("steps", steps, "#555e6e"), ("ranges", anns, "#8e6c8a")) if r[1]]
    y = AXIS_H
    body = []
    # marker rows (steps, annotations)
    for name, ms, col in mark_rows:
        body.append(f'<text x="{x0 - 8}" y="{y + 13}" font-size="12" text-anchor="end" fill="#333">{text(name)}</text>')
        body.append(f'<rect x="{x0}" y="{y}" width="{PLOT_W}" height="{MARK_H}" fill="#f2f3f6"/>')
        for j, m in enumerate(ms):
            a, b = max(m.start_ns, t0), min(m.end_ns, t1)
            xa, xb = xpx(a), xpx(b)
            w = max(0.5, xb - xa)
            tip = f"{m.label}\n{fmt_ms((m.end_ns - m.start_ns) / 1e6)} at +{(m.start_ns - t0) / 1e6:.3f} ms"
            fill = col if j % 2 == 0 else "#9aa3b5" if name == "steps" else "#b89ab5"
            body.append(f'<rect x="{xa:.1f}" y="{y + 1}" width="{w:.1f}" height="{MARK_H - 2}" fill="{fill}">'
                        f'<title>{attr(tip, 4000)}</title></rect>')
            if w > 60:
                body.append(f'<text x="{xa + 3:.1f}" y="{y + 13}" font-size="11" fill="#fff" pointer-events="none">'
                            f'{text(clean(m.label)[:max(1, int(w / 7))], 200)}</text>')
        y += MARK_H + GAP
    lanes_y0 = y
    # activity lanes
    ncls = len(CLASSES)
    sx = PLOT_W / nb
    used_classes = set()
    for ln in ([summ.partition] if summ.partition is not None else []) + summ.lanes:
        tip = (f"{ln.label}\nbusy {fmt_ms(ln.busy_ms)} ({fmt_pct(ln.busy_pct)} of window)" +
               "".join(f"\n  {dict((k, l) for k, l, _ in CLASSES)[k]}: {fmt_ms(v)}" for k, v in ln.class_ms.items()))
        body.append(f'<text x="{x0 - 8}" y="{y + 15}" font-size="12" text-anchor="end" fill="{"#1f3b66" if ln.kind == "gpu" else "#24502a" if ln.kind == "cpu" else "#000"}">'
                    f'<title>{attr(tip, 4000)}</title>{text(clean(ln.label)[:26] + ("…" if len(clean(ln.label)) > 26 else ""), 40)}'
                    f'</text>')
        body.append(f'<rect x="{x0}" y="{y}" width="{PLOT_W}" height="{LANE_H}" fill="#f7f8fa"><title>{attr(tip, 4000)}</title></rect>')
        cum = np.vstack([np.zeros((1, nb), dtype=np.int64), np.cumsum(ln.heights.astype(np.int64), axis=0)])
        paths = []
        for c in range(ncls):
            if not ln.heights[c].any():
                continue
            used_classes.add(c)
            d = _lane_path(np.vstack([cum[c], ln.heights[c].astype(np.int64)]))
            if d:
                paths.append(f'<path fill="{CLASSES[c][2]}" d="{d}"/>')
        body.append(f'<g transform="translate({x0} {y}) scale({sx:.6f} {LANE_H / 100:.4f})" pointer-events="none">{"".join(paths)}</g>')
        y += LANE_H + GAP
    # counters: one lane each, GPU first; value axis (lane bottom/top values) and per-bin values for the readout
    for ci, cl in enumerate(summ.counters):
        lo, hi = min(0.0, cl.vmin), cl.vmax if cl.vmax > 0 else 1.0
        pts = " ".join(f"{b + 0.5:.1f},{(1 - (v - lo) / (hi - lo)) * 100:.1f}" for b, v in zip(cl.bins.tolist(), cl.values.tolist()))
        unit = f" {cl.unit}" if cl.unit else ""
        tip = (f"{cl.label}: min {_fmtv(cl.vmin)}{unit}, mean {_fmtv(cl.mean)}{unit}, max {_fmtv(cl.vmax)}{unit} "
               f"(per-bin means; axis {_fmtv(lo)}-{_fmtv(hi)}{unit})")
        body.append(f'<text x="{x0 - 8}" y="{y + 14}" font-size="12" text-anchor="end" fill="#7a4b00"><title>{attr(tip, 4000)}</title>'
                    f'{text(clean(cl.label)[:26], 40)}</text>'
                    f'<text x="{x0 - 8}" y="{y + 26}" font-size="10" text-anchor="end" fill="#8a7a5a">{text(clean(cl.unit)[:8], 20)}</text>')
        body.append(f'<rect x="{x0}" y="{y}" width="{PLOT_W}" height="{CTR_H}" fill="#fbf8f2"><title>{attr(tip, 4000)}</title></rect>')
        body.append(f'<g class="ctr" data-n="{nb}" data-l="{attr(clean(cl.label)[:40], 80)}" '
                    f'data-u="{attr(clean(cl.unit)[:8], 20)}" data-b="{",".join(str(int(b)) for b in cl.bins.tolist())}" '
                    f'data-v="{",".join(f"{v:.4g}" for v in cl.values.tolist())}" '
                    f'transform="translate({x0} {y}) scale({sx:.6f} {CTR_H / 100:.4f})" pointer-events="none">'
                    f'<polyline fill="none" stroke="#b8860b" stroke-width="1.5" vector-effect="non-scaling-stroke" points="{pts}"/></g>')
        # value axis: top and bottom of the lane's scale, right of the plot
        body.append(f'<text x="{x0 + PLOT_W + 3}" y="{y + 9}" font-size="9" fill="#8a7a5a">{text(_fmtv(hi))}</text>'
                    f'<text x="{x0 + PLOT_W + 3}" y="{y + CTR_H}" font-size="9" fill="#8a7a5a">{text(_fmtv(lo))}</text>'
                    f'<line x1="{x0}" x2="{x0 + PLOT_W}" y1="{y}" y2="{y}" stroke="#eee3cc" stroke-width="0.5"/>')
        y += CTR_H + GAP
    lanes_y1 = y
    # idle gaps overlay (over activity lanes)
    gaps = _gaps(report)
    for gs, ge, glabel in gaps:
        a, b = max(gs, t0), min(ge, t1)
        if b <= a:
            continue
        xa, xb = xpx(a), xpx(b)
        tip = f"GPU idle gap {fmt_ms((ge - gs) / 1e6)} at +{(gs - t0) / 1e6:.3f} ms" + (f"\n{glabel}" if glabel else "")
        body.append(f'<rect class="idle-gap" x="{xa:.1f}" y="{lanes_y0 - 2}" width="{max(1.0, xb - xa):.1f}" '
                    f'height="{lanes_y1 - lanes_y0}" fill="#e15759" fill-opacity="0.13" stroke="#e15759" stroke-opacity="0.6" '
                    f'stroke-dasharray="3 2"><title>{attr(tip, 4000)}</title></rect>')
    # throttling band: NVML clock-event reasons set (power cap, thermal, HW slowdown ...)
    throttled = False
    for th in (report.counters.throttle if report.counters is not None else []):
        rs = ", ".join(r.reason for r in th.reasons)
        for iv in th.intervals[:200]:
            if len(iv) != 2:
                continue
            a, b = max(iv[0], t0), min(iv[1], t1)
            if b <= a:
                continue
            throttled = True
            tip = f"GPU {th.device} throttled {fmt_ms((iv[1] - iv[0]) / 1e6)} at +{(iv[0] - t0) / 1e6:.3f} ms ({rs})"
            body.append(f'<rect class="throttle" x="{xpx(a):.1f}" y="{lanes_y0 - 2}" width="{max(1.0, xpx(b) - xpx(a)):.1f}" '
                        f'height="{lanes_y1 - lanes_y0}" fill="#f28e2b" fill-opacity="0.12" stroke="#f28e2b" stroke-opacity="0.5">'
                        f'<title>{attr(tip, 4000)}</title></rect>')
    # axis
    step = _nice_step(span_ms)
    ticks = []
    k = 0
    while k * step <= span_ms + 1e-9 and k < 200:
        xt = x0 + PLOT_W * (k * step) / span_ms
        lab = f"{k * step:g} ms"
        ticks.append(f'<line x1="{xt:.1f}" x2="{xt:.1f}" y1="{AXIS_H - 4}" y2="{lanes_y1}" stroke="#dde1e8" stroke-width="1"/>'
                     f'<text x="{xt:.1f}" y="{AXIS_H - 8}" font-size="11" text-anchor="middle" fill="#5b6475">{text(lab)}</text>')
        k += 1
    H = lanes_y1 + 6
    W = LABEL_W + PLOT_W + 60
    legend = "".join(f'<span>{_swatch(CLASSES[c][2])}{text(CLASSES[c][1])}</span>' for c in sorted(used_classes))
    if gaps:
        legend += f'<span>{_swatch("#e15759", 0.3)}largest GPU idle gaps</span>'
    if throttled:
        legend += f'<span>{_swatch("#f28e2b", 0.3)}GPU clocks throttled (NVML clock-event reasons)</span>'
    notes = list(summ.notes)
    if not summ.lanes:
        notes.append("no CPU or GPU activity in the window")
    bin_us = summ.span_ns / nb / 1e3
    notes_html = (f'<p class="muted">Window {text(fmt_ms(span_ms))}, {nb} bins of {bin_us:,.1f} µs; bar height = share of each bin '
                  f'the track was busy, colour = its breakdown category; the first lane is the breakdown itself '
                  f'(each moment once, to the highest-priority category). Hover for details.'
                  + "".join(f" {text(n)}." for n in notes) + "</p>")
    return (f'<section id="timeline"><h2>Timeline: CPU and GPU activity</h2>'
            f'<div class="legend">{legend}</div>'
            f'<svg id="timeline-chart" class="chart" viewBox="0 0 {W} {H}" data-x0="{x0}" data-w="{PLOT_W}" data-ms="{span_ms:.6f}" '
            f'role="img" aria-label="timeline">{"".join(ticks)}{"".join(body)}</svg>'
            f'<div id="tl-readout">&#160;</div>{notes_html}</section>')
