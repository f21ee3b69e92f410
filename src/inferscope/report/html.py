"""Self-contained HTML report: one file, works offline, charts drawn as inline SVG.

Nothing is loaded from outside the file: no CDN, fonts, images or fetches, enforced by a
Content-Security-Policy meta whose script/style sources are the sha256 hashes of the one
inline <style> and the one inline <script> this module writes (no 'unsafe-inline').

Every string that comes from a trace or from the analysis (kernel, thread, range and file
names, finding text) goes through ``text()``/``attr()``: control characters and bidi
overrides are shown as visible ``<U+XXXX>`` codes, lone surrogates become U+FFFD, long names
are truncated for display with the full name in a ``title`` attribute, and everything is
escaped with ``html.escape(quote=True)``.  No element or attribute is ever built from data.

Large traces are summarised (see ``timeline_summary``): the file size depends on the number
of lanes and bins, not on the number of events.
"""
from __future__ import annotations

import base64
import hashlib
import html
import math
import re
from typing import Any

import numpy as np

from .. import __version__
from ..util.atomic import atomic_write_text
from . import timeline_summary as tls

# ---------------------------------------------------------------------------------------
# escaping
# ---------------------------------------------------------------------------------------
_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e"
                     "\u2060-\u2069\ufeff\ufff9-\ufffb]")
_SURROGATE = re.compile("[\ud800-\udfff]")
DISPLAY_MAX = 160
TITLE_MAX = 20000


def clean(s: Any) -> str:
    """Make a string safe to *show*: visible codes for invisible/bidi chars, no surrogates."""
    if s is None:
        return ""
    if not isinstance(s, str):
        s = str(s)
    s = _SURROGATE.sub("\ufffd", s)
    s = s.replace("\t", " ").replace("\r\n", " ").replace("\n", " ").replace("\r", " ")
    return _UNSAFE.sub(lambda m: f"<U+{ord(m.group(0)):04X}>", s)


def attr(s: Any, limit: int = TITLE_MAX) -> str:
    c = clean(s)
    if len(c) > limit:
        c = c[:limit] + "…"
    return html.escape(c, quote=True)


def text(s: Any, limit: int = DISPLAY_MAX) -> str:
    """Escaped display text; names longer than ``limit`` are cut, full name in a title."""
    c = clean(s)
    if len(c) <= limit:
        return html.escape(c, quote=True)
    return (f'<span class="trunc" title="{attr(c)}">{html.escape(c[:limit], quote=True)}'
            f'… <small>({len(c):,} chars)</small></span>')


# ---------------------------------------------------------------------------------------
# number formatting (shared with tests: the browser test looks for fmt_ms(e2e_ms))
# ---------------------------------------------------------------------------------------
def _num(x) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def fmt_ms(x) -> str:
    v = _num(x)
    if v is None:
        return "n/a"
    if abs(v) >= 100:
        return f"{v:,.1f} ms"
    if abs(v) >= 1:
        return f"{v:,.2f} ms"
    return f"{v:,.3f} ms"


def fmt_pct(x) -> str:
    v = _num(x)
    return "n/a" if v is None else f"{v:.1f}%"


def fmt_cell(v) -> str:
    if isinstance(v, bool) or v is None:
        return text("" if v is None else str(v).lower())
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if not math.isfinite(v):
            return "n/a"
        if v == int(v) and abs(v) < 1e15:
            return f"{int(v):,}" if abs(v) >= 1000 else f"{v:g}"
        return f"{v:,.3f}" if abs(v) < 1e6 else f"{v:,.1f}"
    return text(v)


def _dict(x) -> dict:
    return x if isinstance(x, dict) else {}


def _list(x) -> list:
    return x if isinstance(x, list) else []


