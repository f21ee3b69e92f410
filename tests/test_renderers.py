"""Every renderer over every kind of trace (parametrised, as pyinstrument does)."""
import csv
import json

import pytest

from inferscope.analyze.pipeline import analyze, analyze_report
from inferscope.analyze.views import attach
from inferscope.report import RENDERERS, get_renderer
from inferscope.trace import CopyKind, MemKind, SpanKind
from inferscope.result import from_dict

from helpers import Synth

HOSTILE = ['<script>alert(1)</script>', '"><img src=x onerror=alert(1)>', "a|b`c\nd", "=cmd|' /C calc'!A0",
           "\u202egnp.exe", "x" * 10_000, "\x00\x07ctl"]


def gpu_trace():
    t = Synth()
    t.span(SpanKind.STEP, "ProfilerStep#1", 0, 400)
    t.span(SpanKind.ANNOTATION, "tokenize", 0, 50)
    t.span(SpanKind.CPU_OP, "aten::linear", 50, 120)
    t.launch(60, 70, 80, 200, name="gemm")
    t.copy(210, 220, 230, 260, ck=CopyKind.H2D, host=MemKind.PAGEABLE)
    t.span(SpanKind.RUNTIME, "cudaDeviceSynchronize", 270, 350)
    return t.done()


def cpu_trace():
    t = Synth()
    t.span(SpanKind.CPU_SAMPLE, "tokenization", 0, 100, detail=t.b.strings.intern("tok.py:encode"))
    t.span(SpanKind.CPU_OP, "aten::mm", 100, 300)
    t.span(SpanKind.CPU_SAMPLE, "waiting", 300, 350)
    return t.done()


def hostile_trace():
    t = Synth()
    for i, name in enumerate(HOSTILE):
        t.span(SpanKind.ANNOTATION, name, i * 100, i * 100 + 50)
        t.launch(i * 100 + 1, i * 100 + 2, i * 100 + 5, i * 100 + 40, name=name)
    return t.done()


def mark_only_trace():
    t = Synth()
    t.span(SpanKind.MARK, "m", 5, 5)
    return t.done()


TRACES = {"gpu": gpu_trace, "cpu_only": cpu_trace, "hostile": hostile_trace, "marks_only": mark_only_trace}


@pytest.mark.parametrize("fmt", sorted(RENDERERS))
@pytest.mark.parametrize("kind", sorted(TRACES))
def test_every_renderer_on_every_trace(tmp_path, fmt, kind):
    trace = TRACES[kind]()
    res = analyze_report(trace)          # the typed Report, with what its format draws from the trace
    attach(res, trace, [fmt])
    out = tmp_path / ("tables" if fmt == "csv" else f"out.{fmt}")
    get_renderer(fmt)(res, trace, out)
    files = [p for p in (out.rglob("*") if out.is_dir() else [out]) if p.is_file()]
    assert files or (fmt == "csv" and not res.tables)
    for p in files:
        data = p.read_bytes()
        assert data
        if p.suffix == ".json":
            json.loads(data)
    assert not list(tmp_path.rglob("*.tmp"))
    if kind == "hostile" and fmt == "md":
        md = out.read_text()
        from helpers import md_markup
        assert md_markup(md) == [] and "\u202e" not in md and "\x00" not in md
        assert "x" * 1000 not in md  # long names truncated
    if kind == "hostile" and fmt == "csv":
        for p in files:
            for row in csv.reader(p.open()):
                for cell in row:
                    assert not (cell[:1] in ("=", "+", "@") and not cell.replace(".", "").isdigit()), cell


def test_cpu_only_report_hygiene(tmp_path):
    """issue 24, on the committed CPU demo (a live HF generate() run, no GPU), written as md + html only:
    each table once (its ranges appeared in three NVTX tables), no empty or GPU-only table, no reference to a
    CSV file that was not written, no internal words (seed-004)."""
    import re
    from pathlib import Path
    from inferscope.cli import main
    from inferscope.report.html import build_html
    from inferscope.report.markdown import render_markdown
    demo = Path(__file__).resolve().parents[1] / "examples" / "reports" / "cpu_demo.iscope"
    assert main(["analyze", str(demo), "-o", str(tmp_path / "r.md"), "--format", "md,html", "-q"]) == 0
    md, doc = (tmp_path / "r.md").read_text(), (tmp_path / "r.html").read_text()
    assert not list(tmp_path.glob("*tables*"))
    rep = json.loads(json.dumps(analyze(__import__("inferscope").ingest.load_trace(str(demo)))))
    assert rep["gpu"] is None
    names = [r[0] for r in rep["tables"]["ranges"]["rows"]]
    assert "generate" in names
    # every range is listed by exactly one ranges table (the counter means per range are another quantity)
    sections = [sec for sec in md.split("\n## ") if not sec.startswith("Counter means per step")]
    for nm in names:
        holding = [sec.splitlines()[0] for sec in sections
                   if re.search(rf"^\| (\d[\d,]* \| )?{re.escape(nm)} \|", sec, flags=re.M)]
        assert len(holding) == 1, (nm, holding)
    h3 = re.findall(r'<h3 id="table-([^"]+)"', doc)
    assert len(h3) == len(set(h3)) and "nvtx_ranges" not in h3 and "nvtx_by_pid" not in h3 and "breakdown" not in h3
    assert 'class="muted">empty<' not in doc
    for gpu_table in ("kernels_by_pid", "sync_by_pid", "launch_latency", "memory_ops_by_api", "sync_like_api_names"):
        assert gpu_table not in h3
    for text in (md, doc):
        assert "seed-0" not in text.lower() and "seed 0" not in text.lower()
        assert "CSV table" not in text
    # a long table in Markdown points at what exists: --format csv / json, never "the CSV table" it did not write
    rows = [[f"f{i}", i] for i in range(30)]
    res = dict(rep, tables=dict(rep["tables"], top_python_functions={"columns": ["function", "ms"], "rows": rows}))
    out = render_markdown(from_dict(res))
    assert "(20 more rows not shown; --format csv or json writes every row)" in out
    assert "CSV table" not in build_html(from_dict(res))


def test_views_are_carried_not_encoded_and_renderers_compute_nothing(tmp_path):
    """report.views (analyze/views.py) is what report.html and the CSVs draw beyond report.json: attaching it leaves
    report.json byte-identical, and a renderer given a Report without views draws no strip and writes the idle-gap
    table as report.json holds it, even with the trace at hand (report/ computes nothing from it)."""
    import msgspec
    trace = gpu_trace()
    rep = analyze_report(trace)
    raw = msgspec.json.encode(rep)
    get_renderer("html")(rep, trace, tmp_path / "bare.html")
    assert "No trace available." in (tmp_path / "bare.html").read_text()
    attach(rep, trace, ["html", "csv"])
    assert msgspec.json.encode(rep) == raw and "views" not in rep.to_dict()
    assert rep.views.timeline is not None and rep.views.idle_gaps is not None
    get_renderer("html")(rep, trace, tmp_path / "r.html")
    assert "No trace available." not in (tmp_path / "r.html").read_text() and "all (breakdown)" in (tmp_path / "r.html").read_text()
    # the strip's partition lane is the breakdown, to the nanosecond
    assert rep.views.timeline.partition.class_ns == {c.category: c.ns for c in rep.breakdown}
