"""The static parts of the HTML pages: the one inline <style> (``CSS``), the one inline <script>
(``JS``), the Content-Security-Policy built from their hashes (``CSP``), and the category colours,
labels and swatches the charts share.

Nothing is loaded from outside the file: no CDN, fonts, images or fetches, enforced by a
Content-Security-Policy meta whose script/style sources are the sha256 hashes of the one
inline <style> and the one inline <script> (no 'unsafe-inline').
"""
from __future__ import annotations

import base64
import hashlib

from ..result.base import CATEGORIES, CATEGORY_LABELS as BREAKDOWN_LABELS

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

# the strip and the breakdown bar share colours
CATEGORY_COLOURS = {
    "gpu_compute": "#4e79a7", "gpu_communication": "#9d7660", "h2d_copy": "#f28e2b", "d2h_copy": "#ff9d9a",
    "other_copy": "#edc948", "sync_wait": "#e15759", "cpu_preprocessing": "#b07aa1", "framework_overhead": "#76b7b2",
    "cpu_compute": "#59a14f", "waiting": "#bab0ac", "other": "#d7d2cc",
}
# the timeline strip's classes (category, label, colour), in the breakdown's priority order: the class index of
# analyze/timeline_summary.py's lanes
CLASSES: list[tuple[str, str, str]] = [(c, BREAKDOWN_LABELS[c], CATEGORY_COLOURS[c]) for c in CATEGORIES]
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
