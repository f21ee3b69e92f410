"""Renderers for ``inferscope diff``: diff.md, diff.json, diff.html (one self-contained page).

Every name from a trace or report is escaped (``markdown.md_escape``, ``html_text.text``)."""
from __future__ import annotations

import html as _html
import json
from pathlib import Path

from ..errors import ConfigError, InferScopeError
from ..util.atomic import atomic_write_text
from .html_assets import CATEGORY_COLOURS, CSP, CSS
from .html_text import fmt_ms, text
from .markdown import md_code, md_escape, md_heading
from .whatif_text import prediction_lines

FORMATS = {"md": "diff.md", "markdown": "diff.md", "json": "diff.json", "html": "diff.html", "htm": "diff.html"}
DEFAULT_FORMATS = "md,json"


def _f(v, nd=3, sign=False):
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, (int, float)):
        return f"{v:+,.{nd}f}" if sign else f"{v:,.{nd}f}"
    return md_escape(v)


def to_markdown(d: dict) -> str:
    e = d["e2e"]
    L = ["# InferScope diff", "",
         f"- before: {md_code(d['before']['path'])} ({md_escape(d['before']['input'])}, {md_escape(d['before']['format'])}, "
         f"window {md_escape(d['before']['window'])})",
         f"- after: {md_code(d['after']['path'])} ({md_escape(d['after']['input'])}, {md_escape(d['after']['format'])}, "
         f"window {md_escape(d['after']['window'])})", "",
         f"**{md_escape(d['change']['text'], 400)}**", "",
         f"End-to-end: {_f(e['before_ms'])} ms -> {_f(e['after_ms'])} ms ({_f(e['delta_ms'], sign=True)} ms, "
         f"{_f(e['delta_pct'], 1, True)}%)  ",
         f"Verdict: {md_escape(d['verdict_before']['id'])} -> {md_escape(d['verdict_after']['id'])}"
         + (" (changed)" if d["verdict_changed"] else ""), ""]
    if d["findings"]["appeared"] or d["findings"]["resolved"]:
        L.append(f"Findings appeared: {', '.join(map(md_escape, d['findings']['appeared'])) or 'none'}; "
                 f"resolved: {', '.join(map(md_escape, d['findings']['resolved'])) or 'none'}")
        L.append("")
    if d.get("predictions"):
        L += ["## Predicted savings of before vs measured", "", f"Basis: {md_escape(d['predictions']['basis'], 300)}; "
              f"noise ±{_f(d['predictions']['noise_ms'])} ms.", ""]
        L += [f"- {md_escape(x, 500)}" for x in prediction_lines(d["predictions"])] + [""]
    L += ["## Breakdown", "", "| category | before ms | after ms | delta ms | before % | after % | delta pp |",
          "|---|---:|---:|---:|---:|---:|---:|"]
    for c in d["categories"]:
        if c["before_ms"] == 0 and c["after_ms"] == 0:
            continue
        L.append(f"| {md_escape(c['category'])} | {_f(c['before_ms'])} | {_f(c['after_ms'])} | {_f(c['delta_ms'], sign=True)} | "
                 f"{_f(c['before_pct'], 1)} | {_f(c['after_pct'], 1)} | {_f(c['delta_pp'], 1, True)} |")
        for p in c["parts"]:
            L.append(f"| ↳ {md_escape(p['name'])} | {_f(p['before_ms'])} | {_f(p['after_ms'])} | "
                     f"{_f(p['delta_ms'], sign=True)} | {_f(p['before_pct'], 1)} | {_f(p['after_pct'], 1)} | {_f(p['delta_pp'], 1, True)} |")
    n = d.get("noise")
    L += ["", "## Noise", ""]
    if n:
        L += [f"Repeated unit: {md_escape(n['unit'])} ({n['unit_kind']}); before n={n['before']['n']} mean {_f(n['before']['mean_ms'])} ms "
              f"(sd {_f(n['before']['std_ms'])}), after n={n['after']['n']} mean {_f(n['after']['mean_ms'])} ms (sd {_f(n['after']['std_ms'])}); "
              f"difference {_f(n['delta_ms'], sign=True)} ms, 95% band ±{_f(n['band_ms'])} ms.", "",
              f"Rule: {md_escape(n['rule'], 400)}"]
    else:
        L.append("No repeated steps or ranges on both sides: the noise is unknown; the verdict rests on the e2e change alone.")
    if d.get("llm"):
        L += ["", "## LLM metrics", "", "| metric | before | after | delta | delta % | better |", "|---|---:|---:|---:|---:|---|"]
        for r in d["llm"]["metrics"]:
            L.append(f"| {md_escape(r['metric'])} | {_f(r['before'])} | {_f(r['after'])} | {_f(r['delta'], sign=True)} | "
                     f"{_f(r['delta_pct'], 1, True)} | {'' if r['better'] is None else ('yes' if r['better'] else 'no')} |")
    for kind, t in d["named"].items():
        if not (t["recorded"]["before"] and t["recorded"]["after"]):
            side = "before" if not t["recorded"]["before"] else "after"
            L += ["", f"## {md_heading(kind + 's')}", "", f"Not recorded in the {side} input: no comparison."]
            continue
        L += ["", f"## {md_heading(kind + 's')}", "",
              f"{t['appeared_count']} appeared, {t['disappeared_count']} disappeared "
              f"({md_escape(d['named_basis']['before'])}).", ""]
        if t["changed"]:
            L += ["Changed most:", "", "| name | before ms | after ms | delta ms | count before | count after |", "|---|---:|---:|---:|---:|---:|"]
            for r in t["changed"]:
                L.append(f"| {md_escape(r['name'])} | {_f(r['before_ms'])} | {_f(r['after_ms'])} | {_f(r['delta_ms'], sign=True)} | "
                         f"{r['before_count']:,} | {r['after_count']:,} |")
            L.append("")
        for word in ("appeared", "disappeared"):
            if t[word]:
                L += [f"{word.capitalize()} (largest first):", "", "| name | ms | count |", "|---|---:|---:|"]
                L += [f"| {md_escape(r['name'])} | {_f(r['ms'])} | {r['count']:,} |" for r in t[word]]
                L.append("")
    if d["warnings"]:
        L += ["", "## Warnings", ""] + [f"- {md_escape(w, 400)}" for w in d["warnings"]]
    return "\n".join(L).rstrip() + "\n"


