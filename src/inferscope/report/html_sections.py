"""The report.html sections other than the timeline: headline (verdict, why), breakdown (bar,
legend, table), findings, counters, LLM, warnings / limitations, tables, about.  Each takes the
typed Report (``result.Report``; an optional section is None when absent) and returns one ``<section>`` (or ""
when it has nothing to show).
"""
from __future__ import annotations

import re

from ..result import Report
from ..wording import partial_trace
from .html_assets import CATEGORY_LABELS, _cat_colour, _swatch
from .html_text import _num, attr, clean, fmt_cell, fmt_ms, fmt_pct, text
from .kernel_text import capture_only
from .llm_text import LATENCY_COLS, STAGE_COLS, efficiency_lines, llm_lines
from .markdown import run_phase_lines, tokenizer_split_text
from .shown import shown_tables, table_title
from .whatif_text import headline_lines, saving_text


# ---------------------------------------------------------------------------------------
# sections
# ---------------------------------------------------------------------------------------
def _headline(report: Report) -> str:
    v = report.verdict
    gpu = report.gpu
    win = report.window
    capture = capture_only(report)
    if capture:                    # Nsight Compute alone: kernels measured one at a time, no end-to-end time
        ks = report.kernel_deep_dive.kernels
        parts = [f'<section id="headline"><div class="headline">'
                 f'<div><div class="lbl">kernels profiled (Nsight Compute, no timeline)</div><div class="big" id="kernels-profiled">'
                 f'{len(ks)}</div></div>']
        if ks:
            parts.append(f'<div><div class="lbl">top kernel ({text(fmt_pct(ks[0].share_pct))} of the profiled time)'
                         f'</div><div class="verdict" id="top-kernel">{text(ks[0].short_name, 200)}: '
                         f'{text(ks[0].limiter_text, 400)}</div></div>')
    else:
        parts = [f'<section id="headline"><div class="headline">'
                 f'<div><div class="lbl">end-to-end time</div><div class="big" id="e2e">{text(fmt_ms(report.e2e_ms))}</div></div>']
    conf = _num(v.confidence)
    conf_s = f' <span class="conf">(confidence {conf * 100:.0f}%)</span>' if conf is not None else ""
    parts.append(f'<div><div class="lbl">verdict</div><div class="verdict" id="verdict">'
                 f'{text(v.title or v.id or "")}{conf_s}</div></div>')
    if capture:                    # a synthetic timeline: no idle time or window to state
        pass
    elif gpu is not None:
        parts.append(f'<div><div class="lbl">GPU idle</div><div class="verdict" id="gpu-idle">{text(fmt_pct(gpu.idle_pct))}</div></div>'
                     f'<div><div class="lbl">GPU busy</div><div class="verdict">{text(fmt_ms(gpu.busy_ms))}</div></div>')
    else:
        parts.append('<div><div class="lbl">GPU</div><div class="verdict">no GPU activity in trace</div></div>')
    if not capture:
        parts.append(f'<div><div class="lbl">window</div><div>{text(win.label or win.kind or "")}</div></div>')
    parts.append("</div>")
    pt = partial_trace(report.about.collection)
    if pt:
        parts.append(f'<p class="warn" id="partial-trace"><b>{text(pt["text"], 2000)}</b></p>')
    rpl = run_phase_lines(report)
    if rpl:
        parts.append('<ul id="run-phases">' + "".join(f"<li>{text(x, 2000)}</li>" for x in rpl) + "</ul>")
    wl = [] if capture else headline_lines(report)
    if wl:
        parts.append(f'<p id="fix-first"><b>{text(wl[0], 1000)}</b></p>' + "".join(f"<p>{text(x, 1000)}</p>" for x in wl[1:]))
    if v.evidence or v.confidence_basis:
        parts.append("<h3>Why</h3><ul>" + "".join(f"<li>{text(e, 2000)}</li>" for e in v.evidence) + "</ul>")
        if v.confidence_basis:
            parts.append(f'<p class="muted">Confidence basis: {text(v.confidence_basis, 2000)}</p>')
    parts.append("</section>")
    return "".join(parts)