# ---------------------------------------------------------------------------------------
# static assets (hashed into the CSP)
# ---------------------------------------------------------------------------------------
CSS = """
:root{--fg:#1d2330;--mut:#5b6475;--bd:#d8dde6;--bg:#f6f7f9;--card:#fff}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;color:var(--fg);background:var(--bg)}
header{background:#1d2330;color:#fff;padding:14px 24px}
header h1{margin:0;font-size:20px}
header .src{color:#c7cedb;font-size:13px;word-break:break-all}
main{max-width:1480px;margin:0 auto;padding:16px 24px 48px}
section{background:var(--card);border:1px solid var(--bd);border-radius:8px;padding:14px 18px;margin:14px 0}
h2{font-size:17px;margin:0 0 10px}
h3{font-size:15px;margin:12px 0 6px}
.headline{display:flex;flex-wrap:wrap;gap:28px;align-items:baseline}
.big{font-size:34px;font-weight:700}
.lbl{color:var(--mut);font-size:12px;text-transform:uppercase;letter-spacing:.04em}
.verdict{font-size:19px;font-weight:600}
.conf{color:var(--mut)}
.chart{width:100%;height:auto;display:block}
.legend{display:flex;flex-wrap:wrap;gap:6px 16px;margin:6px 0 2px;font-size:13px}
.sw{display:inline-block;width:11px;height:11px;border-radius:2px;margin-right:5px;vertical-align:-1px}
table{border-collapse:collapse;width:100%;font-size:13px;margin:4px 0 8px}
th,td{border-bottom:1px solid var(--bd);padding:3px 8px;text-align:left;vertical-align:top}
th{background:#eef1f5;cursor:pointer;user-select:none;white-space:nowrap}
td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.tw{overflow-x:auto}
.finding{border-left:4px solid #999;padding:6px 12px;margin:10px 0;background:#fbfbfc}
.sev{display:inline-block;font-size:11px;font-weight:700;text-transform:uppercase;padding:1px 7px;border-radius:10px;color:#fff;margin-right:8px}
.sev-high{background:#c0392b}.sev-medium{background:#d68910}.sev-low{background:#2e86c1}.sev-info{background:#7f8c8d}
.f-high{border-color:#c0392b}.f-medium{border-color:#d68910}.f-low{border-color:#2e86c1}.f-info{border-color:#7f8c8d}
.sugg{background:#eef7ee;border-radius:4px;padding:5px 9px;margin-top:6px}
.ev{font-size:12px;width:auto}
.muted{color:var(--mut)}
.warn li{color:#8a5300}
.trunc small{color:var(--mut)}
#tl-readout{font-variant-numeric:tabular-nums;color:var(--mut);min-height:1.4em}
svg text{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif}
footer{color:var(--mut);font-size:12px;text-align:center;margin:20px}
""".strip()

# Tiny script: timeline cursor readout and click-to-sort tables.  Reads only numbers from
# data-* attributes written by this module; never evaluates or inserts markup.
JS = """
(function(){
var de=document.documentElement;de.setAttribute('data-js','ok');
if(getComputedStyle(document.body).marginTop==='0px'){de.setAttribute('data-css','ok');}
var svg=document.getElementById('timeline-chart'),out=document.getElementById('tl-readout');
if(svg&&out){svg.addEventListener('mousemove',function(e){
var r=svg.getBoundingClientRect(),vb=svg.viewBox.baseVal,x=(e.clientX-r.left)*vb.width/r.width;
var x0=+svg.dataset.x0,w=+svg.dataset.w,ms=+svg.dataset.ms;
if(x<x0||x>x0+w){out.textContent='\\u00a0';return;}
var t='t = '+((x-x0)/w*ms).toFixed(3)+' ms from window start';
svg.querySelectorAll('g.ctr').forEach(function(g){var n=+g.dataset.n,bi=Math.floor((x-x0)/w*n),bs=g.dataset.b.split(','),vs=g.dataset.v.split(',');
var best=-1,bd=1e9;for(var i=0;i<bs.length;i++){var d=Math.abs(+bs[i]-bi);if(d<bd){bd=d;best=i;}}
if(best>=0&&bd<=Math.max(2,n/50)){t+=' | '+g.dataset.l+' '+(+vs[best]).toPrecision(4)+(g.dataset.u?' '+g.dataset.u:'');}});
out.textContent=t;});}
document.querySelectorAll('table.sortable th').forEach(function(th,i){th.addEventListener('click',function(){
var tb=th.closest('table').tBodies[0],rows=Array.prototype.slice.call(tb.rows),asc=th.dataset.asc!=='1';
th.dataset.asc=asc?'1':'0';
var k=function(tr){var c=tr.cells[th.cellIndex];var t=c?c.textContent:'';var v=parseFloat(t.replace(/,/g,''));return isNaN(v)?t:v;};
rows.sort(function(a,b){var x=k(a),y=k(b);var c=(typeof x==='number'&&typeof y==='number')?x-y:String(x).localeCompare(String(y));return asc?c:-c;});
rows.forEach(function(r){tb.appendChild(r);});});});
})();
""".strip()