def _row(cells, numeric_from=1) -> str:
    return "<tr>" + "".join(f'<td class="n">{c}</td>' if i >= numeric_from else f"<td>{c}</td>"
                            for i, c in enumerate(cells)) + "</tr>"


def _bars(d: dict) -> str:
    """Before/after stacked breakdown bars (inline SVG)."""
    W, H, x0 = 900, 70, 60
    out = [f'<svg class="chart" viewBox="0 0 {W} {H + 20}" role="img" aria-label="breakdown before and after">']
    for j, (side, key) in enumerate((("before", "before_pct"), ("after", "after_pct"))):
        y = 5 + j * 35
        out.append(f'<text x="0" y="{y + 18}" font-size="12">{side}</text>')
        x = float(x0)
        for c in d["categories"]:
            w = (W - x0) * max(0.0, c[key]) / 100.0
            if w <= 0:
                continue
            col = CATEGORY_COLOURS.get(c["category"], "#999")
            out.append(f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="26" fill="{col}">'
                       f'<title>{text(c["category"])}: {c[key]:.1f}%</title></rect>')
            x += w
    out.append("</svg>")
    legend = "".join(f'<span><svg class="sw" viewBox="0 0 10 10"><rect width="10" height="10" fill="{CATEGORY_COLOURS.get(c["category"], "#999")}"/></svg>'
                     f'{text(c["category"])}</span>' for c in d["categories"] if c["before_ms"] or c["after_ms"])
    return "".join(out) + f'<div class="legend">{legend}</div>'