def _breakdown(report: Report) -> str:
    bd = report.breakdown
    if not bd:
        return '<section id="breakdown"><h2>Where the time goes</h2><p class="muted">No breakdown in this result.</p></section>'
    total_pct = sum(max(0.0, _num(b.pct) or 0.0) for b in bd) or 100.0
    W, H, x0 = 1000.0, 46.0, 0.0
    rects, legend, rows = [], [], []
    for i, b in enumerate(bd):
        cat = b.category
        label = CATEGORY_LABELS.get(cat, cat)
        pct = max(0.0, _num(b.pct) or 0.0)
        w = W * pct / total_pct
        col = _cat_colour(cat, i)
        ms_s, pct_s = fmt_ms(b.ms), fmt_pct(b.pct)
        parts = b.parts
        tip = f"{label}: {ms_s} ({pct_s})" + "".join(
            f"\n  {clean(p.name)[:120]}: {fmt_ms(p.ms)} ({fmt_pct(p.pct)})" for p in parts[:12])
        if w > 0:
            rects.append(f'<rect x="{x0:.2f}" y="0" width="{w:.2f}" height="{H:.0f}" fill="{col}">'
                         f'<title>{attr(tip)}</title></rect>')
            lab = f"{label} {pct_s}" if w > 8.2 * (len(label) + len(pct_s) + 1) + 12 else pct_s if w > 8.2 * len(pct_s) + 12 else ""
            if lab:
                rects.append(f'<text x="{x0 + 6:.2f}" y="28" font-size="14" fill="#fff" pointer-events="none">{text(lab)}</text>')
        x0 += w
        legend.append(f'<span>{_swatch(col)}{text(label)}: <b>{text(ms_s)}</b> ({text(pct_s)})</span>')
        parts_s = "; ".join(f"{clean(p.name)}: {fmt_ms(p.ms)}" + (f" {tokenizer_split_text(report.tokenizer)}"
                            if p.name == "tokenization" and report.tokenizer is not None else "") for p in parts[:8])
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


def _findings(report: Report) -> str:
    fs = report.findings
    if not fs:
        return '<section id="findings"><h2>Findings</h2><p class="muted">No findings.</p></section>'
    order = {"high": 0, "medium": 1, "low": 2, "info": 3}
    out = ['<section id="findings"><h2>Findings</h2>']
    # by predicted saving (analyze/whatif.py), then severity: the order of report.json
    for f in sorted(fs, key=lambda f: (0 if _num(f.expected_saving_ms) else 1, -(_num(f.expected_saving_ms) or 0.0),
                                       order.get(f.severity, 4))):
        sev = f.severity or "info"
        sev_cls = sev if sev in order else "info"
        out.append(f'<div class="finding f-{sev_cls}"><div><span class="sev sev-{sev_cls}">{text(sev, 20)}</span>'
                   f'<b>{text(f.title or f.id or "", 500)}</b> <span class="muted">{text(f.id or "", 80)}</span></div>')
        if f.evidence_text:
            out.append("<ul>" + "".join(f"<li>{text(e, 2000)}</li>" for e in f.evidence_text[:30]) + "</ul>")
        if f.evidence:
            out.append('<table class="ev"><tbody>' + "".join(
                f'<tr><td>{text(k, 80)}</td><td class="n">{fmt_cell(v) if not isinstance(v, (dict, list)) else text(str(v), 300)}</td></tr>'
                for k, v in list(f.evidence.items())[:30]) + "</tbody></table>")
        if f.suggestion:
            out.append(f'<div class="sugg"><b>Suggestion:</b> {text(f.suggestion, 4000)}</div>')
        st = saving_text(f) if _num(f.expected_saving_ms) is not None else None
        if st:
            out.append(f'<div class="sugg"><b>Predicted saving (estimate):</b> {text(st, 1000)}</div>')
        out.append("</div>")
    out.append("</section>")
    return "".join(out)


def _tables(report: Report, max_rows: int) -> str:
    show = set(shown_tables(report))
    if not show:
        return ""
    out = ['<section id="tables"><h2>Tables</h2>']
    for name, t in report.tables.items():
        if name not in show:
            continue
        cols, rows = t.columns, t.rows
        out.append(f'<h3 id="table-{attr(re.sub(r"[^A-Za-z0-9_-]", "_", name), 60)}">{text(table_title(name), 200)} '
                   f'<span class="muted">({len(rows):,} rows{", top " + str(max_rows) + " shown" if len(rows) > max_rows else ""})</span></h3>')
        head = "".join(f"<th>{text(c, 60)}</th>" for c in cols)
        body = []
        for r in rows[:max_rows]:
            cells = []
            for v in r[:max(len(cols), 1) if cols else 50]:
                num = isinstance(v, (int, float)) and not isinstance(v, bool)
                cells.append(f'<td class="n">{fmt_cell(v)}</td>' if num else f"<td>{fmt_cell(v)}</td>")
            body.append("<tr>" + "".join(cells) + "</tr>")
        out.append(f'<div class="tw"><table class="sortable"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table></div>')
    out.append("</section>")
    return "".join(out)


