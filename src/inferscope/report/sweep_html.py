"""scaling_summary.html: latency and throughput vs the swept parameter, breakdown shares stacked per
value (inline SVG, no script, no network; every name escaped)."""
from __future__ import annotations

import html as _html

from .html_assets import CATEGORY_COLOURS, CSP, CSS
from .html_text import fmt_ms, text

_SERIES = ["#4e79a7", "#e15759", "#59a14f", "#f28e2b", "#b07aa1", "#76b7b2", "#edc948", "#9c755f"]


def _line_chart(series: list[dict], key: str, ylabel: str, title: str) -> str:
    """series: [{label, values (x labels), ys}] sharing x positions by index of the value."""
    W, H, L, B, T, R = 640, 260, 70, 40, 20, 20
    xs = series[0]["values"]
    ys_all = [y for s in series for y in s[key] if y is not None]
    if not ys_all:
        return f"<p class=\"muted\">{text(title)}: unknown.</p>"
    ymax = max(ys_all) * 1.1 or 1.0
    n = len(xs)

    def px(i):
        return L + (W - L - R) * (i / (n - 1) if n > 1 else 0.5)

    def py(y):
        return T + (H - T - B) * (1 - y / ymax)
    out = [f'<svg class="chart" viewBox="0 0 {W} {H}" role="img" aria-label="{text(title)}">',
           f'<line x1="{L}" y1="{H - B}" x2="{W - R}" y2="{H - B}" stroke="#888"/>',
           f'<line x1="{L}" y1="{T}" x2="{L}" y2="{H - B}" stroke="#888"/>']
    for k in range(5):
        y = ymax * k / 4
        out.append(f'<text x="{L - 6}" y="{py(y) + 4:.1f}" font-size="11" text-anchor="end">{y:.3g}</text>')
    for i, v in enumerate(xs):
        out.append(f'<text x="{px(i):.1f}" y="{H - B + 16}" font-size="11" text-anchor="middle">{text(v, 20)}</text>')
    out.append(f'<text x="{(L + W - R) / 2}" y="{H - 6}" font-size="12" text-anchor="middle">{text(series[0]["param"])}</text>')
    out.append(f'<text x="12" y="{T + (H - T - B) / 2}" font-size="12" transform="rotate(-90 12 {T + (H - T - B) / 2})" '
               f'text-anchor="middle">{text(ylabel)}</text>')
    for j, s in enumerate(series):
        col = _SERIES[j % len(_SERIES)]
        pts = [(px(i), py(y)) for i, y in enumerate(s[key]) if y is not None]
        if len(pts) > 1:
            out.append(f'<polyline fill="none" stroke="{col}" stroke-width="2" points="' +
                       " ".join(f"{x:.1f},{y:.1f}" for x, y in pts) + '"/>')
        for (x, y), v, yy in zip(pts, [v for v, y in zip(s["values"], s[key]) if y is not None], [y for y in s[key] if y is not None]):
            out.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="4" fill="{col}"><title>{text(s["label"])} '
                       f'{text(s["param"])}={text(v)}: {yy:.4g}</title></circle>')
    out.append("</svg>")
    if len(series) > 1:
        out.append('<div class="legend">' + "".join(
            f'<span><svg class="sw" viewBox="0 0 10 10"><rect width="10" height="10" fill="{_SERIES[j % len(_SERIES)]}"/></svg>'
            f'{text(s["label"])}</span>' for j, s in enumerate(series)) + "</div>")
    return "".join(out)


