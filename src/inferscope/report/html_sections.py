"""The report.html sections other than the timeline: headline (verdict, why), breakdown (bar,
legend, table), findings, counters, LLM, warnings / limitations, tables, about.  Each takes the
result dict and returns one ``<section>`` (or "" when it has nothing to show).
"""
from __future__ import annotations

import re

from .html_assets import CATEGORY_LABELS, _cat_colour, _swatch
from .html_text import _dict, _list, _num, attr, clean, fmt_cell, fmt_ms, fmt_pct, text


# ---------------------------------------------------------------------------------------
# sections
# ---------------------------------------------------------------------------------------
def _headline(result: dict) -> str:
    v = _dict(result.get("verdict"))
    gpu = result.get("gpu")
    win = _dict(result.get("window"))
    from ..wording import kernel_capture_only
    capture = kernel_capture_only(result)
    if capture:                    # Nsight Compute alone: kernels measured one at a time, no end-to-end time
        dd = _dict(result.get("kernel_deep_dive"))
        ks = [k for k in _list(dd.get("kernels")) if isinstance(k, dict)]
        parts = [f'<section id="headline"><div class="headline">'
                 f'<div><div class="lbl">kernels profiled (Nsight Compute, no timeline)</div><div class="big" id="kernels-profiled">'
                 f'{len(ks)}</div></div>']
        if ks:
            parts.append(f'<div><div class="lbl">top kernel ({text(fmt_pct(_num(ks[0].get("share_pct"))))} of the profiled time)'
                         f'</div><div class="verdict" id="top-kernel">{text(ks[0].get("short_name"), 200)}: '
                         f'{text(ks[0].get("limiter_text"), 400)}</div></div>')
    else:
        parts = [f'<section id="headline"><div class="headline">'
                 f'<div><div class="lbl">end-to-end time</div><div class="big" id="e2e">{text(fmt_ms(result.get("e2e_ms")))}</div></div>']
    if v:
        conf = _num(v.get("confidence"))
        conf_s = f' <span class="conf">(confidence {conf * 100:.0f}%)</span>' if conf is not None else ""
        parts.append(f'<div><div class="lbl">verdict</div><div class="verdict" id="verdict">'
                     f'{text(v.get("title") or v.get("id") or "")}{conf_s}</div></div>')
    if capture:                    # a synthetic timeline: no idle time or window to state
        pass
    elif isinstance(gpu, dict):
        parts.append(f'<div><div class="lbl">GPU idle</div><div class="verdict" id="gpu-idle">{text(fmt_pct(gpu.get("idle_pct")))}</div></div>'
                     f'<div><div class="lbl">GPU busy</div><div class="verdict">{text(fmt_ms(gpu.get("busy_ms")))}</div></div>')
    else:
        parts.append('<div><div class="lbl">GPU</div><div class="verdict">no GPU activity in trace</div></div>')
    if win and not capture:
        parts.append(f'<div><div class="lbl">window</div><div>{text(win.get("label") or win.get("kind") or "")}</div></div>')
    parts.append("</div>")
    from ..wording import partial_trace
    pt = partial_trace(_dict(result.get("about")).get("collection"))
    if pt:
        parts.append(f'<p class="warn" id="partial-trace"><b>{text(pt["text"], 2000)}</b></p>')
    from .markdown import run_phase_lines
    rpl = run_phase_lines(result) if isinstance(result.get("run_phases"), dict) and win else []
    if rpl:
        parts.append('<ul id="run-phases">' + "".join(f"<li>{text(x, 2000)}</li>" for x in rpl) + "</ul>")
    from .whatif_text import headline_lines
    wl = [] if capture else headline_lines({"findings": [f for f in _list(result.get("findings")) if isinstance(f, dict)],
                                            "what_if": _dict(result.get("what_if"))})
    if wl:
        parts.append(f'<p id="fix-first"><b>{text(wl[0], 1000)}</b></p>' + "".join(f"<p>{text(x, 1000)}</p>" for x in wl[1:]))
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


def _findings(result: dict) -> str:
    fs = [f for f in _list(result.get("findings")) if isinstance(f, dict)]
    if not fs:
        return '<section id="findings"><h2>Findings</h2><p class="muted">No findings.</p></section>'
    order = {"high": 0, "medium": 1, "low": 2, "info": 3}
    out = ['<section id="findings"><h2>Findings</h2>']
    # by predicted saving (analyze/whatif.py), then severity: the order of report.json
    for f in sorted(fs, key=lambda f: (0 if _num(f.get("expected_saving_ms")) else 1, -(_num(f.get("expected_saving_ms")) or 0.0),
                                       order.get(str(f.get("severity")), 4))):
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
        from .whatif_text import saving_text
        st = saving_text(f) if _num(f.get("expected_saving_ms")) is not None else None
        if st:
            out.append(f'<div class="sugg"><b>Predicted saving (estimate):</b> {text(st, 1000)}</div>')
        out.append("</div>")
    out.append("</section>")
    return "".join(out)


def _tables(result: dict, max_rows: int) -> str:
    tables = _dict(result.get("tables"))
    if not tables:
        return ""
    from .shown import shown_tables, table_title
    show = set(shown_tables(result))
    if not show:
        return ""
    out = ['<section id="tables"><h2>Tables</h2>']
    for name, t in tables.items():
        if not isinstance(t, dict) or name not in show:
            continue
        cols = _list(t.get("columns"))
        rows = [r for r in _list(t.get("rows")) if isinstance(r, (list, tuple))]
        out.append(f'<h3 id="table-{attr(re.sub(r"[^A-Za-z0-9_-]", "_", str(name)), 60)}">{text(table_title(name), 200)} '
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
            '</tbody></table><p class="muted">Per-counter min/mean/p95/max, means per step / range and per core: '
            'the counter tables below.</p></section>')


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


def _about(result: dict) -> str:
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