def _counters(report: Report) -> str:
    """Counter facts (GPU memory headroom, clock-event reasons, RSS, rates, NUMA); per-counter tables below."""
    c = report.counters
    if c is None:
        return ""
    rows = []

    def gib(v):
        return f"{v / 2**30:,.2f} GiB" if isinstance(v, (int, float)) else "n/a"
    for g in c.gpu_memory:
        pct = g.peak_pct
        rows.append((f"GPU {g.device} memory peak", f"{gib(g.peak_bytes)} of {gib(g.total_bytes)}"
                     + (f" ({pct:.1f}%), headroom {gib(g.headroom_bytes)}" if isinstance(pct, (int, float)) else "")))
    for t in c.throttle:
        if t.samples:
            rs = ", ".join(f"{r.reason} {r.window_pct:.1f}%" for r in t.reasons)
            rows.append((f"GPU {t.device} clocks throttled", f"{t.affected_pct:.1f}% of the window" + (f" ({rs})" if rs else "")))
    if isinstance(c.rss_peak_bytes, (int, float)):
        rows.append(("process RSS peak", gib(c.rss_peak_bytes)))
    for v, lab in ((c.page_faults_per_s, "page faults / s"), (c.ctx_switches_per_s, "context switches / s"),
                   (c.invol_ctx_switches_per_s, "involuntary context switches / s"),
                   (c.sys_cpu_pct, "kernel-mode CPU, % of one core"), (c.main_runq_pct, "main thread waiting for a CPU, % of time")):
        if isinstance(v, (int, float)):
            rows.append((lab, f"{v:,.1f}"))
    pc = c.process_cores
    if pc is not None:
        rows.append(("CPU cores of the process", f"{pc.cores} ({pc.basis}): mean {pc.mean_util_pct:.1f}%, "
                                                f"busiest {pc.max_core_mean_util_pct:.1f}%"))
    nm = c.numa
    if nm is not None:
        gn = ", ".join(f"{g.pci_bus_id} node {g.numa_node}" for g in nm.gpu_numa_nodes)
        rows.append(("NUMA", f"{nm.numa_nodes} node(s); process on {nm.process_numa_nodes} ({nm.process_cpus} CPUs)"
                             + (f"; GPU {gn}; local {nm.gpu_local}" if gn else "")))
    if not rows:
        return ""
    return ('<section id="counters"><h2>Counters</h2><table class="ev"><tbody>' +
            "".join(f"<tr><td>{text(k, 80)}</td><td>{text(v, 400)}</td></tr>" for k, v in rows) +
            '</tbody></table><p class="muted">Per-counter min/mean/p95/max, means per step / range and per core: '
            'the counter tables below.</p></section>')


def _llm(report: Report) -> str:
    ll, lat, stg, mdl = llm_lines(report)
    el = efficiency_lines(report)
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


def _notes(report: Report) -> str:
    out = []
    if report.warnings:
        out.append('<section id="warnings" class="warn"><h2>Warnings</h2><ul>' +
                   "".join(f"<li>{text(x, 2000)}</li>" for x in report.warnings[:100]) + "</ul></section>")
    if report.limitations:
        out.append('<section id="limitations"><h2>Limitations</h2><ul>' +
                   "".join(f"<li>{text(x, 2000)}</li>" for x in report.limitations[:100]) + "</ul></section>")
    return "".join(out)


def _about(report: Report) -> str:
    src = report.source
    about = report.about
    rows = []
    for k, v in (("format", src.format), ("file", src.file), ("events", src.events)):
        if v not in (None, ""):
            rows.append((k, v))
    for d in src.devices[:8]:
        rows.append((f"device {d.id}", d.name))
    for k in about.__struct_fields__:                   # (About's field names are its JSON keys)
        v = getattr(about, k)
        if isinstance(v, (int, float, str)) and not isinstance(v, bool):
            rows.append((k, v))
    for k, v in list(src.tool_versions.items())[:10]:
        rows.append((f"version: {k}", v))
    return ('<section id="about"><h2>About this analysis</h2><table class="ev"><tbody>' +
            "".join(f'<tr><td>{text(k, 80)}</td><td>{fmt_cell(v)}</td></tr>' for k, v in rows) + "</tbody></table></section>")