def _sha256_b64(s: str) -> str:
    return base64.b64encode(hashlib.sha256(s.encode("utf-8")).digest()).decode("ascii")


CSP = (f"default-src 'none'; style-src '{'sha256-' + _sha256_b64(CSS)}'; "
       f"script-src '{'sha256-' + _sha256_b64(JS)}'; img-src data:; font-src 'none'; "
       f"connect-src 'none'; base-uri 'none'; form-action 'none'")

CATEGORY_COLOURS = tls.CATEGORY_COLOURS   # the strip and the breakdown bar share colours
CATEGORY_LABELS = {
    "gpu_compute": "GPU compute", "gpu_communication": "GPU communication", "h2d_copy": "H2D copy", "d2h_copy": "D2H copy", "other_copy": "other copy",
    "sync_wait": "sync wait", "cpu_preprocessing": "CPU preprocessing", "framework_overhead": "framework overhead",
    "cpu_compute": "CPU compute", "waiting": "waiting", "other": "other",
}
_EXTRA_COLOURS = ["#8cd17d", "#86bcb6", "#f1ce63", "#d37295", "#a0cbe8", "#ffbe7d", "#d4a6c8", "#79706e"]


def _swatch(col: str, opacity: float = 1.0) -> str:
    op = f' fill-opacity="{opacity:g}"' if opacity != 1.0 else ""
    return f'<svg class="sw" viewBox="0 0 10 10" aria-hidden="true"><rect width="10" height="10" fill="{col}"{op}/></svg>'


def _cat_colour(cat: str, i: int) -> str:
    return CATEGORY_COLOURS.get(cat, _EXTRA_COLOURS[i % len(_EXTRA_COLOURS)])


# ---------------------------------------------------------------------------------------
# sections
# ---------------------------------------------------------------------------------------
def _headline(result: dict) -> str:
    v = _dict(result.get("verdict"))
    gpu = result.get("gpu")
    win = _dict(result.get("window"))
    parts = [f'<section id="headline"><div class="headline">'
             f'<div><div class="lbl">end-to-end time</div><div class="big" id="e2e">{text(fmt_ms(result.get("e2e_ms")))}</div></div>']
    if v:
        conf = _num(v.get("confidence"))
        conf_s = f' <span class="conf">(confidence {conf * 100:.0f}%)</span>' if conf is not None else ""
        parts.append(f'<div><div class="lbl">verdict</div><div class="verdict" id="verdict">'
                     f'{text(v.get("title") or v.get("id") or "")}{conf_s}</div></div>')
    if isinstance(gpu, dict):
        parts.append(f'<div><div class="lbl">GPU idle</div><div class="verdict" id="gpu-idle">{text(fmt_pct(gpu.get("idle_pct")))}</div></div>'
                     f'<div><div class="lbl">GPU busy</div><div class="verdict">{text(fmt_ms(gpu.get("busy_ms")))}</div></div>')
    else:
        parts.append('<div><div class="lbl">GPU</div><div class="verdict">no GPU activity in trace</div></div>')
    if win:
        parts.append(f'<div><div class="lbl">window</div><div>{text(win.get("label") or win.get("kind") or "")}</div></div>')
    parts.append("</div>")
    from ..analyze.diagnosis import partial_trace
    pt = partial_trace(_dict(result.get("about")).get("collection"))
    if pt:
        parts.append(f'<p class="warn" id="partial-trace"><b>{text(pt["text"], 2000)}</b></p>')
    from .markdown import run_phase_lines
    rpl = run_phase_lines(result) if isinstance(result.get("run_phases"), dict) and win else []
    if rpl:
        parts.append('<ul id="run-phases">' + "".join(f"<li>{text(x, 2000)}</li>" for x in rpl) + "</ul>")
    if v:
        ev = _list(v.get("evidence"))
        basis = v.get("confidence_basis")
        if ev or basis:
            parts.append("<h3>Why</h3><ul>" + "".join(f"<li>{text(e, 2000)}</li>" for e in ev) + "</ul>")
            if basis:
                parts.append(f'<p class="muted">Confidence basis: {text(basis, 2000)}</p>')
    parts.append("</section>")
    return "".join(parts)