def to_html(d: dict) -> str:
    e = d["e2e"]
    h = [f'<section><div class="headline"><div><div class="lbl">change</div><div class="verdict">{text(d["change"]["text"], 400)}</div></div></div>'
         f'<p>End-to-end {fmt_ms(e["before_ms"])} → {fmt_ms(e["after_ms"])} ({_f(e["delta_pct"], 1, True)}%); verdict '
         f'{text(d["verdict_before"]["id"])} → {text(d["verdict_after"]["id"])}</p></section>']
    if d.get("predictions"):
        h.append("<section><h2>Predicted savings of before vs measured</h2><ul>" +
                 "".join(f"<li>{text(x, 500)}</li>" for x in prediction_lines(d["predictions"])) + "</ul></section>")
    h.append("<section><h2>Breakdown</h2>" + _bars(d) + '<div class="tw"><table><thead><tr><th>category</th><th>before ms</th>'
             "<th>after ms</th><th>delta ms</th><th>before %</th><th>after %</th><th>delta pp</th></tr></thead><tbody>")
    for c in d["categories"]:
        if c["before_ms"] == 0 and c["after_ms"] == 0:
            continue
        h.append(_row([text(c["category"]), _f(c["before_ms"]), _f(c["after_ms"]), _f(c["delta_ms"], sign=True),
                       _f(c["before_pct"], 1), _f(c["after_pct"], 1), _f(c["delta_pp"], 1, True)]))
        for p in c["parts"]:
            h.append(_row(["&nbsp;&nbsp;" + text(p["name"]), _f(p["before_ms"]), _f(p["after_ms"]), _f(p["delta_ms"], sign=True),
                           _f(p["before_pct"], 1), _f(p["after_pct"], 1), _f(p["delta_pp"], 1, True)]))
    h.append("</tbody></table></div></section>")
    if d.get("llm"):
        h.append("<section><h2>LLM metrics</h2><table><thead><tr><th>metric</th><th>before</th><th>after</th><th>delta</th>"
                 "<th>delta %</th></tr></thead><tbody>")
        h += [_row([text(r["metric"]), _f(r["before"]), _f(r["after"]), _f(r["delta"], sign=True), _f(r["delta_pct"], 1, True)])
              for r in d["llm"]["metrics"]]
        h.append("</tbody></table></section>")
    for kind, t in d["named"].items():
        if not (t["recorded"]["before"] and t["recorded"]["after"]):
            continue
        h.append(f"<section><h2>{text(kind)}s</h2><p>{t['appeared_count']} appeared, {t['disappeared_count']} disappeared.</p>")
        if t["changed"]:
            h.append('<div class="tw"><table><thead><tr><th>changed most</th><th>before ms</th><th>after ms</th><th>delta ms</th>'
                     "</tr></thead><tbody>")
            h += [_row([text(r["name"]), _f(r["before_ms"]), _f(r["after_ms"]), _f(r["delta_ms"], sign=True)]) for r in t["changed"]]
            h.append("</tbody></table></div>")
        for word in ("appeared", "disappeared"):
            if t[word]:
                h.append(f'<div class="tw"><table><thead><tr><th>{word}</th><th>ms</th><th>count</th></tr></thead><tbody>')
                h += [_row([text(r["name"]), _f(r["ms"]), f"{r['count']:,}"]) for r in t[word]]
                h.append("</tbody></table></div>")
        h.append("</section>")
    if d["warnings"]:
        h.append('<section><h2>Warnings</h2><ul class="warn">' + "".join(f"<li>{text(w, 400)}</li>" for w in d["warnings"]) + "</ul></section>")
    title = f"InferScope diff: {d['before']['path']} → {d['after']['path']}"
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{_html.escape(CSP, quote=True)}">'
            f"<title>{text(title, 300)}</title><style>{CSS}</style></head><body>"
            f"<header><h1>InferScope diff</h1><div class=\"src\">{text(d['before']['path'])} → {text(d['after']['path'])}</div></header>"
            f"<main>{''.join(h)}</main></body></html>\n")


def write(d: dict, outdir: str | Path, formats: str | None) -> list[Path]:
    fmts = []
    for f in (formats or DEFAULT_FORMATS).split(","):
        f = f.strip().lower()
        if not f:
            continue
        if f not in FORMATS:
            raise ConfigError(f"unknown diff format {f!r} (choose from md, json, html)")
        if FORMATS[f] not in fmts:
            fmts.append(FORMATS[f])
    out = Path(outdir)
    written = []
    for name in fmts:
        p = out / name
        body = (json.dumps(d, indent=2, ensure_ascii=False, allow_nan=False) + "\n" if name.endswith(".json")
                else to_markdown(d) if name.endswith(".md") else to_html(d))
        try:
            atomic_write_text(p, body)
        except OSError as e:
            raise InferScopeError(f"cannot write {p}: {e.strerror or e}") from None
        written.append(p)
    return written