def _stacked(points: list[dict], names: list[str]) -> str:
    W, bar_h, gap, L = 900, 22, 8, 170
    pts = [p for p in points if p["shares_pct"]]
    H = len(pts) * (bar_h + gap) + 10
    out = [f'<svg class="chart" viewBox="0 0 {W} {H}" role="img" aria-label="breakdown shares per value">']
    cats = []
    for i, p in enumerate(pts):
        y = 5 + i * (bar_h + gap)
        label = ", ".join(f"{n}={p['params'][n]}" for n in names)
        out.append(f'<text x="0" y="{y + 15}" font-size="12">{text(label, 40)}</text>')
        x = float(L)
        for c, pct in p["shares_pct"].items():
            if not pct:
                continue
            if c not in cats:
                cats.append(c)
            w = (W - L - 10) * pct / 100
            out.append(f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{bar_h}" fill="{CATEGORY_COLOURS.get(c, "#999")}">'
                       f'<title>{text(label)}: {text(c)} {pct:.1f}%</title></rect>')
            x += w
    out.append("</svg>")
    out.append('<div class="legend">' + "".join(
        f'<span><svg class="sw" viewBox="0 0 10 10"><rect width="10" height="10" fill="{CATEGORY_COLOURS.get(c, "#999")}"/></svg>'
        f"{text(c)}</span>" for c in cats) + "</div>")
    return "".join(out)


def _opt(v) -> str:
    return "n/a" if v is None else f"{v:.3f}"


def build(summary: dict) -> str:
    names = [p["name"] for p in summary["params"]]
    body = []
    statements = [f"{s['param']}" + (" (" + ", ".join(f"{k}={v}" for k, v in s["fixed"].items()) + ")" if s["fixed"] else "") +
                  f": {st}" for s in summary["scaling"] for st in s["statements"]]
    body.append("<section><h2>What changes with the parameter</h2>" +
                ("<ul>" + "".join(f"<li>{text(x, 400)}</li>" for x in statements) + "</ul>" if statements
                 else '<p class="muted">Fewer than two values with a report: nothing to compare.</p>') +
                f"<p class=\"muted\">Command: <code>{text(' '.join(summary['command']), 400)}</code>; "
                f"{len(summary['rows'])} runs ({summary['repeat']} per value); failed: {summary['failed_runs']}.</p></section>")
    # charts along the first parameter (one series per combination of the others)
    first = names[0]
    series = []
    for s in summary["scaling"]:
        if s["param"] != first:
            continue
        lbl = ", ".join(f"{k}={v}" for k, v in s["fixed"].items()) or first
        series.append({"label": lbl, "param": first, "values": s["values"], "e2e_ms": s["e2e_ms"], "throughput": s["throughput"]})
    if series:
        unit = next((s["throughput_unit"] for s in summary["scaling"] if s["throughput_unit"]), None)
        body.append("<section><h2>Latency</h2>" + _line_chart(series, "e2e_ms", "e2e (ms)", "e2e vs " + first) + "</section>")
        body.append("<section><h2>Throughput</h2>" + _line_chart(series, "throughput", unit or "throughput", "throughput vs " + first) +
                    "</section>")
    body.append("<section><h2>Breakdown shares per value</h2>" + _stacked(summary["points"], names) + "</section>")
    head = "".join(f"<th>{text(n)}</th>" for n in names) + "<th>repeat</th><th>exit</th><th>e2e</th><th>throughput</th><th>verdict</th><th>TTFT ms</th><th>TPOT ms</th>"
    rows = []
    for r in summary["rows"]:
        thr = "n/a" if r["throughput"] is None else f"{r['throughput']:.4g} {text(r['throughput_unit'])}"
        rows.append("<tr>" + "".join(f"<td>{text(r['params'][n])}</td>" for n in names) +
                    f'<td class="n">{r["repeat"]}</td><td class="n">{r["exit_code"]}</td><td class="n">{fmt_ms(r["e2e_ms"])}</td>'
                    f'<td class="n">{thr}</td><td>{text(r["verdict"] or "n/a")}</td>'
                    f'<td class="n">{_opt(r["ttft_ms"])}</td><td class="n">{_opt(r["tpot_ms"])}</td></tr>')
    body.append(f'<section><h2>Runs</h2><div class="tw"><table><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table></div></section>')
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{_html.escape(CSP, quote=True)}">'
            f"<title>InferScope sweep: {text(', '.join(names))}</title><style>{CSS}</style></head><body>"
            f"<header><h1>InferScope sweep</h1><div class=\"src\">{text(' '.join(summary['command']), 300)}</div></header>"
            f"<main>{''.join(body)}</main></body></html>\n")