def _breakdown(result: dict) -> str:
    bd = [b for b in _list(result.get("breakdown")) if isinstance(b, dict)]
    if not bd:
        return '<section id="breakdown"><h2>Where the time goes</h2><p class="muted">No breakdown in this result.</p></section>'
    total_pct = sum(max(0.0, _num(b.get("pct")) or 0.0) for b in bd) or 100.0
    W, H, x0 = 1000.0, 46.0, 0.0
    rects, legend, rows = [], [], []
    for i, b in enumerate(bd):
        cat = str(b.get("category", ""))
        label = CATEGORY_LABELS.get(cat, cat)
        pct = max(0.0, _num(b.get("pct")) or 0.0)
        w = W * pct / total_pct
        col = _cat_colour(cat, i)
        ms_s, pct_s = fmt_ms(b.get("ms")), fmt_pct(b.get("pct"))
        parts = [p for p in _list(b.get("parts")) if isinstance(p, dict)]
        tip = f"{label}: {ms_s} ({pct_s})" + "".join(
            f"\n  {clean(p.get('name'))[:120]}: {fmt_ms(p.get('ms'))} ({fmt_pct(p.get('pct'))})" for p in parts[:12])
        if w > 0:
            rects.append(f'<rect x="{x0:.2f}" y="0" width="{w:.2f}" height="{H:.0f}" fill="{col}">'
                         f'<title>{attr(tip)}</title></rect>')
            lab = f"{label} {pct_s}" if w > 8.2 * (len(label) + len(pct_s) + 1) + 12 else pct_s if w > 8.2 * len(pct_s) + 12 else ""
            if lab:
                rects.append(f'<text x="{x0 + 6:.2f}" y="28" font-size="14" fill="#fff" pointer-events="none">{text(lab)}</text>')
        x0 += w
        legend.append(f'<span>{_swatch(col)}{text(label)}: <b>{text(ms_s)}</b> ({text(pct_s)})</span>')
        parts_s = "; ".join(f"{clean(p.get('name'))}: {fmt_ms(p.get('ms'))}" for p in parts[:8])
        if len(parts) > 8:
            parts_s += f"; … {len(parts) - 8} more"
        rows.append(f'<tr><td>{_swatch(col)}{text(label)}</td><td class="n">{text(ms_s)}</td>'
                    f'<td class="n">{text(pct_s)}</td><td>{text(parts_s, 600)}</td></tr>')
    legend_html = "".join(legend)
    rows_html = "".join(rows)
    return (f'<section id="breakdown"><h2>Where the time goes</h2>'
            f'<svg id="breakdown-chart" class="chart" viewBox="0 0 {W:.0f} {H:.0f}" role="img" aria-label="time breakdown">'
            f'{"".join(rects)}</svg><div class="legend">{legend_html}</div>'
            f'<table class="sortable"><thead><tr><th>category</th><th>ms</th><th>%</th><th>top parts</th></tr></thead>'
            f'<tbody>{rows_html}</tbody></table></section>')


def _gaps_from_result(result: dict, t0: int) -> list[tuple[int, int, str]]:
    """Largest idle gaps as absolute ns intervals; tolerant of several shapes."""
    ig = result.get("idle_gaps")
    items = []
    if isinstance(ig, dict):
        items = _list(ig.get("largest")) or _list(ig.get("gaps"))
    elif isinstance(ig, list):
        items = ig
    out = []
    for g in items[:50]:
        if isinstance(g, dict):
            s = _num(g.get("start_ns"))
            e = _num(g.get("end_ns"))
            if s is None and _num(g.get("start_ms")) is not None:
                s = t0 + _num(g.get("start_ms")) * 1e6
                d = _num(g.get("ms")) or _num(g.get("dur_ms")) or _num(g.get("duration_ms"))
                e = _num(g.get("end_ms"))
                e = t0 + e * 1e6 if e is not None else (s + d * 1e6 if d is not None else None)
            if s is None or e is None or e <= s:
                continue
            label = g.get("label") or g.get("cause") or ""
            if not label and g.get("host"):
                label = f"CPU meanwhile: {g.get('host')}" + (f" ({g.get('host_kind')})" if g.get("host_kind") else "")
            out.append((int(s), int(e), str(label)))
        elif isinstance(g, (list, tuple)) and len(g) >= 2 and _num(g[0]) is not None and _num(g[1]) is not None:
            out.append((int(g[0]), int(g[1]), ""))
    return out


def _phases_from_result(result: dict) -> list[tuple[int, int, str]]:
    ph = result.get("phases")
    items = _list(_dict(ph).get("ranges")) or _list(_dict(ph).get("items")) if isinstance(ph, dict) else _list(ph)
    out = []
    for p in items[:200]:
        if isinstance(p, dict):
            s, e = _num(p.get("start_ns")), _num(p.get("end_ns"))
            if s is not None and e is not None and e > s:
                out.append((int(s), int(e), str(p.get("name") or p.get("phase") or "")))
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


def _timeline(result: dict, trace, n_bins: int) -> str:
    win = _dict(result.get("window"))
    t0, t1 = _num(win.get("start_ns")), _num(win.get("end_ns"))
    if trace is None:
        return '<section id="timeline"><h2>Timeline</h2><p class="muted">No trace available.</p></section>'
    summ = tls.summarise(trace, None if t0 is None else int(t0), None if t1 is None else int(t1), n_bins=n_bins)
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
    phases = _phases_from_result(result)
    mark_rows = [("steps", steps, "#555e6e"), ("ranges", anns, "#8e6c8a")]
    if phases:
        mark_rows.append(("phases", [tls.Mark(l, "phase", s, e) for s, e, l in phases], "#5a7d3a"))
    mark_rows = [r for r in mark_rows if r[1]]
    y = AXIS_H
    body = []
    # marker rows (steps, annotations, phases)
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
    ncls = len(tls.CLASSES)
    sx = PLOT_W / nb
    used_classes = set()
    for ln in ([summ.partition] if summ.partition is not None else []) + summ.lanes:
        tip = (f"{ln.label}\nbusy {fmt_ms(ln.busy_ms)} ({fmt_pct(ln.busy_pct)} of window)" +
               "".join(f"\n  {dict((k, l) for k, l, _ in tls.CLASSES)[k]}: {fmt_ms(v)}" for k, v in ln.class_ms.items()))
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
                paths.append(f'<path fill="{tls.CLASSES[c][2]}" d="{d}"/>')
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
    gaps = _gaps_from_result(result, t0)
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
    for th in _list(_dict(result.get("counters")).get("throttle")):
        if not isinstance(th, dict):
            continue
        rs = ", ".join(str(r.get("reason")) for r in _list(th.get("reasons")) if isinstance(r, dict))
        for iv in _list(th.get("intervals"))[:200]:
            if not (isinstance(iv, list) and len(iv) == 2 and all(isinstance(v, (int, float)) for v in iv)):
                continue
            a, b = max(iv[0], t0), min(iv[1], t1)
            if b <= a:
                continue
            throttled = True
            tip = f"GPU {th.get('device')} throttled {fmt_ms((iv[1] - iv[0]) / 1e6)} at +{(iv[0] - t0) / 1e6:.3f} ms ({rs})"
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
    legend = "".join(f'<span>{_swatch(tls.CLASSES[c][2])}{text(tls.CLASSES[c][1])}</span>' for c in sorted(used_classes))
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


def _findings(result: dict) -> str:
    fs = [f for f in _list(result.get("findings")) if isinstance(f, dict)]
    if not fs:
        return '<section id="findings"><h2>Findings</h2><p class="muted">No findings.</p></section>'
    order = {"high": 0, "medium": 1, "low": 2, "info": 3}
    out = ['<section id="findings"><h2>Findings</h2>']
    for f in sorted(fs, key=lambda f: order.get(str(f.get("severity")), 4)):
        sev = str(f.get("severity") or "info")
        sev_cls = sev if sev in order else "info"
        out.append(f'<div class="finding f-{sev_cls}"><div><span class="sev sev-{sev_cls}">{text(sev, 20)}</span>'
                   f'<b>{text(f.get("title") or f.get("id") or "", 500)}</b> <span class="muted">{text(f.get("id") or "", 80)}</span></div>')
        et = _list(f.get("evidence_text"))
        if et:
            out.append("<ul>" + "".join(f"<li>{text(e, 2000)}</li>" for e in et[:30]) + "</ul>")
        ev = _dict(f.get("evidence"))
        if ev:
            out.append('<table class="ev"><tbody>' + "".join(
                f'<tr><td>{text(k, 80)}</td><td class="n">{fmt_cell(v) if not isinstance(v, (dict, list)) else text(str(v), 300)}</td></tr>'
                for k, v in list(ev.items())[:30]) + "</tbody></table>")
        if f.get("suggestion"):
            out.append(f'<div class="sugg"><b>Suggestion:</b> {text(f.get("suggestion"), 4000)}</div>')
        out.append("</div>")
    out.append("</section>")
    return "".join(out)


def _tables(result: dict, max_rows: int) -> str:
    tables = _dict(result.get("tables"))
    if not tables:
        return ""
    from .shown import shown_tables
    show = set(shown_tables(result))
    if not show:
        return ""
    out = ['<section id="tables"><h2>Tables</h2>']
    for name, t in tables.items():
        if not isinstance(t, dict) or name not in show:
            continue
        cols = _list(t.get("columns"))
        rows = [r for r in _list(t.get("rows")) if isinstance(r, (list, tuple))]
        out.append(f'<h3 id="table-{attr(re.sub(r"[^A-Za-z0-9_-]", "_", str(name)), 60)}">{text(name, 80)} '
                   f'<span class="muted">({len(rows):,} rows{", top " + str(max_rows) + " shown" if len(rows) > max_rows else ""})</span></h3>')
        if not rows:
            out.append('<p class="muted">empty</p>')
            continue
        head = "".join(f"<th>{text(c, 60)}</th>" for c in cols)
        body = []
        for r in rows[:max_rows]:
            cells = []
            for v in list(r)[:max(len(cols), 1) if cols else 50]:
                num = isinstance(v, (int, float)) and not isinstance(v, bool)
                cells.append(f'<td class="n">{fmt_cell(v)}</td>' if num else f"<td>{fmt_cell(v)}</td>")
            body.append("<tr>" + "".join(cells) + "</tr>")
        out.append(f'<div class="tw"><table class="sortable"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>')
    out.append("</section>")
    return "".join(out)


def _counters(result: dict) -> str:
    """Counter facts (GPU memory headroom, clock-event reasons, RSS, rates, NUMA); per-counter tables below."""
    c = _dict(result.get("counters"))
    if not c:
        return ""
    rows = []

    def gib(v):
        return f"{v / 2**30:,.2f} GiB" if isinstance(v, (int, float)) else "n/a"
    for g in _list(c.get("gpu_memory")):
        if isinstance(g, dict):
            pct = g.get("peak_pct")
            rows.append((f"GPU {g.get('device')} memory peak", f"{gib(g.get('peak_bytes'))} of {gib(g.get('total_bytes'))}"
                         + (f" ({pct:.1f}%), headroom {gib(g.get('headroom_bytes'))}" if isinstance(pct, (int, float)) else "")))
    for t in _list(c.get("throttle")):
        if isinstance(t, dict) and t.get("samples"):
            rs = ", ".join(f"{r.get('reason')} {r.get('window_pct', 0):.1f}%" for r in _list(t.get("reasons")) if isinstance(r, dict))
            rows.append((f"GPU {t.get('device')} clocks throttled", f"{t.get('affected_pct', 0):.1f}% of the window" + (f" ({rs})" if rs else "")))
    if isinstance(c.get("rss_peak_bytes"), (int, float)):
        rows.append(("process RSS peak", gib(c["rss_peak_bytes"])))
    for k, lab in (("page_faults_per_s", "page faults / s"), ("ctx_switches_per_s", "context switches / s"),
                   ("invol_ctx_switches_per_s", "involuntary context switches / s"),
                   ("sys_cpu_pct", "kernel-mode CPU, % of one core"), ("main_runq_pct", "main thread waiting for a CPU, % of time")):
        if isinstance(c.get(k), (int, float)):
            rows.append((lab, f"{c[k]:,.1f}"))
    pc = _dict(c.get("process_cores"))
    if pc:
        rows.append(("CPU cores of the process", f"{pc.get('cores')} ({pc.get('basis')}): mean {pc.get('mean_util_pct', 0):.1f}%, "
                                                f"busiest {pc.get('max_core_mean_util_pct', 0):.1f}%"))
    nm = _dict(c.get("numa"))
    if nm:
        gn = ", ".join(f"{g.get('pci_bus_id')} node {g.get('numa_node')}" for g in _list(nm.get("gpu_numa_nodes")) if isinstance(g, dict))
        rows.append(("NUMA", f"{nm.get('numa_nodes')} node(s); process on {nm.get('process_numa_nodes')} ({nm.get('process_cpus')} CPUs)"
                             + (f"; GPU {gn}; local {nm.get('gpu_local')}" if gn else "")))
    if not rows:
        return ""
    return ('<section id="counters"><h2>Counters</h2><table class="ev"><tbody>' +
            "".join(f"<tr><td>{text(k, 80)}</td><td>{text(v, 400)}</td></tr>" for k, v in rows) +
            '</tbody></table><p class="muted">Per-counter min/mean/p95/max: table counters; per step/range: '
            'counters_by_range; per core: counters_cores.</p></section>')


def _llm(result: dict) -> str:
    from .llm_text import LATENCY_COLS, STAGE_COLS, efficiency_lines, llm_lines
    ll, lat, stg, mdl = llm_lines(result)
    el = efficiency_lines(result)
    if not (ll or mdl or el):
        return ""

    def tbl(cols, rows):
        head = "".join(f"<th>{text(c, 60)}</th>" for c in cols)
        body = "".join("<tr>" + "".join(f"<td>{fmt_cell(v)}</td>" for v in r) + "</tr>" for r in rows)
        return f'<div class="tw"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'
    out = ['<section id="llm"><h2>LLM: requests, TTFT, TPOT, efficiency</h2>']
    out += [f"<p>{text(x, 2000)}</p>" for x in ll]
    if lat:
        out.append(tbl(LATENCY_COLS, lat))
    if stg:
        out.append(tbl(STAGE_COLS, stg))
    out += [f"<p>{text(x, 2000)}</p>" for x in mdl + el]
    out.append("</section>")
    return "".join(out)


def _notes(result: dict) -> str:
    out = []
    w = _list(result.get("warnings"))
    if w:
        out.append('<section id="warnings" class="warn"><h2>Warnings</h2><ul>' +
                   "".join(f"<li>{text(x, 2000)}</li>" for x in w[:100]) + "</ul></section>")
    lim = _list(result.get("limitations"))
    if lim:
        out.append('<section id="limitations"><h2>Limitations</h2><ul>' +
                   "".join(f"<li>{text(x, 2000)}</li>" for x in lim[:100]) + "</ul></section>")
    return "".join(out)


def _about(result: dict, trace) -> str:
    src = _dict(result.get("source"))
    about = _dict(result.get("about"))
    rows = []
    for k, v in (("format", src.get("format")), ("file", src.get("file")), ("events", src.get("events"))):
        if v not in (None, ""):
            rows.append((k, v))
    for d in _list(src.get("devices"))[:8]:
        if isinstance(d, dict):
            rows.append((f"device {d.get('id', '')}", d.get("name", "")))
    for k, v in about.items():
        if isinstance(v, (int, float, str)) and not isinstance(v, bool):
            rows.append((k, v))
    tv = _dict(src.get("tool_versions"))
    for k, v in list(tv.items())[:10]:
        rows.append((f"version: {k}", v))
    if not rows:
        return ""
    return ('<section id="about"><h2>About this analysis</h2><table class="ev"><tbody>' +
            "".join(f'<tr><td>{text(k, 80)}</td><td>{fmt_cell(v)}</td></tr>' for k, v in rows) + "</tbody></table></section>")


def build_html(result: dict, trace=None, n_bins: int = 1000, max_rows: int = 25) -> str:
    result = result if isinstance(result, dict) else {}
    src = _dict(result.get("source"))
    tool = _dict(result.get("tool"))
    live = src.get("format") == "inferscope" and not src.get("file")
    title = f"InferScope report: {clean(src.get('file') or ('live run' if live else 'trace'))}"
    sub = " · ".join(clean(x) for x in (src.get("format"), src.get("file") or ("live run" if live else None)) if x)
    from .roofline_svg import roofline_section
    body = "".join([
        _headline(result),
        _breakdown(result),
        _timeline(result, trace, n_bins),
        _findings(result),
        _counters(result),
        _llm(result),
        roofline_section(result),
        _notes(result),
        _tables(result, max_rows),
        _about(result, trace),
    ])
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{html.escape(CSP, quote=True)}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            '<meta name="referrer" content="no-referrer">'
            f"<title>{text(title, 200)}</title><style>{CSS}</style></head><body>"
            f'<header><h1>InferScope report</h1><div class="src">{text(sub, 300)}</div></header>'
            f"<main>{body}</main>"
            f'<footer>Generated by {text(tool.get("name") or "inferscope")} {text(tool.get("version") or __version__, 40)} '
            f'· self-contained file, no network access</footer>'
            f"<script>{JS}</script></body></html>\n")


def render(result: dict, trace, path) -> None:
    atomic_write_text(path, build_html(result, trace))
